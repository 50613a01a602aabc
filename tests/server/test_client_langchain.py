"""``langchain_openai`` against a live ``llamact serve`` (SmolLM2, greedy): a named tool choice the
model must follow, a structured output schema the grammar holds, and ``OpenAIEmbeddings``. The tiny
model's answers are poor; the tests check the mechanics (the call, the parsed object, the vectors).

``OpenAIEmbeddings`` by default (``check_embedding_ctx_length=True``) tokenizes with tiktoken first
and sends OpenAI's token ids, which mean nothing to another vocabulary (and tiktoken downloads its
tables on first use); against llamact (as against llama-server) it is written with
``check_embedding_ctx_length=False``, so that the texts are sent.
"""

from __future__ import annotations

import math

import pytest
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel
from server_live import LiveServer

pytestmark = pytest.mark.model


def _chat(live: LiveServer, **kwargs: object) -> ChatOpenAI:
    return ChatOpenAI(base_url=live.base_url + "/v1", api_key=live.api_key or "none",  # type: ignore[arg-type]
                      model="smollm2", temperature=0, max_retries=0, timeout=300, **kwargs)


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "12 C"


def test_bind_tools_with_a_named_choice_calls_it(hermes_server: LiveServer) -> None:
    llm = _chat(hermes_server, max_tokens=40).bind_tools([get_weather], tool_choice="get_weather")
    reply = llm.invoke("What is the weather in Paris?")
    assert [call["name"] for call in reply.tool_calls] == ["get_weather"]
    assert isinstance(reply.tool_calls[0]["args"].get("city"), str)
    assert reply.tool_calls[0]["id"]


class Person(BaseModel):
    name: str
    age: int


def test_with_structured_output_gives_the_schema(server: LiveServer) -> None:
    llm = _chat(server, max_tokens=60).with_structured_output(Person)
    person = llm.invoke("Invent a person: a name and an age.")
    assert isinstance(person, Person)
    assert isinstance(person.name, str) and isinstance(person.age, int)


def test_openai_embeddings_with_texts(embedding_server: LiveServer) -> None:
    embeddings = OpenAIEmbeddings(base_url=embedding_server.base_url + "/v1", api_key="none",  # type: ignore[arg-type]
                                  model="smollm2", check_embedding_ctx_length=False, max_retries=0)
    docs = embeddings.embed_documents(["The cat sat on the mat.", "Paris is the capital of France."])
    query = embeddings.embed_query("The cat sat on the mat.")
    assert len(docs) == 2 and len(docs[0]) == len(query) == 576
    assert math.isclose(sum(v * v for v in query), 1.0, rel_tol=1e-4)   # llama-server's euclidean norm
    assert max(abs(a - b) for a, b in zip(docs[0], query, strict=True)) < 1e-4   # the same text, the same vector
