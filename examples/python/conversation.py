"""Creates a session, sends a prompt offering a client tool, answers the tool call and prints the conversation.

    pip install ./clients/python        # from the repository's root
    make up && source .tools/up/env     # PROCESSOR_ADDR, PROCESSOR_TOKEN, DEMO_MODEL
    python3 examples/python/conversation.py

Without a running stack's environment it talks to 127.0.0.1:50152 (`make up`'s processor) with the model
`demo/scripted` (the demo provider); PROCESSOR_TOKEN is always needed. Exits non-zero when the conversation did not
end as a completed answer.
"""

import datetime
import os
import sys

from llm.sessions.v1 import sessions_pb2 as pb
from llm_client import ClientTool, SessionsClient, ToolCall, event_kind, transcript

GET_TIME = ClientTool(
    name="get_time",
    description="Returns the current time in a timezone (only UTC here).",
    input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
)


def get_time(call: ToolCall) -> str:
    """The client tool: runs here, in the caller's process, never on the processor."""
    if call.input.get("timezone") != "UTC":
        raise ValueError("only UTC is known here")
    return datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S UTC")


def main() -> int:
    model = os.environ.get("DEMO_MODEL", "demo/scripted")
    with SessionsClient.from_env() as client:
        session = client.create_session(model=model)
        print(f"[session {session.id}, model {model}]")
        done = None
        for event in client.run(session.id, "What time is it in UTC?", {"get_time": (GET_TIME, get_time)},
                                timeout=120):
            kind = event_kind(event)
            if kind == "part_delta":
                print(event.part_delta.delta, end="", flush=True)
            elif kind == "tool_call_awaiting":
                print(f"\n[tool call {event.tool_call_awaiting.tool} {event.tool_call_awaiting.input_json}]")
            elif kind == "done":
                done = event.done
        print("\n--- the conversation, as stored:")
        for line in transcript(client.list_messages(session.id)):
            print(line)
    if done is None or done.stopped_by != pb.STOP_REASON_COMPLETED:
        print(f"the loop did not complete: {done}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
