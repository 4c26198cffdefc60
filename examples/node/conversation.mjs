// Creates a session, sends a prompt offering a client tool, answers the tool call and prints the conversation.
//
//   (cd clients/node && npm install) && (cd examples/node && npm install)   # from the repository's root
//   make up && source .tools/up/env     # PROCESSOR_ADDR, PROCESSOR_TOKEN, DEMO_MODEL
//   node examples/node/conversation.mjs
//
// Without a running stack's environment it talks to 127.0.0.1:50152 (`make up`'s processor) with the model
// `demo/scripted` (the demo provider); PROCESSOR_TOKEN is always needed. Exits non-zero when the conversation did
// not end as a completed answer.
import { SessionsClient, transcript } from "llm-grpc-client";

const getTime = {
  tool: {
    name: "get_time",
    description: "Returns the current time in a timezone (only UTC here).",
    inputSchema: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
  },
  // The client tool runs here, in the caller's process, never on the processor.
  handle(call) {
    if (call.input.timezone !== "UTC") throw new Error("only UTC is known here");
    return `${new Date().toISOString().slice(11, 19)} UTC`;
  },
};

const model = process.env.DEMO_MODEL ?? "demo/scripted";
const client = SessionsClient.fromEnv();
let done;
try {
  const session = await client.createSession({ model });
  console.log(`[session ${session.id}, model ${model}]`);
  for await (const event of client.run(session.id, "What time is it in UTC?", { get_time: getTime }, { timeoutMs: 120_000 })) {
    if (event.event === "part_delta") process.stdout.write(event.part_delta.delta);
    else if (event.event === "tool_call_awaiting") {
      const call = event.tool_call_awaiting;
      console.log(`\n[tool call ${call.tool} ${call.input_json}]`);
    } else if (event.event === "done") done = event.done;
  }
  console.log("\n--- the conversation, as stored:");
  for (const line of transcript(await client.listMessages(session.id))) console.log(line);
} finally {
  client.close();
}
if (done?.stopped_by !== "STOP_REASON_COMPLETED") {
  console.error(`the loop did not complete: ${JSON.stringify(done)}`);
  process.exit(1);
}
