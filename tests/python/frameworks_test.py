"""Agent frameworks people build on, pointed at the gateway's HTTP front door with nothing else changed: LangChain
(`langchain-openai`, `langchain-anthropic`), the OpenAI Agents SDK with its default provider (the Responses API), and
pydantic-ai's `openai:` models (also the Responses API).

Run by the Rust tests (tests/tests/http_frameworks.rs), one scenario per run (`<framework>_<what>`), as the SDK
scripts are: the front door in GATEWAY_HTTP_URL (ending in /v1), a caller token in GATEWAY_TOKEN, the fake
providers' replies queued. Each framework is configured the way its own documentation says to reach an
OpenAI-compatible server: through OPENAI_BASE_URL and OPENAI_API_KEY, or its base_url argument.
"""

import os
import sys

import openai
from pydantic import BaseModel

from sdk_checks import check

URL = os.environ["GATEWAY_HTTP_URL"]
TOKEN = os.environ["GATEWAY_TOKEN"]
MODEL = os.environ.get("MODEL", "")
EXPECT_TEXT = os.environ.get("EXPECT_TEXT", "")
# What the frameworks read when they build their default OpenAI client, exactly as a user sets them.
os.environ["OPENAI_BASE_URL"] = URL
os.environ["OPENAI_API_KEY"] = TOKEN
# The Agents SDK exports traces to OpenAI by default; this test machine reaches no such place.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


class City(BaseModel):
    city: str
    population: int


PARIS = City(city="Paris", population=2102650)


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"22C and sunny in {city}"


# ---- LangChain ---------------------------------------------------------------------------------------------------


def langchain_chat():
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=MODEL, base_url=URL, api_key=TOKEN, max_retries=0, timeout=20)


def langchain_text() -> None:
    llm = langchain_chat()
    check(llm.invoke("Hi").content == EXPECT_TEXT, "invoke_text")
    streamed = "".join(chunk.content for chunk in llm.stream("Hi"))
    check(streamed == EXPECT_TEXT, "stream_text", streamed)


def langchain_tools() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool

    # Described here, not by the docstring: the tests run Python with docstrings stripped (PYTHONOPTIMIZE=2).
    weather = StructuredTool.from_function(get_weather, description="Weather for a city.")
    llm = langchain_chat().bind_tools([weather])
    history = [HumanMessage("Weather in Paris?")]
    first = llm.invoke(history)
    calls = first.tool_calls
    check(len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["args"] == {"city": "Paris"},
          "tool_call", calls)
    history += [first, ToolMessage(weather.invoke(calls[0]["args"]), tool_call_id=calls[0]["id"])]
    check(llm.invoke(history).content == EXPECT_TEXT, "tool_round_trip")


def langchain_structured() -> None:
    got = langchain_chat().with_structured_output(City).invoke("The largest city of France?")
    check(got == PARIS, "structured_output", got)


def langchain_error() -> None:
    try:
        langchain_chat().invoke("Hi")
        check(False, "rate_limited", "no error")
    except openai.RateLimitError as e:
        check(e.status_code == 429, "rate_limited", e)


def langchain_anthropic() -> None:
    from langchain_anthropic import ChatAnthropic

    base = URL.removesuffix("/v1")
    llm = ChatAnthropic(model=MODEL, base_url=base, api_key=TOKEN, max_retries=0, timeout=20)
    check(llm.invoke("Hi").content == EXPECT_TEXT, "anthropic_text")


# ---- OpenAI Agents SDK -------------------------------------------------------------------------------------------


def agents_run(agent, prompt: str):
    from agents import Runner

    return Runner.run_sync(agent, prompt)


def agents_text() -> None:
    from agents import Agent

    result = agents_run(Agent(name="helper", instructions="Be kind.", model=MODEL), "Hi")
    check(result.final_output == EXPECT_TEXT, "agent_text", result.final_output)


def agents_tools() -> None:
    from agents import Agent, function_tool

    agent = Agent(name="weather", model=MODEL, tools=[function_tool(get_weather)])
    result = agents_run(agent, "Weather in Paris?")
    called = [i for i in result.new_items if i.type == "tool_call_output_item"]
    check(len(called) == 1 and "Paris" in str(called[0].output), "agent_tool_ran", result.new_items)
    check(result.final_output == EXPECT_TEXT, "agent_tool_round_trip", result.final_output)


def agents_structured() -> None:
    from agents import Agent

    result = agents_run(Agent(name="facts", model=MODEL, output_type=City), "The largest city of France?")
    check(result.final_output == PARIS, "agent_structured_output", result.final_output)


def agents_error() -> None:
    from agents import Agent

    try:
        agents_run(Agent(name="helper", model=MODEL), "Hi")
        check(False, "agent_rate_limited", "no error")
    except openai.RateLimitError as e:
        check(e.status_code == 429, "agent_rate_limited", e)


# ---- pydantic-ai -------------------------------------------------------------------------------------------------


def pydantic_ai_text() -> None:
    from pydantic_ai import Agent

    result = Agent(f"openai:{MODEL}", instructions="Be kind.").run_sync("Hi")
    check(result.output == EXPECT_TEXT, "pydantic_ai_text", result.output)


def pydantic_ai_tools() -> None:
    from pydantic_ai import Agent

    agent = Agent(f"openai:{MODEL}", tools=[get_weather])
    result = agent.run_sync("Weather in Paris?")
    returns = [p for m in result.all_messages() for p in m.parts if p.part_kind == "tool-return"]
    check(len(returns) == 1 and "Paris" in returns[0].content, "pydantic_ai_tool_ran", returns)
    check(result.output == EXPECT_TEXT, "pydantic_ai_tool_round_trip", result.output)


def pydantic_ai_structured() -> None:
    from pydantic_ai import Agent

    result = Agent(f"openai:{MODEL}", output_type=City).run_sync("The largest city of France?")
    check(result.output == PARIS, "pydantic_ai_structured_output", result.output)


def pydantic_ai_error() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError

    try:
        Agent(f"openai:{MODEL}").run_sync("Hi")
        check(False, "pydantic_ai_rate_limited", "no error")
    except ModelHTTPError as e:
        check(e.status_code == 429, "pydantic_ai_rate_limited", e)


def main() -> None:
    scenario = globals().get(sys.argv[1])
    if scenario is None:
        sys.exit(f"no scenario {sys.argv[1]}")
    scenario()


if __name__ == "__main__":
    main()
