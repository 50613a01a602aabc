"""The server_e2e case matrix: the same chat requests for llama-server and ``engine.create()``.

Each case is data: a model (SmolLM2 or Gemma 3), a template (the GGUF's own, or a vendored template of
a tool-calling family given as ``--chat-template-file`` / ``custom_template``), and an OpenAI request.
Sampling is greedy and every answer short (the models are tiny; the matrix runs in minutes).

The tool conversations are few-shot: an earlier turn shows a call of ``get_weather``, so that these
small models do reach the call the grammar admits (with ``"required"`` upstream allows content before
the calls). Which conversation each family gets was chosen by looking at what llama-server does with
it; nothing here says what the answer is. Tool-call ids in the history are nine alphanumerics because
the Mistral templates reject any other id.

The Gemma 3 GGUF carries no chat template: its "own" template is llama.cpp's fallback (ChatML), which
is what llamact must mirror; ``gemma3/google-gemma-2-2b-it/plain`` gives it Gemma's turn format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..json_types import Json

OWN_TEMPLATE = "own"

WEATHER_TOOL: Json = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    }, "required": ["location"]}}}
FLIGHTS_TOOL: Json = {"type": "function", "function": {
    "name": "search_flights", "description": "Find flights between two cities",
    "parameters": {"type": "object", "properties": {
        "origin": {"type": "string"}, "destination": {"type": "string"},
        "passengers": {"type": "integer", "minimum": 1},
    }, "required": ["origin", "destination", "passengers"]}}}
TOOLS: Json = [WEATHER_TOOL, FLIGHTS_TOOL]

PERSON_SCHEMA: Json = {"type": "json_schema", "json_schema": {"name": "person", "schema": {
    "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"]}}}


def _call(n: int, city: str) -> Json:
    return {"role": "assistant", "content": "", "tool_calls": [{
        "id": f"call{n}2345", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"location": city})}}]}


def _result(n: int, text: str) -> Json:
    return {"role": "tool", "tool_call_id": f"call{n}2345", "content": text}


PLAIN: Json = [{"role": "user", "content": "Name three colors."}]
JSON_PERSON: Json = [{"role": "user", "content": "Describe a fictional person as JSON with a name and an age."}]
# calls with results, the next question right after
WEATHER_CALLS: Json = [
    {"role": "user", "content": "Weather in Berlin?"}, _call(1, "Berlin"), _result(1, "12 C"),
    {"role": "user", "content": "Weather in Rome?"}, _call(2, "Rome"), _result(2, "20 C"),
    {"role": "user", "content": "Weather in Paris?"},
]
# calls, results and short answers
WEATHER_ANSWERED: Json = [
    {"role": "user", "content": "Weather in Berlin?"}, _call(1, "Berlin"), _result(1, "12 C"),
    {"role": "assistant", "content": "12 C."},
    {"role": "user", "content": "Weather in Rome?"}, _call(2, "Rome"), _result(2, "20 C"),
    {"role": "assistant", "content": "20 C."},
    {"role": "user", "content": "Weather in Oslo?"}, _call(3, "Oslo"), _result(3, "2 C"),
    {"role": "assistant", "content": "2 C."},
    {"role": "user", "content": "Weather in Paris?"},
]
TWO_CITIES: Json = [*WEATHER_CALLS[:-1], {"role": "user", "content": "Weather in Paris and in Madrid?"}]

NAMED_WEATHER: Json = {"type": "function", "function": {"name": "get_weather"}}


@dataclass(frozen=True)
class E2ECase:
    """One request, sent to llama-server and to ``engine.create()``."""

    id: str
    model: str                                  # "smollm2" | "gemma3"
    template: str = OWN_TEMPLATE                # a stem of vendor/llama.cpp/models/templates, or "own"
    messages: Json = field(default_factory=lambda: PLAIN)
    tools: Json = None
    tool_choice: Json = "auto"                  # "auto" | "required" | "none" | {"type": "function", ...}
    parallel_tool_calls: bool = False
    enable_thinking: bool = True
    response_format: Json = None
    stop: tuple[str, ...] = ()
    max_tokens: int = 32
    reasoning_format: str = "deepseek"          # llama-server's --reasoning-format

    @property
    def named_tool_choice(self) -> bool:
        return isinstance(self.tool_choice, dict)

    def template_path(self, llama_cpp: Path) -> Path | None:
        if self.template == OWN_TEMPLATE:
            return None
        return llama_cpp / "models" / "templates" / f"{self.template}.jinja"

    def server_key(self) -> tuple[str, str, str]:
        """Cases with the same key share one llama-server process."""
        return (self.model, self.template, self.reasoning_format)

    def request_body(self, stream: bool) -> Json:
        """The OpenAI request for llama-server. Every setting that has a server-side default differing
        from llamact's is explicit: parallel_tool_calls (the server's default is the template's
        capability), enable_thinking (the server's default is whether the template supports it),
        cache_prompt off (each case stands alone)."""
        body: Json = {
            "messages": self.messages, "max_tokens": self.max_tokens, "temperature": 0.0,
            "cache_prompt": False, "parallel_tool_calls": self.parallel_tool_calls,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            "stream": stream,
        }
        if self.tools is not None:
            body["tools"] = self.tools
            body["tool_choice"] = self.tool_choice
        if self.response_format is not None:
            body["response_format"] = self.response_format
        if self.stop:
            body["stop"] = list(self.stop)
        if stream:
            body["stream_options"] = {"include_usage": True}
        else:
            # llama-server's own fields: the generated token ids and raw text in "__verbose"
            body["verbose"] = True
            body["return_tokens"] = True
        return body

    def create_kwargs(self, llama_cpp: Path) -> Json:
        """The same request as ``engine.create()`` arguments (plain data: ``params`` lists the
        GenerationParams fields; ``template_now`` is the caller's, equal to the server's clock)."""
        path = self.template_path(llama_cpp)
        return {
            "messages": self.messages, "tools": self.tools, "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls, "enable_thinking": self.enable_thinking,
            "response_format": self.response_format,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            "custom_template": path.read_text(encoding="utf-8") if path is not None else None,
            "reasoning_format": self.reasoning_format,
            # no prompt cache, as the server's request: logits depend on how the prompt was
            # batched, so a prompt evaluated in pieces may be sampled differently
            "params": {"greedy": True, "max_tokens": self.max_tokens, "stop": list(self.stop), "cache_prompt": False},
        }


# Tool-calling families, each with the conversation that leads the models to a call (see above);
# Mistral's templates fail upstream's parser generation on WEATHER_CALLS, so they get WEATHER_ANSWERED.
FAMILIES: dict[str, Json] = {
    "Qwen-Qwen3-0.6B": WEATHER_CALLS,
    "Qwen3-Coder": WEATHER_CALLS,
    "Qwen-Qwen2.5-7B-Instruct": WEATHER_CALLS,
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": WEATHER_CALLS,
    "meta-llama-Llama-3.2-3B-Instruct": WEATHER_CALLS,
    "mistralai-Mistral-Nemo-Instruct-2407": WEATHER_ANSWERED,
    "openai-gpt-oss-120b": WEATHER_CALLS,
    "llama-cpp-deepseek-r1": WEATHER_CALLS,
    "deepseek-ai-DeepSeek-V3.1": WEATHER_CALLS,
    "google-gemma-4-31B-it": WEATHER_CALLS,
}
THINKING_FAMILIES = ("Qwen-Qwen3-0.6B", "deepseek-ai-DeepSeek-V3.1", "google-gemma-4-31B-it")
MODELS = ("smollm2", "gemma3")
# one tool keeps the prompts short (the matrix's time is mostly prompt evaluation); both tools where
# the choice between them, or an integer parameter, matters
ONE_TOOL: Json = [WEATHER_TOOL]


def _own_template_cases() -> list[E2ECase]:
    cases: list[E2ECase] = []
    for model in MODELS:
        cases += [
            E2ECase(f"{model}/own/plain", model, max_tokens=24),
            E2ECase(f"{model}/own/stop", model, stop=(".",), max_tokens=32),
            E2ECase(f"{model}/own/json_schema", model, messages=JSON_PERSON, response_format=PERSON_SCHEMA,
                    max_tokens=40),
            E2ECase(f"{model}/own/required", model, messages=WEATHER_CALLS, tools=TOOLS, tool_choice="required",
                    max_tokens=40),
        ]
    cases.append(E2ECase("smollm2/own/named", "smollm2", messages=WEATHER_CALLS, tools=ONE_TOOL,
                         tool_choice=NAMED_WEATHER, max_tokens=40))
    return cases


def _family_cases() -> list[E2ECase]:
    cases: list[E2ECase] = []
    for template, messages in FAMILIES.items():
        for model in MODELS:
            cases.append(E2ECase(f"{model}/{template}/required", model, template, messages, ONE_TOOL, "required",
                                 max_tokens=40))
    for template in THINKING_FAMILIES:
        cases.append(E2ECase(f"smollm2/{template}/required-no-thinking", "smollm2", template, FAMILIES[template],
                             ONE_TOOL, "required", enable_thinking=False, max_tokens=40))
    hermes, coder, qwen3 = "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "Qwen3-Coder", "Qwen-Qwen3-0.6B"
    gemma4, llama32, oss = "google-gemma-4-31B-it", "meta-llama-Llama-3.2-3B-Instruct", "openai-gpt-oss-120b"
    r1 = "llama-cpp-deepseek-r1"
    cases += [
        # max_tokens cut inside the call
        E2ECase(f"smollm2/{hermes}/length-mid-call", "smollm2", hermes, FAMILIES[hermes], ONE_TOOL, "required",
                max_tokens=10),
        E2ECase(f"smollm2/{gemma4}/length-mid-call", "smollm2", gemma4, FAMILIES[gemma4], ONE_TOOL, "required",
                max_tokens=8),
        E2ECase(f"gemma3/{coder}/length-mid-call", "gemma3", coder, FAMILIES[coder], ONE_TOOL, "required",
                max_tokens=14),
        # a stop string inside the call's arguments
        E2ECase(f"smollm2/{hermes}/stop-in-call", "smollm2", hermes, FAMILIES[hermes], ONE_TOOL, "required",
                stop=("Paris",), max_tokens=40),
        # structured output through a family's template, with thinking on
        E2ECase(f"smollm2/{qwen3}/json_schema", "smollm2", qwen3, JSON_PERSON, response_format=PERSON_SCHEMA,
                max_tokens=40),
        E2ECase(f"gemma3/{oss}/json_schema", "gemma3", oss, JSON_PERSON, response_format=PERSON_SCHEMA,
                max_tokens=40),
        # named tool choice: llama-server treats it as "auto", llamact forces the call (deviation 9)
        E2ECase(f"smollm2/{qwen3}/named", "smollm2", qwen3, FAMILIES[qwen3], ONE_TOOL, NAMED_WEATHER, max_tokens=40),
        E2ECase(f"gemma3/{llama32}/named", "gemma3", llama32, FAMILIES[llama32], ONE_TOOL, NAMED_WEATHER,
                max_tokens=40),
        # auto, and parallel calls choosing between two tools
        E2ECase(f"smollm2/{hermes}/auto", "smollm2", hermes, FAMILIES[hermes], ONE_TOOL, "auto", max_tokens=40),
        E2ECase(f"gemma3/{oss}/auto", "gemma3", oss, FAMILIES[oss], ONE_TOOL, "auto", max_tokens=40),
        E2ECase(f"gemma3/{coder}/required-parallel", "gemma3", coder, TWO_CITIES, TOOLS, "required",
                parallel_tool_calls=True, max_tokens=64),
        E2ECase("gemma3/google-gemma-2-2b-it/plain", "gemma3", "google-gemma-2-2b-it", PLAIN, max_tokens=24),
        # other reasoning formats: thoughts left in content; <think> kept in streamed content
        E2ECase(f"smollm2/{r1}/reasoning-none", "smollm2", r1, FAMILIES[r1], ONE_TOOL, "required",
                reasoning_format="none", max_tokens=40),
        E2ECase(f"smollm2/{qwen3}/reasoning-legacy", "smollm2", qwen3, PLAIN, reasoning_format="deepseek-legacy",
                max_tokens=32),
    ]
    return cases


def e2e_cases() -> list[E2ECase]:
    """Every case of the server_e2e row, in a fixed order (grouped by server when run)."""
    cases = _own_template_cases() + _family_cases()
    ids = [c.id for c in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"duplicate server_e2e case ids: {sorted(duplicates)}")
    return cases
