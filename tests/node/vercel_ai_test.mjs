// The Vercel AI SDK (`ai` with `@ai-sdk/openai`), unchanged but for its base URL and key, against the gateway's HTTP
// front door: `openai(model)` is the Responses API. Run by tests/tests/http_frameworks.rs, one scenario per run, as
// the other SDK scripts are (GATEWAY_HTTP_URL ends in /v1, GATEWAY_TOKEN is a caller token); each check prints
// `ok: <name>` and the first that fails exits non-zero.

import { APICallError, generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const openai = createOpenAI({ baseURL: process.env.GATEWAY_HTTP_URL, apiKey: process.env.GATEWAY_TOKEN });
const model = openai(process.env.MODEL);
const expectText = process.env.EXPECT_TEXT ?? "";

function check(ok, name, detail = "") {
  if (!ok) {
    console.error(`FAILED: ${name}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok: ${name}`);
}

const scenarios = {
  async text() {
    const whole = await generateText({ model, system: "Be kind.", prompt: "Hi", maxRetries: 0 });
    check(whole.text === expectText, "generate_text", whole.text);
    check(whole.usage.inputTokens === Number(process.env.EXPECT_INPUT_TOKENS), "generate_usage", whole.usage);
    const stream = streamText({ model, prompt: "Hi", maxRetries: 0 });
    let streamed = "";
    for await (const delta of stream.textStream) streamed += delta;
    check(streamed === expectText, "stream_text", streamed);
  },

  async tools() {
    const ran = [];
    const result = await generateText({
      model,
      prompt: "Weather in Paris?",
      maxRetries: 0,
      stopWhen: stepCountIs(3),
      tools: {
        get_weather: tool({
          description: "Weather for a city",
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            ran.push(city);
            return `22C and sunny in ${city}`;
          },
        }),
      },
    });
    check(ran.length === 1 && ran[0] === "Paris", "tool_ran", ran);
    check(result.text === expectText, "tool_round_trip", result.text);
  },

  async structured() {
    const { object } = await generateObject({
      model,
      prompt: "The largest city of France?",
      maxRetries: 0,
      schema: z.object({ city: z.string(), population: z.number() }),
    });
    check(object.city === "Paris" && object.population === 2102650, "structured_output", object);
  },

  async error() {
    try {
      await generateText({ model, prompt: "Hi", maxRetries: 0 });
      check(false, "rate_limited", "no error");
    } catch (e) {
      check(APICallError.isInstance(e) && e.statusCode === 429, "rate_limited", String(e));
    }
  },
};

await scenarios[process.argv[2]]();
