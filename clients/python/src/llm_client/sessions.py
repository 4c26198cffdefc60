"""A typed helper over the generated `llm.sessions.v1.SessionService` stubs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

import grpc

from llm.sessions.v1 import sessions_pb2 as pb
from llm.sessions.v1 import sessions_pb2_grpc as rpc

MIB = 1024 * 1024

# The client settings docs/operations.md ("Client settings") documents: 32 MiB both ways (a prompt may carry 3 MiB
# of content), and a keepalive ping every 30 s answered within 10 s, also between calls.
CHANNEL_OPTIONS: List[Tuple[str, int]] = [
    ("grpc.max_send_message_length", 32 * MIB),
    ("grpc.max_receive_message_length", 32 * MIB),
    ("grpc.keepalive_time_ms", 30000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


@dataclass(frozen=True)
class ClientTool:
    """A tool the caller runs: offered to the model with a prompt, answered with `SubmitToolResult`."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_proto(self) -> pb.ClientTool:
        return pb.ClientTool(
            name=self.name,
            description=self.description,
            input_schema_json=json.dumps(self.input_schema),
        )


@dataclass(frozen=True)
class ToolCall:
    """A client tool call the running loop waits for (a `tool_call_awaiting` event), input decoded."""

    call_id: str
    tool: str
    input: Any
    part_id: str
    message_id: str


# Runs a client tool: returns its output, or raises to answer the call as an error (the exception's text is what
# the model sees).
ToolHandler = Callable[[ToolCall], str]


def channel_target(addr: str) -> str:
    """`host:port` for grpc from an address that may carry a scheme (`make up` prints `http://127.0.0.1:50152`)."""
    for scheme in ("http://", "https://", "grpc://"):
        if addr.startswith(scheme):
            addr = addr[len(scheme):]
    return addr.rstrip("/")


def event_kind(event: pb.SessionEvent) -> str:
    """Which event it is: `part_delta`, `part_updated`, `tool_call_awaiting`, `done`, ... (the oneof's field)."""
    return event.WhichOneof("event") or ""


class SessionsClient:
    """A session-processor client with the caller's bearer token.

    `SessionsClient("127.0.0.1:50152", token)`, or `SessionsClient.from_env()` with `make up`'s PROCESSOR_ADDR and
    PROCESSOR_TOKEN. Plaintext unless a `grpc.ChannelCredentials` is given. Close it (or use `with`) when done.
    """

    def __init__(
        self,
        addr: str,
        token: str,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        options: Sequence[Tuple[str, Any]] = tuple(CHANNEL_OPTIONS),
    ) -> None:
        target = channel_target(addr)
        if credentials is None:
            self.channel = grpc.insecure_channel(target, options=list(options))
        else:
            self.channel = grpc.secure_channel(target, credentials, options=list(options))
        self.stub = rpc.SessionServiceStub(self.channel)
        self.metadata: List[Tuple[str, str]] = [("authorization", "Bearer " + token)]

    @classmethod
    def from_env(cls) -> "SessionsClient":
        """From PROCESSOR_ADDR (default `127.0.0.1:50152`, `make up`'s) and PROCESSOR_TOKEN."""
        return cls(os.environ.get("PROCESSOR_ADDR", "127.0.0.1:50152"), os.environ["PROCESSOR_TOKEN"])

    def __enter__(self) -> "SessionsClient":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def create_session(
        self,
        *,
        model: str = "",
        agent: str = "",
        workspace: str = "",
        metadata: Optional[Mapping[str, str]] = None,
        budget_usd: float = 0.0,
    ) -> pb.Session:
        """Creates an empty session; an empty `model` or `agent` means the processor's defaults."""
        req = pb.CreateSessionRequest(
            agent=agent,
            default_model=model,
            workspace=workspace,
            metadata=dict(metadata or {}),
            budget_usd=budget_usd,
        )
        return self.stub.CreateSession(req, metadata=self.metadata).session

    def get_session(self, session_id: str) -> pb.Session:
        return self.stub.GetSession(pb.GetSessionRequest(session_id=session_id), metadata=self.metadata).session

    def prompt(
        self,
        session_id: str,
        text: str,
        *,
        model: str = "",
        tools: Sequence[ClientTool] = (),
        system: str = "",
        idempotency_key: str = "",
        timeout: Optional[float] = None,
    ) -> Iterator[pb.SessionEvent]:
        """Sends a prompt and yields the session's events until the stream ends, at the `done` of the run that
        answered this prompt (the last event yielded). A prompt queued behind a running loop may first see that
        loop's `done`: the stream goes on past it to its own answer.

        Client tool calls arrive as `tool_call_awaiting` events: answer each with `submit_tool_result` while
        iterating (or use `run`, which does it for you).
        """
        req = pb.PromptRequest(
            session_id=session_id,
            parts=[pb.PromptPart(text=text)],
            model=model,
            client_tools=[t.to_proto() for t in tools],
            system=system,
            idempotency_key=idempotency_key,
        )
        stream = self.stub.Prompt(req, metadata=self.metadata, timeout=timeout)
        # The server ends a Prompt stream at the right `done`; read it to its end.
        return (r.event for r in stream)

    def subscribe(
        self, session_id: str, *, after_event_id: str = "", timeout: Optional[float] = None
    ) -> Iterator[pb.SessionEvent]:
        """Yields the session's events after `after_event_id` (empty: from now on), from any replica, until `done`."""
        req = pb.SubscribeRequest(session_id=session_id, after_event_id=after_event_id)
        stream = self.stub.Subscribe(req, metadata=self.metadata, timeout=timeout)
        return _until_done(r.event for r in stream)

    def submit_tool_result(self, session_id: str, call_id: str, output: str, *, is_error: bool = False) -> None:
        """Answers a client tool call; `is_error` makes `output` the error the model sees."""
        req = pb.SubmitToolResultRequest(session_id=session_id, call_id=call_id, output=output, is_error=is_error)
        self.stub.SubmitToolResult(req, metadata=self.metadata)

    def run(
        self,
        session_id: str,
        text: str,
        handlers: Mapping[str, Tuple[ClientTool, ToolHandler]],
        *,
        model: str = "",
        timeout: Optional[float] = None,
    ) -> Iterator[pb.SessionEvent]:
        """`prompt` offering each handler's tool, answering every call with its handler's output (or its exception
        as an error); yields every event, the tool calls included, until `done`."""
        tools = [tool for tool, _ in handlers.values()]
        for event in self.prompt(session_id, text, model=model, tools=tools, timeout=timeout):
            yield event
            if event_kind(event) == "tool_call_awaiting":
                call = tool_call(event)
                entry = handlers.get(call.tool)
                if entry is None:
                    self.submit_tool_result(session_id, call.call_id, f"no handler for {call.tool}", is_error=True)
                    continue
                try:
                    output, failed = entry[1](call), False
                except Exception as e:  # noqa: BLE001 - the tool's failure is the model's to see
                    output, failed = f"{type(e).__name__}: {e}", True
                self.submit_tool_result(session_id, call.call_id, output, is_error=failed)

    def list_messages(self, session_id: str) -> List[pb.Message]:
        """Every message with its parts, oldest first (pages followed; a message split over pages is joined)."""
        out: List[pb.Message] = []
        token = ""
        while True:
            req = pb.ListMessagesRequest(session_id=session_id, page_token=token)
            page = self.stub.ListMessages(req, metadata=self.metadata)
            for m in page.messages:
                if out and out[-1].id == m.id:
                    out[-1].parts.extend(m.parts)
                else:
                    out.append(m)
            token = page.next_page_token
            if not token:
                return out

    def abort(self, session_id: str) -> bool:
        return self.stub.Abort(pb.AbortRequest(session_id=session_id), metadata=self.metadata).aborted


def tool_call(event: pb.SessionEvent) -> ToolCall:
    """The `tool_call_awaiting` event as a ToolCall (input JSON decoded; `{}` when empty)."""
    a = event.tool_call_awaiting
    return ToolCall(
        call_id=a.call_id,
        tool=a.tool,
        input=json.loads(a.input_json or "{}"),
        part_id=a.part_id,
        message_id=a.message_id,
    )


def _until_done(events: Iterator[pb.SessionEvent]) -> Iterator[pb.SessionEvent]:
    for event in events:
        yield event
        if event_kind(event) == "done":
            return


def transcript(messages: Sequence[pb.Message]) -> List[str]:
    """One line per text part and tool call of `messages`: `user: ...`, `assistant: ...`, `tool get_time(...) -> ...`."""
    lines: List[str] = []
    for m in messages:
        who = "user" if m.role == pb.ROLE_USER else "assistant"
        for p in m.parts:
            kind = p.WhichOneof("kind")
            if kind == "text" and p.text.text:
                lines.append(f"{who}: {p.text.text}")
            elif kind == "tool":
                state = p.tool.state
                result = state.output if state.status == pb.ToolState.STATUS_COMPLETED else "error: " + state.error
                lines.append(f"tool {p.tool.tool}({state.input_json}) -> {result}")
    return lines

