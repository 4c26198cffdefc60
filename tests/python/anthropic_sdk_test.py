"""The official `anthropic` Python SDK, unchanged but for its base URL and key, against the gateway's HTTP front door.

Run by the Rust tests in tests/tests/http_anthropic_sdk.rs, one scenario per run (the first argument), with the
gateway's front door in GATEWAY_HTTP_URL and a caller token in GATEWAY_TOKEN; the Rust side has queued the fake
providers' replies. Each check prints `ok: <name>` when it holds and exits non-zero at the first that does not; the
Rust side compares the names printed with the list it expects, so a check that never ran fails the test.
"""

import json
import os
import sys

import anthropic

from sdk_checks import check


def client(key: str = "") -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=os.environ["GATEWAY_HTTP_URL"],
        api_key=key or os.environ["GATEWAY_TOKEN"],
        max_retries=0,
        timeout=20,
    )


WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {
    "name": "get_time",
    "description": "Time in a timezone",
    "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
}


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def text(model: str) -> None:
    """Streamed through the SDK's helper, then the same question not streamed."""
    c = client()
    with c.messages.stream(
        model=model,
        max_tokens=512,
        system=[{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "Hi"}],
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(streamed == os.environ["EXPECT_TEXT"], "stream_text", streamed)
    check(final.stop_reason == "end_turn", "stream_stop_reason", final.stop_reason)
    u = final.usage
    expected = [int(x) for x in os.environ["EXPECT_USAGE"].split(",")]
    got = [u.input_tokens, u.cache_creation_input_tokens or 0, u.cache_read_input_tokens or 0, u.output_tokens]
    check(got == expected, "stream_usage", got)

    reply = c.messages.create(model=model, max_tokens=512, messages=[{"role": "user", "content": "Hi"}])
    check(text_of(reply) == os.environ["EXPECT_TEXT"], "whole_text", reply)
    check(reply.stop_reason == "end_turn", "whole_stop_reason", reply)
    check(reply.usage.output_tokens == expected[3], "whole_usage", reply.usage)


def tools(model: str) -> None:
    """Signed thinking and a tool call streamed, then the turn sent back as is with the tool's result."""
    c = client()
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    # Thinking is asked for only where the model has it (an Anthropic model); other models get plain tool use.
    extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if os.environ.get("THINKING") else {}
    with c.messages.stream(model=model, max_tokens=2048, tools=[WEATHER, TIME], messages=messages, **extra) as stream:
        first = stream.get_final_message()
    check(first.stop_reason == "tool_use", "first_turn_stop_tool_use", first.stop_reason)
    kinds = [b.type for b in first.content]
    check(kinds == os.environ["EXPECT_BLOCKS"].split(","), "content_blocks", kinds)
    uses = [b for b in first.content if b.type == "tool_use"]
    check(uses[0].name == "get_weather" and uses[0].input.get("city") == "Paris", "tool_input_joined", uses)
    check([u.name for u in uses] == os.environ["EXPECT_TOOLS"].split(","), "tool_names", uses)
    signed = [b for b in first.content if b.type == "thinking"]
    if os.environ.get("EXPECT_SIGNATURE"):
        check(signed and signed[0].signature.startswith(os.environ["EXPECT_SIGNATURE"]), "thinking_signature", signed)

    messages.append({"role": "assistant", "content": first.content})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": u.id, "content": f"result {i}"} for i, u in enumerate(uses)
    ]})
    reply = c.messages.create(model=model, max_tokens=2048, tools=[WEATHER, TIME], messages=messages, **extra)
    check(text_of(reply) == os.environ["EXPECT_TEXT"], "second_turn_answer", reply)


def errors(model: str) -> None:
    """An overloaded provider (529), an unknown model, a wrong key: each the SDK's own exception and status."""
    try:
        client().messages.create(model=model, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
        check(False, "overloaded", "no error")
    except anthropic.APIStatusError as e:
        check(e.status_code == 529, "overloaded", e)
        # The provider's own error body, as the provider wrote it (EXPECT_ERROR is its JSON), and its headers.
        check(e.body == json.loads(os.environ["EXPECT_ERROR"]), "provider_error_body", e.body)
        headers = e.response.headers
        check(headers.get("request-id") == "req_overloaded"
              and headers.get("anthropic-ratelimit-requests-remaining") == "49", "rate_limit_headers", dict(headers))
    try:
        client().messages.create(model="anthropic/no-such-model", max_tokens=64,
                                 messages=[{"role": "user", "content": "Hi"}])
        check(False, "unknown_model", "no error")
    except anthropic.NotFoundError as e:
        check(e.body.get("error", {}).get("type") == "not_found_error", "unknown_model", e.body)
    try:
        client(key="not-a-token-of-this-gateway").messages.create(
            model=model, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
        check(False, "wrong_key", "no error")
    except anthropic.AuthenticationError as e:
        check(e.status_code == 401, "wrong_key", e)


def cancel(model: str) -> None:
    """Reads the first text delta and closes the stream; the Rust side checks that the provider call ended."""
    with client().messages.stream(model=model, max_tokens=64, messages=[{"role": "user", "content": "Hi"}]) as s:
        for _ in s.text_stream:
            break
    check(True, "closed_after_first_delta")


def main() -> None:
    scenario = sys.argv[1]
    model = os.environ.get("MODEL", "")
    {"text": text, "tools": tools, "errors": errors, "cancel": cancel}[scenario](model)


if __name__ == "__main__":
    main()
