"""Embeddings and token counts through the gateway's HTTP front door, called the way people call them: the official
`openai` SDK's `embeddings.create`, the official `anthropic` SDK's `messages.count_tokens`, and LangChain's
`OpenAIEmbeddings` and `ChatAnthropic.get_num_tokens_from_messages`, each unchanged but for its base URL and key.

Run by the Rust tests in tests/tests/gateway_embeddings.rs, one scenario per run (the first argument), with the
front door's root in GATEWAY_HTTP_URL (no `/v1`: the OpenAI clients get it appended, as their base URLs carry it) and
a caller token in GATEWAY_TOKEN. The expected vectors come from the Rust side in EXPECT_VECTORS (JSON), computed
with the fake provider's own rule. Each check prints `ok: <name>` when it holds and exits non-zero at the first that
does not.
"""

import base64
import json
import os
import struct
import sys

import anthropic
import openai

from sdk_checks import check

ROOT = os.environ["GATEWAY_HTTP_URL"]
TOKEN = os.environ["GATEWAY_TOKEN"]


def f32(values):
    """Each value as the nearest 32-bit float, as the vectors travel."""
    return [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]


def expected():
    return [f32(v) for v in json.loads(os.environ["EXPECT_VECTORS"])]


def inputs():
    return json.loads(os.environ["INPUTS"])


def openai_client() -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{ROOT}/v1", api_key=TOKEN, max_retries=0, timeout=20)


def anthropic_client() -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=ROOT, api_key=TOKEN, max_retries=0, timeout=20)


def openai_embeddings(model: str) -> None:
    """The SDK's default (base64, decoded by the SDK), then floats, then base64 asked for explicitly."""
    c = openai_client()
    dims = int(os.environ["DIMENSIONS"])
    r = c.embeddings.create(model=model, input=inputs(), dimensions=dims)
    got = [f32(d.embedding) for d in r.data]
    check(got == expected(), "default_base64_vectors", got)
    check([d.index for d in r.data] == list(range(len(inputs()))), "indexes_in_order", [d.index for d in r.data])
    tokens = int(os.environ["EXPECT_TOKENS"])
    check(r.usage.prompt_tokens == tokens and r.usage.total_tokens == tokens, "usage", r.usage)
    check(r.model == model, "model_echoed", r.model)
    r = c.embeddings.create(model=model, input=inputs(), dimensions=dims, encoding_format="float")
    got = [f32(d.embedding) for d in r.data]
    check(got == expected(), "float_vectors", got)
    r = c.embeddings.create(model=model, input=inputs(), dimensions=dims, encoding_format="base64")
    raw = [d.embedding for d in r.data]
    decoded = [list(struct.unpack(f"<{len(b) // 4}f", b)) for b in (base64.b64decode(s) for s in raw)]
    check(all(isinstance(s, str) for s in raw) and decoded == expected(), "base64_vectors", raw)


def large_batch(model: str) -> None:
    """More inputs than the provider takes in one request: one answer, every vector in its place."""
    r = openai_client().embeddings.create(model=model, input=inputs())
    got = [f32(d.embedding) for d in r.data]
    check(len(got) == len(inputs()), "every_input_answered", len(got))
    check(got == expected(), "vectors_in_input_order", got[:3])


def embedding_errors(model: str) -> None:
    """Token ids to a provider that takes text only, and a chat model asked to embed: 400s naming the field."""
    c = openai_client()
    try:
        c.embeddings.create(model=model, input=[[1, 2, 3]])
        check(False, "token_ids_refused", "accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and (e.param or "").startswith("input"), "token_ids_refused", e.body)
    try:
        c.embeddings.create(model="openai/gpt-4o", input="hi")
        check(False, "chat_model_refused", "accepted")
    except openai.BadRequestError as e:
        check(e.param == "model", "chat_model_refused", e.body)
    try:
        c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])
        check(False, "embedding_model_not_for_chat", "accepted")
    except openai.BadRequestError as e:
        check(e.param == "model", "embedding_model_not_for_chat", e.body)


def anthropic_count_tokens(model: str) -> None:
    """A count with a system prompt and a tool, then a body with a field a count does not take."""
    c = anthropic_client()
    r = c.messages.count_tokens(
        model=model,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello world"}],
        tools=[{"name": "get_weather", "description": "Weather for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    )
    check(r.input_tokens == int(os.environ["EXPECT_TOKENS"]), "input_tokens", r.input_tokens)
    try:
        c.messages.count_tokens(model=model, messages=[{"role": "user", "content": "hi"}],
                                extra_body={"max_tokens": 5})
        check(False, "max_tokens_refused", "accepted")
    except anthropic.BadRequestError as e:
        check(e.status_code == 400 and "max_tokens" in str(e), "max_tokens_refused", str(e))


def langchain_embeddings(model: str) -> None:
    """LangChain's OpenAIEmbeddings, sending text (its tokenizer needs a download this machine cannot make)."""
    from langchain_openai import OpenAIEmbeddings

    emb = OpenAIEmbeddings(model=model, base_url=f"{ROOT}/v1", api_key=TOKEN, dimensions=int(os.environ["DIMENSIONS"]),
                           check_embedding_ctx_length=False, max_retries=0)
    docs = [f32(v) for v in emb.embed_documents(inputs())]
    check(docs == expected(), "embed_documents", docs)
    query = f32(emb.embed_query(inputs()[0]))
    check(query == expected()[0], "embed_query", query)


def langchain_count_tokens(model: str) -> None:
    """LangChain's ChatAnthropic counts a conversation through the count endpoint."""
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage, SystemMessage

    chat = ChatAnthropic(model=model, base_url=ROOT, api_key=TOKEN, max_retries=0)
    n = chat.get_num_tokens_from_messages([SystemMessage("Be brief."), HumanMessage("hello world")])
    check(n == int(os.environ["EXPECT_TOKENS"]), "get_num_tokens_from_messages", n)


def main() -> None:
    scenario = sys.argv[1]
    model = os.environ.get("MODEL", "")
    {
        "openai_embeddings": openai_embeddings,
        "large_batch": large_batch,
        "embedding_errors": embedding_errors,
        "anthropic_count_tokens": anthropic_count_tokens,
        "langchain_embeddings": langchain_embeddings,
        "langchain_count_tokens": langchain_count_tokens,
    }[scenario](model)


if __name__ == "__main__":
    main()
