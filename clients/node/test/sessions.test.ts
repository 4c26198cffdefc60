// The package's own tests, against a running session-processor whose model is the demo provider (`make up`'s, or
// the one tests/tests/clients_node.rs starts): PROCESSOR_ADDR, PROCESSOR_TOKEN, and MODEL (default
// `demo/scripted`). Run with `npm test` after `npm install` (which builds the package).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { type ClientTool, SessionsClient, type ToolCall, channelTarget, transcript } from "../src/index";

const MODEL = process.env.MODEL ?? "demo/scripted";
const TIMEOUT_MS = 60_000;
const GET_TIME: ClientTool = {
  name: "get_time",
  description: "The current time in a timezone.",
  inputSchema: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
};

async function collect<T>(events: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("offline", () => {
  test("channelTarget strips the scheme", () => {
    assert.equal(channelTarget("http://127.0.0.1:50152"), "127.0.0.1:50152");
    assert.equal(channelTarget("127.0.0.1:50152"), "127.0.0.1:50152");
  });
});

describe("against the services", () => {
  const client = SessionsClient.fromEnv();
  after(() => client.close());

  test("createSession", async () => {
    const session = await client.createSession({ model: MODEL, metadata: { from: "node" } });
    assert.match(session.id, /^ses_/);
    assert.equal(session.default_model, MODEL);
    assert.deepEqual(session.metadata, { from: "node" });
    assert.equal((await client.getSession(session.id)).id, session.id);
  });

  test("prompt streams text until done", async () => {
    const session = await client.createSession({ model: MODEL });
    const events = await collect(client.prompt(session.id, "Hello there", { timeoutMs: TIMEOUT_MS }));
    const last = events[events.length - 1];
    assert.equal(last.event, "done");
    assert.equal(last.done?.stopped_by, "STOP_REASON_COMPLETED");
    const text = events.map((e) => (e.event === "part_delta" ? (e.part_delta?.delta ?? "") : "")).join("");
    assert.match(text, /no tools/);
    const ids = events.map((e) => e.event_id);
    assert.deepEqual(ids, [...ids].sort(), "event ids increase along a stream");
  });

  test("run answers client tool calls", async () => {
    const session = await client.createSession({ model: MODEL });
    const calls: ToolCall[] = [];
    const handle = (call: ToolCall) => {
      calls.push(call);
      return `12:34 in ${(call.input as { timezone: string }).timezone}`;
    };
    const events = await collect(
      client.run(session.id, "What time is it?", { get_time: { tool: GET_TIME, handle } }, { timeoutMs: TIMEOUT_MS }),
    );
    assert.deepEqual(
      calls.map((c) => c.input),
      [{ timezone: "UTC" }],
    );
    assert.equal(events[events.length - 1].event, "done");
    const lines = transcript(await client.listMessages(session.id));
    assert.equal(lines[0], "user: What time is it?");
    assert.ok(lines.includes('tool get_time({"timezone":"UTC"}) -> 12:34 in UTC'), lines.join("\n"));
    assert.match(lines[lines.length - 1], /The tool says: 12:34 in UTC\./);
  });

  test("a failing handler answers an error", async () => {
    const session = await client.createSession({ model: MODEL });
    const handle = (): string => {
      throw new Error("clock unavailable");
    };
    await collect(
      client.run(session.id, "What time is it?", { get_time: { tool: GET_TIME, handle } }, { timeoutMs: TIMEOUT_MS }),
    );
    const messages = await client.listMessages(session.id);
    const tools = messages.flatMap((m) => m.parts).filter((p) => p.kind === "tool");
    assert.deepEqual(
      tools.map((p) => p.tool?.state?.status),
      ["STATUS_ERROR"],
    );
    assert.equal(tools[0].tool?.state?.error, "Error: clock unavailable");
  });

  test("subscribe replays after an event id", async () => {
    const session = await client.createSession({ model: MODEL });
    const events = await collect(client.prompt(session.id, "Hello", { timeoutMs: TIMEOUT_MS }));
    const replayed = await collect(
      client.subscribe(session.id, { afterEventId: events[0].event_id, timeoutMs: TIMEOUT_MS }),
    );
    assert.deepEqual(
      replayed.map((e) => e.event_id),
      events.slice(1).map((e) => e.event_id),
    );
  });

  test("an unknown token is unauthenticated", async () => {
    const other = new SessionsClient(process.env.PROCESSOR_ADDR ?? "", "not-a-token-of-this-processor");
    try {
      await assert.rejects(other.createSession({ model: MODEL }), { code: grpc.status.UNAUTHENTICATED });
    } finally {
      other.close();
    }
  });

  test("an unknown session is not found", async () => {
    await assert.rejects(client.getSession(`ses_${"0".repeat(24)}`), { code: grpc.status.NOT_FOUND });
  });
});
