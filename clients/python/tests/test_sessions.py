"""The package's own tests, against a running session-processor whose model is the demo provider (`make up`'s, or
the one tests/tests/clients_packages.rs starts): PROCESSOR_ADDR, PROCESSOR_TOKEN, and MODEL (default
`demo/scripted`).

Run with `python -m unittest discover -v -s clients/python/tests` after installing the package. The checks are
unittest assertions (methods, not `assert` statements), so they hold under PYTHONOPTIMIZE too.
"""

import os
import unittest

import grpc

from llm.sessions.v1 import sessions_pb2 as pb
from llm_client import ClientTool, SessionsClient, ToolCall, channel_target, event_kind, transcript

MODEL = os.environ.get("MODEL", "demo/scripted")
GET_TIME = ClientTool(
    name="get_time",
    description="The current time in a timezone.",
    input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
)
TIMEOUT = 60.0


class Offline(unittest.TestCase):
    def test_channel_target_strips_the_scheme(self) -> None:
        self.assertEqual(channel_target("http://127.0.0.1:50152"), "127.0.0.1:50152")
        self.assertEqual(channel_target("127.0.0.1:50152"), "127.0.0.1:50152")

    def test_client_tool_schema_is_json(self) -> None:
        proto = GET_TIME.to_proto()
        self.assertEqual(proto.name, "get_time")
        self.assertIn('"required": ["timezone"]', proto.input_schema_json)


class AgainstTheServices(unittest.TestCase):
    def setUp(self) -> None:
        self.client = SessionsClient.from_env()
        self.addCleanup(self.client.close)

    def test_create_session(self) -> None:
        session = self.client.create_session(model=MODEL, metadata={"from": "python"})
        self.assertTrue(session.id.startswith("ses_"), session.id)
        self.assertEqual(session.default_model, MODEL)
        self.assertEqual(dict(session.metadata), {"from": "python"})
        self.assertEqual(self.client.get_session(session.id).id, session.id)

    def test_prompt_streams_text_until_done(self) -> None:
        session = self.client.create_session(model=MODEL)
        events = list(self.client.prompt(session.id, "Hello there", timeout=TIMEOUT))
        kinds = [event_kind(e) for e in events]
        self.assertEqual(kinds[-1], "done")
        self.assertEqual(events[-1].done.stopped_by, pb.STOP_REASON_COMPLETED)
        text = "".join(e.part_delta.delta for e in events if event_kind(e) == "part_delta")
        self.assertIn("no tools", text)
        ids = [e.event_id for e in events]
        self.assertEqual(ids, sorted(ids), "event ids increase along a stream")

    def test_run_answers_client_tool_calls(self) -> None:
        session = self.client.create_session(model=MODEL)
        calls = []

        def get_time(call: ToolCall) -> str:
            calls.append(call)
            return "12:34 in " + call.input["timezone"]

        events = list(self.client.run(session.id, "What time is it?", {"get_time": (GET_TIME, get_time)},
                                      timeout=TIMEOUT))
        self.assertEqual([c.input for c in calls], [{"timezone": "UTC"}])
        self.assertEqual(event_kind(events[-1]), "done")
        lines = transcript(self.client.list_messages(session.id))
        self.assertEqual(lines[0], "user: What time is it?")
        self.assertIn('tool get_time({"timezone":"UTC"}) -> 12:34 in UTC', lines)
        self.assertIn("The tool says: 12:34 in UTC.", lines[-1])

    def test_a_failing_handler_answers_an_error(self) -> None:
        session = self.client.create_session(model=MODEL)

        def broken(_: ToolCall) -> str:
            raise RuntimeError("clock unavailable")

        list(self.client.run(session.id, "What time is it?", {"get_time": (GET_TIME, broken)}, timeout=TIMEOUT))
        tools = [p.tool for m in self.client.list_messages(session.id) for p in m.parts if p.HasField("tool")]
        self.assertEqual([t.state.status for t in tools], [pb.ToolState.STATUS_ERROR])
        self.assertEqual(tools[0].state.error, "RuntimeError: clock unavailable")

    def test_subscribe_replays_after_an_event_id(self) -> None:
        session = self.client.create_session(model=MODEL)
        events = list(self.client.prompt(session.id, "Hello", timeout=TIMEOUT))
        replayed = list(self.client.subscribe(session.id, after_event_id=events[0].event_id, timeout=TIMEOUT))
        self.assertEqual([e.event_id for e in replayed], [e.event_id for e in events[1:]])

    def test_an_unknown_token_is_unauthenticated(self) -> None:
        with SessionsClient(os.environ["PROCESSOR_ADDR"], "not-a-token-of-this-processor") as other:
            with self.assertRaises(grpc.RpcError) as caught:
                other.create_session(model=MODEL)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_an_unknown_session_is_not_found(self) -> None:
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.get_session("ses_" + "0" * 24)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
