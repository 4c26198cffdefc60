// The official `openai` npm package, unchanged but for its base URL and key, against the gateway's HTTP front door.
//
// Run by tests/tests/http_openai_node.rs, one scenario per run (the first argument), with the front door in
// GATEWAY_HTTP_URL (ending in /v1) and a caller token in GATEWAY_TOKEN; the Rust side has queued the fake providers'
// replies. Each check prints `ok: <name>` when it holds and exits non-zero at the first that does not; the Rust side
// compares the names printed with the list it expects.

import OpenAI from "openai";

function check(ok, name, detail = "") {
  if (!ok) {
    console.error(`FAILED: ${name}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok: ${name}`);
}

const client = new OpenAI({
  baseURL: process.env.GATEWAY_HTTP_URL,
  apiKey: process.env.GATEWAY_TOKEN,
  maxRetries: 0,
  timeout: 20_000,
});
const model = process.env.MODEL;

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const TIME = {
  type: "function",
  function: {
    name: "get_time",
    description: "Time in a timezone",
    parameters: { type: "object", properties: { timezone: { type: "string" } } },
  },
};

async function text() {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Hi" }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = "";
  let usage = null;
  for await (const chunk of stream) {
    streamed += chunk.choices[0]?.delta?.content ?? "";
    usage = chunk.usage ?? usage;
  }
  check(streamed === process.env.EXPECT_TEXT, "stream_text", streamed);
  check(usage?.prompt_tokens === Number(process.env.EXPECT_PROMPT_TOKENS), "stream_usage", usage);
  const reply = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }] });
  check(reply.choices[0].message.content === process.env.EXPECT_TEXT, "whole_text", reply);
}

async function tools() {
  // The SDK's own tool-call accumulation (`finalChatCompletion`) joins the fragmented arguments.
  const runner = client.chat.completions.stream({
    model,
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [WEATHER, TIME],
  });
  const first = await runner.finalChatCompletion();
  const calls = first.choices[0].message.tool_calls ?? [];
  check(first.choices[0].finish_reason === "tool_calls", "first_turn_finish_tool_calls", first);
  const names = calls.map((c) => c.function.name).join(",");
  check(names === process.env.EXPECT_TOOLS && JSON.parse(calls[0].function.arguments).city === "Paris",
    "arguments_joined", calls);
  const messages = [
    { role: "user", content: "Weather in Paris?" },
    first.choices[0].message,
    ...calls.map((c, i) => ({ role: "tool", tool_call_id: c.id, content: `result ${i}` })),
  ];
  const reply = await client.chat.completions.create({ model, messages, tools: [WEATHER, TIME] });
  check(reply.choices[0].message.content === process.env.EXPECT_TEXT, "second_turn_answer", reply);
}

async function errors() {
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }] });
    check(false, "rate_limited", "no error");
  } catch (e) {
    check(e instanceof OpenAI.RateLimitError && e.status === 429, "rate_limited", String(e));
    check(e.headers?.get("retry-after") === "30", "retry_after_header", String(e));
  }
}

const scenarios = { text, tools, errors };
await scenarios[process.argv[2]]();
