"""The official `openai` Python SDK, unchanged but for its base URL and key, against the gateway's HTTP front door.

Run by the Rust tests in tests/tests/http_sdks.rs, one scenario per run (the first argument), with the gateway's
front door in GATEWAY_HTTP_URL (ending in /v1) and a caller token in GATEWAY_TOKEN; the Rust side has queued the fake
providers' replies. Each check prints `ok: <name>` when it holds and exits non-zero at the first that does not; the
Rust side compares the names printed with the list it expects, so a check that never ran fails the test.
"""

import json
import os
import sys

import openai
from pydantic import BaseModel

from sdk_checks import check


def client(key: str = "") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=os.environ["GATEWAY_HTTP_URL"],
        api_key=key or os.environ["GATEWAY_TOKEN"],
        max_retries=0,
        timeout=20,
    )


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Time in a timezone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
    },
}


def text(model: str) -> None:
    """Streamed with usage, then the same question not streamed (the fake provider answers both)."""
    c = client()
    stream = c.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(streamed == os.environ["EXPECT_TEXT"], "stream_text", streamed)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    check(finishes == ["stop"], "stream_finish_reason", finishes)
    usage = chunks[-1].usage
    check(usage is not None and not chunks[-1].choices, "stream_usage_chunk_last", chunks[-1])
    check(usage.prompt_tokens == int(os.environ["EXPECT_PROMPT_TOKENS"]), "stream_prompt_tokens", usage)
    cached = usage.prompt_tokens_details.cached_tokens
    check(cached == int(os.environ["EXPECT_CACHED_TOKENS"]), "stream_cached_tokens", usage)

    reply = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])
    check(reply.choices[0].message.content == os.environ["EXPECT_TEXT"], "whole_text", reply)
    check(reply.choices[0].finish_reason == "stop", "whole_finish_reason", reply)
    # The same scripted answer as the stream: the same usage, to the token.
    counts = lambda u: (u.prompt_tokens, u.completion_tokens, u.total_tokens, u.prompt_tokens_details.cached_tokens)
    check(counts(reply.usage) == counts(usage), "whole_usage", (reply.usage, usage))


def tools(model: str) -> None:
    """Two parallel calls streamed in fragments, then the results sent back for the answer."""
    c = client()
    messages = [{"role": "user", "content": "Weather in Paris and the time there?"}]
    calls: dict[int, dict] = {}
    finish = None
    for ch in c.chat.completions.create(model=model, messages=messages, tools=[WEATHER, TIME], stream=True):
        if not ch.choices:
            continue
        for tc in ch.choices[0].delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = tc.id or call["id"]
            call["name"] = (tc.function.name or call["name"]) if tc.function else call["name"]
            call["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = ch.choices[0].finish_reason or finish
    check(finish == "tool_calls", "first_turn_finish_tool_calls", finish)
    names = [calls[i]["name"] for i in sorted(calls)]
    check(names == os.environ["EXPECT_TOOLS"].split(","), "parallel_calls", calls)
    args = [json.loads(calls[i]["arguments"]) for i in sorted(calls)]
    check(args[0].get("city") == "Paris", "fragmented_arguments_join", args)

    messages.append({
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": calls[i]["id"], "type": "function",
             "function": {"name": calls[i]["name"], "arguments": calls[i]["arguments"]}}
            for i in sorted(calls)
        ],
    })
    for i in sorted(calls):
        messages.append({"role": "tool", "tool_call_id": calls[i]["id"], "content": f"result {i}"})
    reply = c.chat.completions.create(model=model, messages=messages, tools=[WEATHER, TIME])
    check(reply.choices[0].message.content == os.environ["EXPECT_TEXT"], "second_turn_answer", reply)


class City(BaseModel):
    city: str
    population: int


def json_schema(model: str) -> None:
    """`response_format` from a Pydantic model, parsed back by the SDK."""
    reply = client().chat.completions.parse(
        model=model,
        messages=[{"role": "user", "content": "The largest city of France?"}],
        response_format=City,
    )
    parsed = reply.choices[0].message.parsed
    check(parsed == City(city="Paris", population=2102650), "parsed_output", reply)


def errors(model: str) -> None:
    """A provider rate limit, an unknown model, a wrong key: each the SDK's own exception and status."""
    try:
        client().chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])
        check(False, "rate_limited", "no error")
    except openai.RateLimitError as e:
        check(e.status_code == 429, "rate_limited", e)
        check(e.response.headers.get("retry-after") == "30", "retry_after_header", dict(e.response.headers))
        # The provider's own error object, as the provider wrote it (EXPECT_ERROR is its JSON).
        check(e.body == json.loads(os.environ["EXPECT_ERROR"])["error"], "provider_error_object", e.body)
        headers = e.response.headers
        check(headers.get("x-ratelimit-remaining-requests") == "0"
              and headers.get("x-request-id") == "req_rate_limited", "rate_limit_headers", dict(headers))
    try:
        client().chat.completions.create(model="openai/no-such-model", messages=[{"role": "user", "content": "Hi"}])
        check(False, "unknown_model", "no error")
    except openai.NotFoundError as e:
        check("openai/no-such-model" in str(e), "unknown_model", e)
    try:
        client(key="not-a-token-of-this-gateway").chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}])
        check(False, "wrong_key", "no error")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "wrong_key", e)
    try:
        client().chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], n=2)
        check(False, "invalid_field", "no error")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "n", "invalid_field", e.body)


def cancel(model: str) -> None:
    """Reads the first text delta and closes the stream; the Rust side checks that the provider call ended."""
    stream = client().chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], stream=True)
    for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            break
    stream.close()
    check(True, "closed_after_first_delta")


def models() -> None:
    listed = [m.id for m in client().models.list()]
    check("openai/gpt-4o" in listed and "anthropic/claude-sonnet-4-5" in listed, "models_listed", listed)


def main() -> None:
    scenario = sys.argv[1]
    model = os.environ.get("MODEL", "")
    {
        "text": lambda: text(model),
        "tools": lambda: tools(model),
        "json_schema": lambda: json_schema(model),
        "errors": lambda: errors(model),
        "cancel": lambda: cancel(model),
        "models": models,
    }[scenario]()


if __name__ == "__main__":
    main()
