package dev.llm.examples;

import dev.llm.sessions.v1.ClientTool;
import dev.llm.sessions.v1.CreateSessionRequest;
import dev.llm.sessions.v1.Done;
import dev.llm.sessions.v1.ListMessagesRequest;
import dev.llm.sessions.v1.ListMessagesResponse;
import dev.llm.sessions.v1.Message;
import dev.llm.sessions.v1.Part;
import dev.llm.sessions.v1.PromptPart;
import dev.llm.sessions.v1.PromptRequest;
import dev.llm.sessions.v1.PromptResponse;
import dev.llm.sessions.v1.Role;
import dev.llm.sessions.v1.SessionEvent;
import dev.llm.sessions.v1.SessionServiceGrpc;
import dev.llm.sessions.v1.StopReason;
import dev.llm.sessions.v1.SubmitToolResultRequest;
import dev.llm.sessions.v1.ToolCallAwaiting;
import dev.llm.sessions.v1.ToolState;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;

/**
 * Creates a session, sends a prompt offering a client tool, answers the tool call and prints the conversation, with
 * the Java code generated from the protos (protoc's java and grpc-java generators) and grpc-java.
 *
 * <pre>
 *   make up &amp;&amp; source .tools/up/env      # PROCESSOR_ADDR, PROCESSOR_TOKEN, DEMO_MODEL
 *   examples/java/build.sh /tmp/conversation &amp;&amp; examples/java/run.sh /tmp/conversation
 * </pre>
 *
 * <p>Without a running stack's environment it talks to 127.0.0.1:50152 ({@code make up}'s processor) with the model
 * {@code demo/scripted} (the demo provider); PROCESSOR_TOKEN is always needed. Exits non-zero when the conversation
 * did not end as a completed answer.
 */
public final class Conversation {
  private static final String GET_TIME_SCHEMA =
      "{\"type\":\"object\",\"properties\":{\"timezone\":{\"type\":\"string\"}},\"required\":[\"timezone\"]}";
  private static final int MIB = 1024 * 1024;

  private Conversation() {}

  public static void main(String[] args) throws InterruptedException {
    String token = System.getenv("PROCESSOR_TOKEN");
    if (token == null || token.isEmpty()) {
      System.err.println("PROCESSOR_TOKEN is not set (make up prints it)");
      System.exit(1);
    }
    String addr = env("PROCESSOR_ADDR", "127.0.0.1:50152").replaceFirst("^http://", "");
    String model = env("DEMO_MODEL", "demo/scripted");

    // The client settings of docs/operations.md: a 32 MiB receive limit (grpc-java sends anything by default).
    ManagedChannel channel =
        ManagedChannelBuilder.forTarget(addr).usePlaintext().maxInboundMessageSize(32 * MIB).build();
    Metadata auth = new Metadata();
    auth.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + token);
    SessionServiceGrpc.SessionServiceBlockingStub stub =
        SessionServiceGrpc.newBlockingStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(auth))
            .withDeadlineAfter(2, TimeUnit.MINUTES);
    try {
      String id =
          stub.createSession(CreateSessionRequest.newBuilder().setDefaultModel(model).build())
              .getSession()
              .getId();
      System.out.printf("[session %s, model %s]%n", id, model);
      Done done = converse(stub, id);
      System.out.println();
      System.out.println("--- the conversation, as stored:");
      printTranscript(stub, id);
      if (done == null || done.getStoppedBy() != StopReason.STOP_REASON_COMPLETED) {
        System.err.println("the loop did not complete: " + done);
        System.exit(1);
      }
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static String env(String key, String fallback) {
    String v = System.getenv(key);
    return v == null || v.isEmpty() ? fallback : v;
  }

  /** The client tool: it runs here, in the caller's process, never on the processor. */
  private static SubmitToolResultRequest.Builder getTime(String inputJson) {
    if (!inputJson.replace(" ", "").contains("\"timezone\":\"UTC\"")) {
      return SubmitToolResultRequest.newBuilder().setOutput("only UTC is known here").setIsError(true);
    }
    String now = ZonedDateTime.now(ZoneOffset.UTC).format(DateTimeFormatter.ofPattern("HH:mm:ss"));
    return SubmitToolResultRequest.newBuilder().setOutput(now + " UTC");
  }

  /** Sends the prompt, prints the answer as it streams and answers each get_time call, until {@code done}. */
  private static Done converse(SessionServiceGrpc.SessionServiceBlockingStub stub, String id) {
    PromptRequest prompt =
        PromptRequest.newBuilder()
            .setSessionId(id)
            .addParts(PromptPart.newBuilder().setText("What time is it in UTC?"))
            .addClientTools(
                ClientTool.newBuilder()
                    .setName("get_time")
                    .setDescription("Returns the current time in a timezone (only UTC here).")
                    .setInputSchemaJson(GET_TIME_SCHEMA))
            .build();
    Iterator<PromptResponse> stream = stub.prompt(prompt);
    while (stream.hasNext()) {
      SessionEvent event = stream.next().getEvent();
      switch (event.getEventCase()) {
        case PART_DELTA:
          System.out.print(event.getPartDelta().getDelta());
          System.out.flush();
          break;
        case TOOL_CALL_AWAITING:
          ToolCallAwaiting call = event.getToolCallAwaiting();
          System.out.printf("%n[tool call %s %s]%n", call.getTool(), call.getInputJson());
          stub.submitToolResult(
              getTime(call.getInputJson()).setSessionId(id).setCallId(call.getCallId()).build());
          break;
        case DONE:
          return event.getDone();
        default:
          break;
      }
    }
    return null;
  }

  /** Prints one line per text part and tool call, every page of messages followed. */
  private static void printTranscript(SessionServiceGrpc.SessionServiceBlockingStub stub, String id) {
    String token = "";
    do {
      ListMessagesResponse page =
          stub.listMessages(ListMessagesRequest.newBuilder().setSessionId(id).setPageToken(token).build());
      for (Message m : page.getMessagesList()) {
        String who = m.getRole() == Role.ROLE_USER ? "user" : "assistant";
        for (Part p : m.getPartsList()) {
          if (p.hasText() && !p.getText().getText().isEmpty()) {
            System.out.printf("%s: %s%n", who, p.getText().getText());
          } else if (p.hasTool()) {
            ToolState s = p.getTool().getState();
            String result =
                s.getStatus() == ToolState.Status.STATUS_COMPLETED ? s.getOutput() : "error: " + s.getError();
            System.out.printf("tool %s(%s) -> %s%n", p.getTool().getTool(), s.getInputJson(), result);
          }
        }
      }
      token = page.getNextPageToken();
    } while (!token.isEmpty());
  }
}
