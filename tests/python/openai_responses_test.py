"""The official `openai` Python SDK's Responses API (`client.responses`), unchanged but for its base URL and key,
against the gateway's stateless `POST /v1/responses`.

Run by the Rust tests (tests/tests/http_responses.rs), one scenario per run, as openai_sdk_test.py is: the front door
in GATEWAY_HTTP_URL (ending in /v1), a caller token in GATEWAY_TOKEN, the fake providers' replies queued. Each check
prints `ok: <name>`; the Rust side compares the names with the list it expects.
"""

import json
import os
import sys

import openai
from pydantic import BaseModel

from sdk_checks import check


def client() -> openai.OpenAI:
    return openai.OpenAI(
        base_url=os.environ["GATEWAY_HTTP_URL"], api_key=os.environ["GATEWAY_TOKEN"], max_retries=0, timeout=20
    )


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": "Time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
    "strict": False,
}


def text(model: str) -> None:
    """Streamed (the SDK's event types, in order, with sequence numbers), then the same question whole."""
    c = client()
    events = list(c.responses.create(model=model, instructions="Be kind.", input="Hi", stream=True))
    types = [e.type for e in events]
    check(types[:2] == ["response.created", "response.in_progress"], "stream_starts", types)
    check(types[-1] == "response.completed", "stream_completes", types)
    check([e.sequence_number for e in events] == list(range(len(events))), "sequence_numbers", types)
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    check(streamed == os.environ["EXPECT_TEXT"], "stream_text", streamed)
    final = events[-1].response
    check(final.output_text == os.environ["EXPECT_TEXT"], "stream_output_text", final)
    check(final.usage.input_tokens == int(os.environ["EXPECT_INPUT_TOKENS"]), "stream_usage", final.usage)
    check(final.instructions == "Be kind.", "instructions_echoed", final.instructions)

    whole = c.responses.create(model=model, input=[{"role": "user", "content": "Hi"}])
    check(whole.status == "completed" and whole.output_text == os.environ["EXPECT_TEXT"], "whole_text", whole)
    # The same scripted answer as the stream: the same usage, to the token.
    counts = lambda u: (u.input_tokens, u.output_tokens, u.total_tokens, u.input_tokens_details.cached_tokens)
    check(counts(whole.usage) == counts(final.usage) and whole.id.startswith("resp_"), "whole_usage",
          (whole.usage, final.usage))


def tools(model: str) -> None:
    """A function call streamed, then its output sent back in the next request's input for the answer."""
    c = client()
    history: list = [{"role": "user", "content": "Weather in Paris?"}]
    # With REASONING set, the model thinks, and its reasoning must go back with the call on the second turn.
    reasoning = {"effort": os.environ["REASONING"]} if os.environ.get("REASONING") else openai.NOT_GIVEN
    stream = c.responses.create(model=model, input=history, tools=[WEATHER, TIME], stream=True, reasoning=reasoning)
    final = None
    args: dict[str, str] = {}
    for e in stream:
        if e.type == "response.function_call_arguments.delta":
            args[e.item_id] = args.get(e.item_id, "") + e.delta
        if e.type == "response.completed":
            final = e.response
    calls = [o for o in final.output if o.type == "function_call"]
    check([c.name for c in calls] == os.environ["EXPECT_TOOLS"].split(","), "function_call", final.output)
    streamed = json.loads(args[calls[0].id])
    check(json.loads(calls[0].arguments) == streamed and "city" in streamed, "arguments_streamed",
          (args, calls[0].arguments))
    history += [o.model_dump(exclude_none=True) for o in final.output]
    for call in calls:
        history.append({"type": "function_call_output", "call_id": call.call_id, "output": f"{call.name}: done"})
    reply = c.responses.create(model=model, input=history, tools=[WEATHER, TIME], reasoning=reasoning)
    check(reply.output_text == os.environ["EXPECT_TEXT"], "second_turn_answer", reply)


class City(BaseModel):
    city: str
    population: int


def structured(model: str) -> None:
    """`text.format` from a Pydantic model, parsed back by the SDK."""
    reply = client().responses.parse(model=model, input="The largest city of France?", text_format=City)
    check(reply.output_parsed == City(city="Paris", population=2102650), "parsed_output", reply)


def reasoning(model: str) -> None:
    """Reasoning items come back with their encrypted content, and go back to the model as they were received."""
    c = client()
    first = c.responses.create(model=model, input="27 times 453?", reasoning={"effort": "medium", "summary": "auto"},
                               include=["reasoning.encrypted_content"], store=False)
    items = [o for o in first.output if o.type == "reasoning"]
    check(items and items[0].encrypted_content and items[0].summary, "reasoning_item", first.output)
    second = c.responses.create(
        model=model, input=[{"role": "user", "content": "27 times 453?"}]
        + [o.model_dump(exclude_none=True) for o in first.output] + [{"role": "user", "content": "Sure?"}],
        reasoning={"effort": "medium"}, store=False)
    check(second.status == "completed", "reasoning_replayed", second)


def errors(model: str) -> None:
    """Stateful features are refused naming the field; a provider's rate limit is the SDK's own exception."""
    c = client()
    try:
        c.responses.create(model=model, input="Hi", previous_response_id="resp_123")
        check(False, "stateful_refused", "no error")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "previous_response_id", "stateful_refused", e.body)
    try:
        c.responses.create(model=model, input="Hi")
        check(False, "rate_limited", "no error")
    except openai.RateLimitError as e:
        check(e.status_code == 429 and e.response.headers.get("retry-after") == "30", "rate_limited", e)


def main() -> None:
    model = os.environ.get("MODEL", "")
    {
        "text": text,
        "tools": tools,
        "structured": structured,
        "reasoning": reasoning,
        "errors": errors,
    }[sys.argv[1]](model)


if __name__ == "__main__":
    main()
