// Node/TypeScript client of llm-gateway and session-processor: the protos loaded with @grpc/proto-loader (shipped
// in ./proto), types generated from them (./generated), and SessionsClient, a typed helper with the verbs most
// callers need: create a session, prompt it, stream its events, answer client tool calls, subscribe.
import * as path from "node:path";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType as GatewayProto } from "./generated/gateway";
import type { AbortResponse__Output } from "./generated/llm/sessions/v1/AbortResponse";
import type { CreateSessionResponse__Output } from "./generated/llm/sessions/v1/CreateSessionResponse";
import type { GetSessionResponse__Output } from "./generated/llm/sessions/v1/GetSessionResponse";
import type { ListMessagesResponse__Output } from "./generated/llm/sessions/v1/ListMessagesResponse";
import type { Message__Output } from "./generated/llm/sessions/v1/Message";
import type { Session__Output } from "./generated/llm/sessions/v1/Session";
import type { SessionEvent__Output } from "./generated/llm/sessions/v1/SessionEvent";
import type { SessionServiceClient } from "./generated/llm/sessions/v1/SessionService";
import type { ProtoGrpcType as SessionsProto } from "./generated/sessions";

export type { Message__Output as Message } from "./generated/llm/sessions/v1/Message";
export type { Session__Output as Session } from "./generated/llm/sessions/v1/Session";
export type { SessionEvent__Output as SessionEvent } from "./generated/llm/sessions/v1/SessionEvent";
export type { SessionServiceClient, GatewayProto, SessionsProto };

/** The protos shipped with the package (copied from the repository's proto/ at build time). */
export const PROTO_DIR = path.join(__dirname, "..", "..", "proto");

/**
 * How the protos must be loaded for these types: field names as in the .proto (`session_id`), a virtual field
 * naming the set member of each oneof (`event.event === "part_delta"`), 64-bit integers and enums as strings,
 * defaults filled in. The generated types were made with the same settings (scripts/build.mjs).
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

const MIB = 1024 * 1024;

/**
 * The client settings docs/operations.md ("Client settings") documents: 32 MiB both ways (a prompt may carry 3 MiB
 * of content) and a keepalive ping every 30 s answered within 10 s, also between calls.
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_send_message_length": 32 * MIB,
  "grpc.max_receive_message_length": 32 * MIB,
  "grpc.keepalive_time_ms": 30000,
  "grpc.keepalive_timeout_ms": 10000,
  "grpc.keepalive_permit_without_calls": 1,
};

/** The `llm.sessions.v1` package: `loadSessions().llm.sessions.v1.SessionService` is the generated client class. */
export function loadSessions(): SessionsProto {
  const def = protoLoader.loadSync("llm/sessions/v1/sessions.proto", LOADER_OPTIONS);
  return grpc.loadPackageDefinition(def) as unknown as SessionsProto;
}

/** The `llm.gateway.v1` package (GatewayService). */
export function loadGateway(): GatewayProto {
  const def = protoLoader.loadSync("llm/gateway/v1/gateway.proto", LOADER_OPTIONS);
  return grpc.loadPackageDefinition(def) as unknown as GatewayProto;
}

/** `host:port` from an address that may carry a scheme (`make up` prints `http://127.0.0.1:50152`). */
export function channelTarget(addr: string): string {
  return addr.replace(/^(https?|grpc):\/\//, "").replace(/\/+$/, "");
}

/** A tool the caller runs: offered with a prompt, answered with SubmitToolResult. */
export interface ClientTool {
  name: string;
  description?: string;
  /** JSON Schema of the input, an object schema (default: no properties). */
  inputSchema?: object;
}

/** A client tool call the running loop waits for (a `tool_call_awaiting` event), input decoded. */
export interface ToolCall {
  callId: string;
  tool: string;
  input: unknown;
  partId: string;
  messageId: string;
}

/** Runs a client tool: its output, or a throw to answer the call as an error (the message is what the model sees). */
export type ToolHandler = (call: ToolCall) => string | Promise<string>;

/** A tool and the function that runs it, for SessionsClient.run. */
export interface Handler {
  tool: ClientTool;
  handle: ToolHandler;
}

export interface CreateSessionOptions {
  model?: string;
  agent?: string;
  workspace?: string;
  metadata?: Record<string, string>;
  budgetUsd?: number;
}

export interface PromptOptions {
  model?: string;
  tools?: ClientTool[];
  system?: string;
  idempotencyKey?: string;
  /** Deadline of the whole stream, in milliseconds from now. */
  timeoutMs?: number;
}

/** The `tool_call_awaiting` event as a ToolCall (input JSON decoded; `{}` when empty). */
export function toolCall(event: SessionEvent__Output): ToolCall {
  const a = event.tool_call_awaiting;
  if (!a) {
    throw new Error(`not a tool_call_awaiting event: ${event.event}`);
  }
  return {
    callId: a.call_id,
    tool: a.tool,
    input: JSON.parse(a.input_json || "{}"),
    partId: a.part_id,
    messageId: a.message_id,
  };
}

/** One line per text part and tool call: `user: ...`, `assistant: ...`, `tool get_time(...) -> ...`. */
export function transcript(messages: Message__Output[]): string[] {
  const lines: string[] = [];
  for (const m of messages) {
    const who = m.role === "ROLE_USER" ? "user" : "assistant";
    for (const p of m.parts) {
      if (p.kind === "text" && p.text?.text) {
        lines.push(`${who}: ${p.text.text}`);
      } else if (p.kind === "tool" && p.tool?.state) {
        const s = p.tool.state;
        const result = s.status === "STATUS_COMPLETED" ? s.output : `error: ${s.error}`;
        lines.push(`tool ${p.tool.tool}(${s.input_json}) -> ${result}`);
      }
    }
  }
  return lines;
}

function deadline(timeoutMs?: number): grpc.CallOptions {
  return timeoutMs === undefined ? {} : { deadline: new Date(Date.now() + timeoutMs) };
}

/** A unary call as a promise: `unary<Res>((cb) => stub.Method(req, metadata, cb))`. */
function unary<Res>(call: (cb: grpc.requestCallback<Res>) => grpc.ClientUnaryCall): Promise<Res> {
  return new Promise((resolve, reject) => {
    call((err, res) => (err || res === undefined ? reject(err ?? new Error("no response")) : resolve(res)));
  });
}

/**
 * The events of a stream: until `done` (the last one yielded) when `atDone`, else until the stream ends (a Prompt
 * stream ends at the `done` of the run that answered its prompt, which for a prompt queued behind a running loop is
 * not the first `done` it carries). The stream is then closed.
 */
async function* events(
  stream: grpc.ClientReadableStream<{ event?: SessionEvent__Output | null }>,
  atDone: boolean,
): AsyncGenerator<SessionEvent__Output> {
  try {
    for await (const response of stream) {
      const event = response.event;
      if (!event) continue;
      yield event;
      if (atDone && event.event === "done") return;
    }
  } finally {
    // A stream left early (done, or the caller stopped reading) is cancelled; its CANCELLED status is expected.
    stream.on("error", () => undefined);
    stream.cancel();
  }
}

/**
 * A session-processor client with the caller's bearer token: `new SessionsClient("127.0.0.1:50152", token)`, or
 * `SessionsClient.fromEnv()` with `make up`'s PROCESSOR_ADDR and PROCESSOR_TOKEN. Plaintext unless credentials are
 * given. `close()` it when done.
 */
export class SessionsClient {
  readonly stub: SessionServiceClient;
  private readonly metadata: grpc.Metadata;

  constructor(
    addr: string,
    token: string,
    opts: { credentials?: grpc.ChannelCredentials; options?: grpc.ChannelOptions } = {},
  ) {
    const Service = loadSessions().llm.sessions.v1.SessionService;
    this.stub = new Service(
      channelTarget(addr),
      opts.credentials ?? grpc.credentials.createInsecure(),
      opts.options ?? CHANNEL_OPTIONS,
    );
    this.metadata = new grpc.Metadata();
    this.metadata.set("authorization", `Bearer ${token}`);
  }

  /** From PROCESSOR_ADDR (default `127.0.0.1:50152`, `make up`'s) and PROCESSOR_TOKEN. */
  static fromEnv(): SessionsClient {
    const token = process.env.PROCESSOR_TOKEN;
    if (!token) throw new Error("PROCESSOR_TOKEN is not set (make up prints it)");
    return new SessionsClient(process.env.PROCESSOR_ADDR ?? "127.0.0.1:50152", token);
  }

  close(): void {
    this.stub.close();
  }

  /** Creates an empty session; an empty model or agent means the processor's defaults. */
  async createSession(opts: CreateSessionOptions = {}): Promise<Session__Output> {
    const req = {
      agent: opts.agent ?? "",
      default_model: opts.model ?? "",
      workspace: opts.workspace ?? "",
      metadata: opts.metadata ?? {},
      budget_usd: opts.budgetUsd ?? 0,
    };
    const res = await unary<CreateSessionResponse__Output>((cb) => this.stub.CreateSession(req, this.metadata, cb));
    return required(res.session, "CreateSession");
  }

  async getSession(sessionId: string): Promise<Session__Output> {
    const res = await unary<GetSessionResponse__Output>((cb) =>
      this.stub.GetSession({ session_id: sessionId }, this.metadata, cb),
    );
    return required(res.session, "GetSession");
  }

  /**
   * Sends a prompt and yields the session's events until the stream ends, at the `done` of the run that answered
   * it (a prompt queued behind a running loop first sees that loop's `done`, and goes on). Client tool calls arrive
   * as `tool_call_awaiting` events: answer each with submitToolResult while iterating (or use run).
   */
  prompt(sessionId: string, text: string, opts: PromptOptions = {}): AsyncGenerator<SessionEvent__Output> {
    const req = {
      session_id: sessionId,
      parts: [{ text }],
      model: opts.model ?? "",
      client_tools: (opts.tools ?? []).map((t) => ({
        name: t.name,
        description: t.description ?? "",
        input_schema_json: JSON.stringify(t.inputSchema ?? { type: "object", properties: {} }),
      })),
      system: opts.system ?? "",
      idempotency_key: opts.idempotencyKey ?? "",
    };
    return events(this.stub.Prompt(req, this.metadata, deadline(opts.timeoutMs)), false);
  }

  /** The session's events after `afterEventId` (empty: from now on), from any replica, until `done`. */
  subscribe(
    sessionId: string,
    opts: { afterEventId?: string; timeoutMs?: number } = {},
  ): AsyncGenerator<SessionEvent__Output> {
    const req = { session_id: sessionId, after_event_id: opts.afterEventId ?? "" };
    return events(this.stub.Subscribe(req, this.metadata, deadline(opts.timeoutMs)), true);
  }

  /** Answers a client tool call; with `isError` the output is the error the model sees. */
  async submitToolResult(sessionId: string, callId: string, output: string, isError = false): Promise<void> {
    const req = { session_id: sessionId, call_id: callId, output, is_error: isError };
    await unary((cb) => this.stub.SubmitToolResult(req, this.metadata, cb));
  }

  /**
   * prompt offering each handler's tool, answering every call with its handler's output (or its throw, as an
   * error); yields every event, the tool calls included, until `done`.
   */
  async *run(
    sessionId: string,
    text: string,
    handlers: Record<string, Handler>,
    opts: Omit<PromptOptions, "tools"> = {},
  ): AsyncGenerator<SessionEvent__Output> {
    const tools = Object.values(handlers).map((h) => h.tool);
    for await (const event of this.prompt(sessionId, text, { ...opts, tools })) {
      yield event;
      if (event.event !== "tool_call_awaiting") continue;
      const call = toolCall(event);
      const handler = handlers[call.tool];
      if (!handler) {
        await this.submitToolResult(sessionId, call.callId, `no handler for ${call.tool}`, true);
        continue;
      }
      let output: string;
      let failed = false;
      try {
        output = await handler.handle(call);
      } catch (e) {
        output = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        failed = true;
      }
      await this.submitToolResult(sessionId, call.callId, output, failed);
    }
  }

  /** Every message with its parts, oldest first (pages followed; a message split over pages is joined). */
  async listMessages(sessionId: string): Promise<Message__Output[]> {
    const out: Message__Output[] = [];
    let pageToken = "";
    do {
      const req = { session_id: sessionId, page_token: pageToken };
      const page = await unary<ListMessagesResponse__Output>((cb) => this.stub.ListMessages(req, this.metadata, cb));
      for (const m of page.messages) {
        const last = out[out.length - 1];
        if (last && last.id === m.id) last.parts.push(...m.parts);
        else out.push(m);
      }
      pageToken = page.next_page_token;
    } while (pageToken);
    return out;
  }

  async abort(sessionId: string): Promise<boolean> {
    const res = await unary<AbortResponse__Output>((cb) => this.stub.Abort({ session_id: sessionId }, this.metadata, cb));
    return res.aborted;
  }
}

function required<T>(value: T | null | undefined, rpc: string): T {
  if (value === null || value === undefined) throw new Error(`${rpc} answered without its message`);
  return value;
}
