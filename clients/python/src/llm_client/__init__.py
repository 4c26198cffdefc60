"""Python client of llm-gateway and session-processor.

`llm_client.SessionsClient` wraps the generated `llm.sessions.v1` stubs with the verbs most callers need: create a
session, prompt it, stream its events, answer client tool calls, subscribe. The generated modules are importable
directly (`from llm.sessions.v1 import sessions_pb2`, `from llm.gateway.v1 import gateway_pb2_grpc`).
"""

from llm_client.sessions import (
    CHANNEL_OPTIONS,
    ClientTool,
    SessionsClient,
    ToolCall,
    ToolHandler,
    channel_target,
    event_kind,
    tool_call,
    transcript,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "ClientTool",
    "SessionsClient",
    "ToolCall",
    "ToolHandler",
    "channel_target",
    "event_kind",
    "tool_call",
    "transcript",
]
