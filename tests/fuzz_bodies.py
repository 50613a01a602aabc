"""Hostile HTTP requests for ``llamact serve`` (issue 26), shared by ``tests/server/test_http_fuzz.py`` and
``scripts/fuzz/campaign.py`` / ``scripts/fuzz/soak.py``: Hypothesis strategies of ``Case`` (method,
path, body bytes, headers), one request sender with a hard wall-clock limit, and the properties every
answer must have (``problems``).

What is generated: valid bodies for every route, and mutations of them -- each field given a value of
the wrong type, null, deep nesting, huge strings and arrays (bounded: ``MAX_STRING`` / ``MAX_ITEMS``),
lone surrogates, control characters; hostile grammars (deep nesting, huge alternations, ``{m,n}`` with
big or inverted bounds, left recursion, undefined rules, bad syntax), hostile JSON schemas (deep,
``$ref`` cycles, bogus types, huge enums and bounds, ``multipleOf``, patterns), ``response_format``,
tools and ``chat_template_kwargs`` variants; then the bytes themselves (truncated, bad UTF-8, not
JSON, NaN literals) and the Content-Type; unknown routes and wrong methods. Issue 46's families: DRY
sequence breakers (any count, length and text), ``id_slot`` (the answer must report the slot
llama-server would run it in: ``Case.expect_slot``), slot actions on the special files of
``special_slot_dir`` (a FIFO, a directory, links to /dev/zero and outside), ``file://`` media paths
(a NUL, a FIFO), and rounds of concurrent requests each with its own LoRA scale (``LoraRound``: every
answer equal to the same request's answer alone).

Generations stay short: every base body asks for a few tokens, and the token-limit fields are only
mutated to small values or wrong types (an unlimited generation is bounded by the server's context,
which the fuzzing servers keep small).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from llamact.json_types import Json

HOST = "127.0.0.1"
MAX_STRING = 1 << 20     # the largest generated string (UTF-8 bytes)
MAX_ITEMS = 20_000       # the longest generated array / alternation / enum
REQUEST_LIMIT_S = 60.0   # every request must be answered (headers and whole body) within this
RSS_LIMIT = 1536 << 20   # the server process's VmRSS must stay below this

# Hypothesis profiles: "fuzz-ci" for the test suite (few examples, derandomized: the same requests every
# run), "fuzz-long" for a longer run of the same test (LLAMACT_FUZZ_PROFILE=fuzz-long). No shrinking:
# against a live server a crash or a hang makes shrinking slow and misleading; the failing request is
# printed whole instead. The campaign script sets its own counts on top of "fuzz-long".
_COMMON: dict[str, Any] = dict(deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                               suppress_health_check=list(HealthCheck), print_blob=False)
settings.register_profile("fuzz-ci", max_examples=30, derandomize=True, **_COMMON)
settings.register_profile("fuzz-long", max_examples=2000, derandomize=False, **_COMMON)
# examples per family under "fuzz-ci" (tests/server/test_http_fuzz.py; campaign.py --ci runs the same)
CI_EXAMPLES = {"chat": 60, "completions": 50, "grammars": 60, "templates": 60, "raw_bodies": 40, "admin": 60,
               "routes": 80, "dry": 30, "slots": 40, "media_files": 15, "lora_rounds": 6}
PROFILE = os.environ.get("LLAMACT_FUZZ_PROFILE", "fuzz-ci")

CHAT_ROUTES = ("/v1/chat/completions", "/chat/completions")
COMPLETION_ROUTES = ("/v1/completions", "/completions")
TEMPLATE_ROUTES = ("/apply-template", "/template-details")
GET_ROUTES = ("/health", "/v1/health", "/v1/models", "/models", "/props", "/metrics", "/")
# issue 25's routes: each takes its own body shape (ROUTE_BASES below)
OTHER_ROUTES = ("/v1/responses", "/v1/responses/input_tokens", "/v1/chat/completions/input_tokens", "/v1/messages",
                "/v1/messages/count_tokens", "/v1/embeddings", "/embeddings", "/rerank", "/completion", "/infill",
                "/slots/0?action=save", "/lora-adapters", "/props")
POST_ROUTES = CHAT_ROUTES + COMPLETION_ROUTES + TEMPLATE_ROUTES + ("/tokenize", "/detokenize") + OTHER_ROUTES


@dataclass(frozen=True, repr=False)
class Case:
    """One HTTP request, and the family of hostility that made it (for the figures)."""

    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    kind: str = "valid"
    expect_slot: int | None = None   # a 200 answer must report this id_slot (llama-server's choice)

    def __repr__(self) -> str:   # Hypothesis prints the falsifying example: bounded, like describe()
        return f"Case<{self.describe(300)}>"

    def describe(self, limit: int = 1500) -> str:
        body = b"" if self.body is None else self.body
        shown = body[:limit].decode("utf-8", "backslashreplace")
        more = f"... ({len(body)} bytes in all)" if len(body) > limit else ""
        return f"{self.method} {self.path} [{self.kind}] headers={self.headers} body={shown}{more}"


@dataclass
class Outcome:
    """What came back: the status (None: no answer), the body, the time taken, the transport error."""

    status: int | None
    body: bytes
    elapsed: float
    error: str | None = None

    @property
    def status_class(self) -> str:
        if self.status is None:
            return "timeout" if self.error == "timeout" else "no-answer"
        return f"{self.status // 100}xx"

    def stream_errors(self) -> list[Json]:
        """The ``{"error": ...}`` objects of a server-sent event stream."""
        found = []
        for line in self.body.split(b"\n"):
            if line.startswith(b"data: ") and b'"error"' in line:
                try:
                    event = json.loads(line[6:])
                except ValueError:
                    continue
                if isinstance(event, dict) and "error" in event:
                    found.append(event["error"])
        return found

    def describe(self, limit: int = 800) -> str:
        shown = self.body[:limit].decode("utf-8", "backslashreplace")
        return f"status={self.status} error={self.error} elapsed={self.elapsed:.1f}s body={shown}"


def send(port: int, case: Case, limit: float = REQUEST_LIMIT_S, host: str = HOST) -> Outcome:
    """Send ``case`` and read the whole answer, all within ``limit`` seconds of wall time."""
    start = time.monotonic()
    deadline = start + limit
    conn = http.client.HTTPConnection(host, port, timeout=limit)
    try:
        conn.request(case.method, case.path, body=case.body, headers=case.headers)
        response = conn.getresponse()
        parts = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if conn.sock is not None:
                conn.sock.settimeout(remaining)
            chunk = response.read1(1 << 16)
            if not chunk:
                break
            parts.append(chunk)
        return Outcome(response.status, b"".join(parts), time.monotonic() - start)
    except TimeoutError:
        return Outcome(None, b"", time.monotonic() - start, "timeout")
    except (OSError, http.client.HTTPException) as exc:
        return Outcome(None, b"", time.monotonic() - start, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RssWatch:
    """While a request runs: the server's RSS sampled every 0.1 s, and the server killed (SIGKILL) as soon
    as it passes ``limit`` -- a request that makes it allocate without bound (measured: 9 GiB in 30 s)
    must not take the machine down with it. ``peak`` is the largest RSS seen, ``killed`` says whether
    the limit was hit."""

    def __init__(self, pid: int | None, limit: int = RSS_LIMIT) -> None:
        self.pid = pid
        self.limit = limit
        self.peak = 0
        self.killed = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while self.pid is not None and not self._done.wait(0.1):
            try:
                rss = rss_bytes(self.pid)
            except OSError:
                return
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.killed = True
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                return

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:   # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def problems(case: Case, outcome: Outcome) -> list[str]:
    """What is wrong with one answer: none for a 2xx, 3xx, 4xx or 501 (a route's capability the model
    or the server's flags lack: /infill without FIM tokens, /rerank without --reranking) in time (a
    stream without a 5xx error event)."""
    found = []
    if outcome.status is None:
        found.append("hang (no answer within the limit)" if outcome.error == "timeout"
                     else f"no answer ({outcome.error})")
    elif outcome.status >= 500 and outcome.status != 501:   # 501: a capability the server lacks, said so
        found.append(f"HTTP {outcome.status}")
    for error in outcome.stream_errors():
        code = error.get("code") if isinstance(error, dict) else None
        if not isinstance(code, int) or code >= 500:
            found.append(f"error event in the stream: {json.dumps(error)[:300]}")
    if case.expect_slot is not None and outcome.status == 200:
        try:
            slot = json.loads(outcome.body).get("id_slot")
        except (ValueError, AttributeError):
            slot = "an answer that is not a JSON object"
        if slot != case.expect_slot:
            found.append(f"ran in slot {slot}, asked for slot {case.expect_slot}")
    return found


# -- values -------------------------------------------------------------------------------------------

SIZES = (0, 1, 100, 10_000, 100_000, MAX_STRING)
DEPTHS = (2, 50, 1000, 20_000, 100_000)


def nested(depth: int, kind: str = "list", leaf: Json = 1) -> Json:
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


class Raw:
    """JSON text spliced into a body as is (depths beyond what ``json.dumps`` can recurse)."""

    def __init__(self, text: str) -> None:
        self.text = text


def deep_text(depth: int, kind: str = "list") -> Raw:
    if kind == "list":
        return Raw("[" * depth + "1" + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


odd_strings = st.one_of(
    st.text(max_size=50),
    st.sampled_from(["", " ", "\x00", "\ud800", "\udfff", "a\ud800b", "\ufffd", "\u202e", "\U0001f600" * 50,
                     "<|im_start|>", "<|im_end|>", "<|endoftext|>", "{{ raise_exception('x') }}", "{% for %}",
                     "\\u0000", "%s%n", "../../etc/passwd", "\r\n\r\n", "null", "1e309"]),
    st.builds(lambda c, n: c * (n // len(c.encode("utf-8"))),
              st.sampled_from(["a", "é", "\U0001f600", " ", "\n", "<|im_end|>"]),
              st.sampled_from(SIZES)),
)

small_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False, allow_infinity=False) | odd_strings,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(odd_strings, children, max_size=4),
    max_leaves=12,
)

hostile_values = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 2**64, 10**30, -(10**30), 10**400, 0.5, -0.0, 1e308,
                     1e-320, [], {}, [None], {"": None}, [[[]]]]),
    odd_strings, small_json,
    st.builds(nested, st.sampled_from((2, 50, 500)), st.sampled_from(["list", "dict"])),
    st.builds(deep_text, st.sampled_from(DEPTHS), st.sampled_from(["list", "dict"])),
    st.builds(lambda n, v: [v] * n, st.sampled_from([100, MAX_ITEMS]), st.sampled_from([0, "a", None, {}])),
    st.builds(lambda n: {f"k{i}": i for i in range(n)}, st.sampled_from([100, MAX_ITEMS])),
    st.sampled_from([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1" * 5000), Raw("1e999999")]),
)

# the token limits stay small (or wrong), so that a generation is short
token_limits = st.sampled_from([None, 0, 1, 3, 8, -1, -2, 1.5, 4.0, "4", True, [], {}, 10**30, -(10**30)])


# -- grammars -----------------------------------------------------------------------------------------

def _alternation(n: int) -> str:
    return "root ::= " + " | ".join(f'"a{i}"' for i in range(n))


def _chain(n: int) -> str:
    return "\n".join(f"r{i} ::= r{i + 1} | \"x\"" for i in range(n)) + f'\nr{n} ::= "y"\nroot ::= r0'


hostile_grammars = st.one_of(
    st.builds(lambda d: "root ::= " + "(" * d + '"a"' + ")" * d, st.sampled_from(DEPTHS[:4])),
    st.builds(lambda d: "root ::= " + '"a" (' * d + '"b"' + ")" * d, st.sampled_from(DEPTHS[:4])),
    st.builds(lambda d: "root ::= " + "[a]*(" * d + '"b"' + ")" * d, st.sampled_from(DEPTHS[:3])),
    st.builds(_alternation, st.sampled_from([10, 1000, MAX_ITEMS])),
    st.builds(_chain, st.sampled_from([10, 1000, 5000])),
    st.builds(lambda m, n: f'root ::= "a"{{{m},{n}}}', st.sampled_from([0, 1, 5, 1000, 100_000, 2**31, 2**64]),
              st.sampled_from([0, 2, 1000, 100_000, 2**31, 2**64])),
    st.builds(lambda m: f'root ::= "a"{{{m},}}', st.sampled_from([0, 1000, 100_000, 2**31])),
    st.builds(lambda m: f'root ::= "a"{{{m}}}', st.sampled_from([0, 1000, 100_000, 2**31, 2**64])),
    st.builds(lambda a, b: f'root ::= ("a"{{0,{a}}}){{0,{b}}}', st.sampled_from([10, 1000]),
              st.sampled_from([10, 1000, 100_000])),
    st.sampled_from([
        'root ::= root "a" | "a"', "root ::= root", "root ::= a\na ::= root", "root ::= foo", 'foo ::= "a"',
        "", " ", "root ::=", "root ::= ", 'root ::= "unterminated', "root ::= [", "root ::= [^]", "root ::= []",
        'root ::= "\\xZZ"', 'root ::= "\\uD800"', 'root ::= "\\U0010FFFF"', 'root ::= [\\x00-\\U0010FFFF]*',
        'root ::= [z-a]', 'root ::= "a" "b" | | "c"', "root ::= ()", "root ::= (((", 'root ::= "a"{2,1}',
        'root ::= "a"{,}', 'root ::= "a"{-1}', 'root ::= "a"**', 'root ::= "a" root ::= "b"',
        'root ::= ""', 'root ::= ""*', 'root ::= ("")*', 'root ::= ("" | "a")*', "root ::= <[0]>",
        'root ::= "a"\nroot ::= "b"', "root ::= !", 'root ::= "\x00"', "root ::= \ud800",
        'root ::= "<|im_end|>"', "root ::= <|im_end|>", "root ::= !<|im_end|>", "root ::= <[999999999]>",
    ]),
    odd_strings,
)


# -- JSON schemas -----------------------------------------------------------------------------------

def _deep_schema(depth: int, kind: str) -> Json:
    """A schema ``depth`` levels deep, as JSON text (deeper than ``json.dumps`` recurses)."""
    opening, closing = {
        "object": ('{"type":"object","properties":{"a":', '},"required":["a"]}'),
        "array": ('{"type":"array","items":', "}"),
        "anyOf": ('{"anyOf":[', ',{"type":"null"}]}'),
    }[kind]
    return Raw(opening * depth + '{"type":"string"}' + closing * depth)


def _enum(n: int, kind: str) -> Json:
    values: list[Json] = [f"value number {i}" for i in range(n)] if kind == "str" else list(range(n))
    return {"enum": values}


hostile_schemas = st.one_of(
    st.builds(_deep_schema, st.sampled_from([10, 100, 1000, 5000]), st.sampled_from(["object", "array", "anyOf"])),
    st.builds(_enum, st.sampled_from([10, 1000, MAX_ITEMS]), st.sampled_from(["str", "int"])),
    st.builds(lambda n: {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
                         "required": [f"p{i}" for i in range(n)]}, st.sampled_from([10, 1000, 5000])),
    st.builds(lambda n: {"anyOf": [{"const": f"c{i}"} for i in range(n)]}, st.sampled_from([10, 1000, 5000])),
    st.builds(lambda lo, hi, key: {"type": "integer", key[0]: lo, key[1]: hi},
              st.sampled_from([0, -1, 10**30, -(10**30), 2**63, 1e30, -1e30, 0.5, "1", None]),
              st.sampled_from([0, 7, 10**30, -(10**30), 2**63, 1e30, 1e308, "9", None]),
              st.sampled_from([("minimum", "maximum"), ("exclusiveMinimum", "exclusiveMaximum"),
                               ("minimum", "exclusiveMaximum")])),
    st.builds(lambda t, m: {"type": t, "multipleOf": m}, st.sampled_from(["integer", "number"]),
              st.sampled_from([0, -1, 1e-30, 3.5, 10**30, "2", None])),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from([
        "^(a+)+$", "[", "(?=x)a", "a{1000000}", "\\d{0,99999}", "^$", "(" * 500 + "a" + ")" * 500, "\\",
        "[^\\x00-\\x7f]{5}", "a|" * 2000 + "b", "(a{0,100}){0,100}", "\\p{L}+", "(?P<n>a)(?P=n)", "^a$b$",
        "[z-a]", ".*", "x{2,1}"])),
    st.builds(lambda key, n: {"type": "array" if "Items" in key else "string", key: n},
              st.sampled_from(["minItems", "maxItems", "minLength", "maxLength"]),
              st.sampled_from([-1, 0, 5, 100_000, 2**31, 10**30, 1.5, "3", None])),
    st.builds(lambda lo, hi: {"type": "array", "items": {"type": "integer"}, "minItems": lo, "maxItems": hi},
              st.sampled_from([0, 3, 1000, 100_000]), st.sampled_from([0, 2, 1000, 100_000])),
    st.sampled_from([
        {"$ref": "#"}, {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
        {"$ref": "#/definitions/a", "definitions": {"a": {"type": "object", "properties": {"x": {"$ref": "#"}}}}},
        {"$ref": "#/$defs/missing"}, {"$ref": "http://127.0.0.1:1/schema.json"}, {"$ref": 5}, {"$ref": "#/"},
        {"$ref": "#/properties/a", "properties": {"a": {"$ref": "#/properties/a"}}},
        {"type": "bogus"}, {"type": 5}, {"type": ["string", "bogus"]}, {"type": []}, {"type": None},
        {"type": "object", "properties": 5}, {"type": "object", "properties": {"a": 5}},
        {"type": "object", "required": ["missing"]}, {"type": "object", "required": "a"},
        {"type": "object", "additionalProperties": 5}, {"type": "object", "additionalProperties": {"$ref": "#"}},
        {"type": "array", "items": 5}, {"type": "array", "prefixItems": [{"$ref": "#"}]}, {"anyOf": []},
        {"oneOf": []}, {"allOf": []}, {"allOf": [{"type": "string"}, {"type": "integer"}]}, {"enum": []},
        {"enum": "x"}, {"const": {"a": [1, {"b": None}]}}, {"not": {}}, {"type": "string", "format": "bogus"},
        {"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid", "maxLength": 1},
        {"properties": {"\ud800": {}}}, {"properties": {"": {}, "\"": {}, "\\": {}}}, {}, True, False, None, 5,
        "x", [], {"type": "object", "properties": {"a": {"type": "object"}}, "patternProperties": {"[": {}}},
    ]),
    small_json,
)


# -- chat fields --------------------------------------------------------------------------------------

response_formats = st.one_of(
    st.sampled_from([{"type": "xml"}, "json", 5, None, [], {}, {"type": "text"}, {"type": "json_object"},
                     {"type": "json_schema"}, {"type": "json_schema", "json_schema": "x"},
                     {"type": "json_schema", "json_schema": {}}, {"type": "json_schema", "json_schema": {"name": 5}},
                     {"type": None}, {"type": ["json_object"]}]),
    st.builds(lambda s: {"type": "json_object", "schema": s}, hostile_schemas),
    st.builds(lambda s: {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": True}},
              hostile_schemas),
    st.builds(lambda s: {"type": "json_schema", "json_schema": s}, hostile_schemas),
)


def _tool(name: Json, parameters: Json = None) -> Json:
    function: dict[str, Json] = {"name": name, "description": "A tool."}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


tools_values = st.one_of(
    st.sampled_from([[], "x", 5, [5], [None], [{}], [{"type": "function"}], [{"type": "bogus", "function": {}}],
                     [{"type": "function", "function": "x"}], [{"type": "function", "function": {"name": 5}}],
                     [_tool("f"), _tool("f")], [_tool("")], [_tool("a b\"c\ud800")], [_tool("x" * 10_000)]]),
    st.builds(lambda s: [_tool("get_weather", s)], hostile_schemas),
    st.builds(lambda n: [_tool(f"tool_{i}", {"type": "object", "properties": {"a": {"type": "string"}}})
                         for i in range(n)], st.sampled_from([10, 500])),
    st.lists(st.builds(_tool, odd_strings, st.none() | hostile_schemas), max_size=3),
)

tool_choices = st.one_of(
    st.sampled_from(["auto", "none", "required", "bogus", "", 5, [], {}, {"type": "function"},
                     {"type": "function", "function": {"name": "nope"}}, {"type": "function", "function": "x"},
                     {"type": "function", "function": {"name": "get_weather"}}]),
    small_json,
)

template_kwargs = st.one_of(
    st.sampled_from([{"messages": 5}, {"messages": "x"}, {"messages": [{"role": 5}]}, {"enable_thinking": "x"},
                     {"enable_thinking": False}, {"tools": "x"}, {"tools": [5]}, {"add_generation_prompt": 5},
                     {"bos_token": []}, {"eos_token": {"a": 1}}, {"raise_exception": 1}, {"range": 5},
                     {"loop": 5}, {"__class__": 1}, {"strftime_now": "x"}, [], "x", 5, {}, None]),
    st.builds(lambda k, v: {k: v}, odd_strings, hostile_values),
    st.builds(lambda d: {"x": nested(d, "dict")}, st.sampled_from([100, 500])),
    st.builds(lambda d: {"x": deep_text(d, "dict")}, st.sampled_from([10_000, 100_000])),
)

message_content = st.one_of(
    odd_strings, st.none(), st.integers(), st.just([]), st.just({}),
    st.lists(st.one_of(st.builds(lambda t: {"type": "text", "text": t}, odd_strings),
                       st.sampled_from([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
                                        {"type": "bogus"}, {"text": 5}, 5, None, "x"])), max_size=3),
)

messages_values = st.one_of(
    st.sampled_from([[], 5, "x", None, {}, [5], [None], [[]], [{}], [{"role": "user"}], [{"content": "x"}],
                     [{"role": "bogus", "content": "x"}], [{"role": 5, "content": "x"}],
                     [{"role": "assistant", "content": "x"}], [{"role": "system", "content": "x"}],
                     [{"role": "tool", "content": "x"}],
                     [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}],
                     [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": 5}],
                     [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": 5}]}],
                     [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
                         {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
                      {"role": "tool", "tool_call_id": 5, "content": "r"}],
                     [{"role": "user", "content": "x", "reasoning_content": 5}],
                     [{"role": "assistant", "content": "x", "reasoning_content": "t"}]]),
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]),
                                    "content": message_content}), min_size=1, max_size=4),
    st.builds(lambda n: [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(n)],
              st.sampled_from([100, 2000])),
    st.builds(lambda c: [{"role": "user", "content": c}], odd_strings),
)


# -- bodies -------------------------------------------------------------------------------------------

HELLO = [{"role": "user", "content": "Say hello."}]
CHAT_BASE: Json = {"messages": HELLO, "max_tokens": 4, "temperature": 0}
COMPLETION_BASE: Json = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}

_SAMPLING = ("temperature", "top_p", "min_p", "typical_p", "top_k", "top_n_sigma", "repeat_penalty", "repeat_last_n",
             "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
             "dry_penalty_last_n", "mirostat", "mirostat_tau", "mirostat_eta", "min_keep", "xtc_probability",
             "xtc_threshold", "dynatemp_range", "dynatemp_exponent", "seed", "n", "logit_bias", "cache_prompt",
             "n_probs", "post_sampling_probs", "stop", "stream", "stream_options", "model", "user", "samplers",
             "id_slot", "return_tokens", "timings_per_token", "ignore_eos", "n_keep", "n_discard", "n_indent",
             "t_max_predict_ms", "t_max_prompt_ms", "lora", "response_fields", "grammar_lazy", "grammar_triggers",
             "preserved_tokens")
TOKEN_LIMITS = ("max_tokens", "n_predict", "max_completion_tokens")
CHAT_FIELDS = ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format", "response_format",
               "chat_template_kwargs", "reasoning_effort", "continue_final_message", "add_generation_prompt",
               "grammar", "json_schema", "reasoning_budget_message", "thinking_budget_tokens",
               "reasoning_budget_tokens", "logprobs", "top_logprobs") + _SAMPLING
COMPLETION_FIELDS = ("prompt", "grammar", "json_schema") + _SAMPLING


def field_values(name: str) -> st.SearchStrategy[Json]:
    """Values for one field: its own hostile ones where it has them, else anything hostile."""
    special: dict[str, st.SearchStrategy[Json]] = {
        "grammar": hostile_grammars, "json_schema": hostile_schemas, "response_format": response_formats,
        "tools": tools_values, "tool_choice": tool_choices, "chat_template_kwargs": template_kwargs,
        "messages": messages_values,
        "logit_bias": st.one_of(st.sampled_from([{"999999999": 1}, {"-1": 1}, [[0, False]], [[1e30, 1]],
                                                 {"x": 1}, {"1": "x"}, [[1]], [5], {"1": 1e308}]),
                                st.builds(lambda n: {str(i): -1 for i in range(n)}, st.sampled_from([100, 49152]))),
        "stop": st.one_of(st.lists(odd_strings, max_size=5), st.builds(lambda n: ["x"] * n,
                                                                        st.sampled_from([100, 10_000]))),
        "prompt": st.one_of(odd_strings, st.sampled_from([[], [1, 2, 3], [-1], [10**9], [2**63], [True], [1.5],
                                                          [[1, 2]], [["a"]], ["a", "b"], [{"a": 1}]]),
                            st.builds(lambda n: list(range(n)), st.sampled_from([10, 5000]))),
        "top_logprobs": st.sampled_from([None, -1, 0, 20, 21, 10**9, "5", 1.5]),
        "n_probs": st.sampled_from([None, -1, 0, 1, 20, 21, 10**9, "5", 1.5]),
        "stream_options": st.sampled_from([None, 5, "x", {}, {"include_usage": "yes"}, {"include_usage": True}]),
    }
    if name in special:
        return st.one_of(special[name], hostile_values)
    return hostile_values


def _mutated(base: Json, fields: tuple[str, ...]) -> st.SearchStrategy[Json]:
    def build(draws: list[tuple[str, Json]], drop: list[str], stream: bool, limit: Json) -> Json:
        body = dict(base)
        body["stream"] = stream
        for name in drop:
            body.pop(name, None)
        for name, value in draws:
            body[name] = value
        if limit is not None:
            body["max_tokens"] = limit
        return body

    one = st.sampled_from(fields).flatmap(lambda name: st.tuples(st.just(name), field_values(name)))
    return st.builds(build, st.lists(one, min_size=1, max_size=3), st.lists(st.sampled_from(sorted(base)), max_size=1),
                     st.booleans(), st.none() | token_limits)


def encode(value: Json, ensure_ascii: bool = True) -> bytes:
    """JSON text of ``value`` with its ``Raw`` parts spliced in (and lone surrogates as escapes)."""
    raws: list[str] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\x00raw{len(raws) - 1}\x00"
        raise TypeError(type(obj).__name__)

    text = json.dumps(value, default=default, ensure_ascii=ensure_ascii)
    for i, raw in enumerate(raws):
        marker = json.dumps(f"\x00raw{i}\x00", ensure_ascii=ensure_ascii)
        text = text.replace(marker, raw, 1)
    return text.encode("utf-8", "surrogatepass")


def _corrupt(data: bytes, how: str, where: float) -> bytes:
    at = int(len(data) * where)
    if how == "truncate":
        return data[:at]
    if how == "bad-utf8":
        return data[:at] + b"\xff\xfe\xc3\xed\xa0\x80" + data[at:]
    if how == "trailing":
        return data + b" garbage"
    if how == "two-documents":
        return data + data
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16")
    if how == "nul":
        return data[:at] + b"\x00" + data[at:]
    return data


BYTE_MUTATIONS = ("truncate", "bad-utf8", "trailing", "two-documents", "bom", "utf16", "nul")
NOT_JSON = (b"", b" ", b"null", b"[]", b"5", b'"x"', b"{", b"}", b"{'a': 1}", b"<xml/>", b"a=1&b=2", b"\xff" * 100,
            b'{"messages": NaN}', b'{"a":1,"a":2}', b"\x00" * 1000, b"[" * 100_000, b'{"prompt": "x"' * 1000)
CONTENT_TYPES = (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "application/json; charset=latin-1", "application/json; charset=utf-16", "application/xml",
                 "", "*/*", "application/json, text/plain")


@st.composite
def _post_case(draw: st.DrawFn, route: str, body: Json, kind: str) -> Case:
    data = encode(body, draw(st.booleans()))
    headers = {"Content-Type": "application/json"}
    how = draw(st.sampled_from(("none",) * 6 + BYTE_MUTATIONS + ("content-type",)))
    if how == "content-type":
        content_type = draw(st.sampled_from(CONTENT_TYPES))
        headers = {} if content_type is None else {"Content-Type": content_type}
        kind += "+content-type"
    elif how != "none":
        data = _corrupt(data, how, draw(st.floats(0, 1)))
        kind += f"+{how}"
    return Case("POST", route, data, headers, kind)


def chat_cases() -> st.SearchStrategy[Case]:
    route = st.sampled_from(CHAT_ROUTES)
    return st.one_of(
        st.builds(lambda r, s: ("valid", r, {**CHAT_BASE, "stream": s}), route, st.booleans()),
        st.builds(lambda r, b: ("mutated", r, b), route, _mutated(CHAT_BASE, CHAT_FIELDS)),
    ).flatmap(lambda t: _post_case(t[1], t[2], f"chat/{t[0]}"))


def completion_cases() -> st.SearchStrategy[Case]:
    route = st.sampled_from(COMPLETION_ROUTES)
    return st.one_of(
        st.builds(lambda r, s: ("valid", r, {**COMPLETION_BASE, "stream": s}), route, st.booleans()),
        st.builds(lambda r, b: ("mutated", r, b), route, _mutated(COMPLETION_BASE, COMPLETION_FIELDS)),
    ).flatmap(lambda t: _post_case(t[1], t[2], f"completion/{t[0]}"))


ANTHROPIC_BASE: Json = {"model": "m", "max_tokens": 4, "messages": HELLO, "temperature": 0}
RESPONSES_BASE: Json = {"input": "Say hello.", "max_output_tokens": 4, "temperature": 0}
EMBED_BASE: Json = {"input": "hello"}
RERANK_BASE: Json = {"query": "a cat", "documents": ["a dog", "a cat"]}
# a route, its base body, and the fields mutated there (the chat fields again where a route converts into chat)
ROUTE_BASES: dict[str, tuple[Json, tuple[str, ...]]] = {
    "/v1/responses": (RESPONSES_BASE, ("input", "instructions", "tools", "tool_choice", "reasoning", "text",
                                       "max_output_tokens", "previous_response_id") + _SAMPLING),
    "/v1/responses/input_tokens": (RESPONSES_BASE, ("input", "instructions", "tools", "text")),
    "/v1/chat/completions/input_tokens": (CHAT_BASE, CHAT_FIELDS),
    "/v1/messages": (ANTHROPIC_BASE, ("messages", "system", "tools", "tool_choice", "thinking", "stop_sequences",
                                      "metadata", "max_tokens", "top_k", "top_p") + _SAMPLING),
    "/v1/messages/count_tokens": (ANTHROPIC_BASE, ("messages", "system", "tools", "thinking")),
    "/v1/embeddings": (EMBED_BASE, ("input", "encoding_format", "embd_normalize", "content", "model")),
    "/embeddings": (EMBED_BASE, ("input", "content", "embd_normalize")),
    "/rerank": (RERANK_BASE, ("query", "documents", "texts", "top_n", "return_text")),
    "/completion": (COMPLETION_BASE, COMPLETION_FIELDS + ("return_tokens", "n_predict", "timings_per_token")),
    "/infill": (COMPLETION_BASE, ("input_prefix", "input_suffix", "input_extra", "prompt")),
}


def route_cases() -> st.SearchStrategy[Case]:
    """Valid and mutated bodies for the routes beyond chat and raw completions (issue 25)."""
    def pick(route: str) -> st.SearchStrategy[tuple[str, str, Json]]:
        base, fields = ROUTE_BASES[route]
        return st.one_of(st.just(("valid", route, dict(base))),
                         st.builds(lambda b: ("mutated", route, b), _mutated(base, fields)))

    return st.sampled_from(sorted(ROUTE_BASES)).flatmap(pick).flatmap(
        lambda t: _post_case(t[1], t[2], f"routes/{t[0]}"))


def grammar_cases() -> st.SearchStrategy[Case]:
    """Hostile grammars and schemas on every route that takes them (chat and raw completions)."""
    def chat(route: str, name: str, value: Json, stream: bool) -> tuple[str, Json]:
        return route, {**CHAT_BASE, name: value, "stream": stream}

    def raw(route: str, name: str, value: Json, stream: bool) -> tuple[str, Json]:
        return route, {**COMPLETION_BASE, name: value, "stream": stream}

    def pick(make: Any, routes: tuple[str, ...], names: tuple[str, ...]) -> st.SearchStrategy[tuple[str, Json]]:
        return st.sampled_from(names).flatmap(lambda n: st.builds(
            make, st.sampled_from(routes), st.just(n),
            hostile_grammars if n == "grammar" else response_formats if n == "response_format"
            else tools_values if n == "tools" else hostile_schemas, st.booleans()))

    return st.one_of(
        pick(chat, CHAT_ROUTES, ("grammar", "json_schema", "response_format", "tools")),
        pick(raw, COMPLETION_ROUTES, ("grammar", "json_schema")),
    ).flatmap(lambda t: st.just(Case("POST", t[0], encode(t[1]), kind="grammar" + t[0])))


def template_cases() -> st.SearchStrategy[Case]:
    """``/apply-template``, ``/template-details``, ``/tokenize``, ``/detokenize``."""
    templates = st.builds(lambda r, b: (r, b), st.sampled_from(TEMPLATE_ROUTES), st.one_of(
        st.just({"messages": HELLO}), _mutated({"messages": HELLO}, CHAT_FIELDS[:13])))
    tokenize = st.builds(lambda b: ("/tokenize", b), st.one_of(
        st.fixed_dictionaries({"content": odd_strings}, optional={
            "add_special": hostile_values, "parse_special": hostile_values, "with_pieces": hostile_values}),
        st.builds(lambda v: {"content": v}, hostile_values),
    ))
    detokenize = st.builds(lambda b: ("/detokenize", b), st.one_of(
        st.builds(lambda t: {"tokens": t}, st.lists(st.integers(-(2**40), 2**40), max_size=20)),
        st.builds(lambda t: {"tokens": t}, st.lists(st.integers(0, 49151), max_size=200)),
        st.builds(lambda v: {"tokens": v}, hostile_values),
        st.sampled_from([{"tokens": [2**63]}, {"tokens": [2**64]}, {"tokens": [-(2**63) - 1]},
                         {"tokens": list(range(49152))}, {"tokens": [1.0]}, {"tokens": [True]}]),
    ))
    return st.one_of(templates, tokenize, detokenize).flatmap(
        lambda t: _post_case(t[0], t[1], "template" + t[0]))


def raw_body_cases() -> st.SearchStrategy[Case]:
    """Bodies that are not JSON objects, on every POST route."""
    return st.builds(lambda r, b, ct: Case("POST", r, b, {} if ct is None else {"Content-Type": ct}, "not-json"),
                     st.sampled_from(POST_ROUTES), st.sampled_from(NOT_JSON) | st.binary(max_size=200),
                     st.sampled_from(("application/json",) * 4 + CONTENT_TYPES))


def admin_cases() -> st.SearchStrategy[Case]:
    """The GET routes (with junk queries and bodies), unknown routes, wrong methods."""
    query = st.sampled_from(["", "?", "?a=1", "?model=%ff", "?" + "a=1&" * 1000, "?x=%C3%A9", "?%00=%00"])
    gets = st.builds(lambda r, q, b: Case("GET", r + q, b, kind="admin"), st.sampled_from(GET_ROUTES), query,
                     st.none() | st.just(b"{}"))
    unknown_path = st.one_of(
        st.sampled_from(["/v2/chat/completions", "/v1", "/v1/", "//health", "/health/", "/%ff", "/%00",
                         "/v1/chat/completions/x", "/../../etc/passwd", "/static/../../x", "/index.html",
                         "/v1/embeddings", "/embedding", "/infill", "/slots", "/slots/0?action=save",
                         "/v1/models/x", "/lora-adapters", "/reranking", "/api/show", "/*", "/" + "a" * 8000]),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./%", max_size=40).map(lambda p: "/" + p),
    )
    unknown = st.builds(lambda m, p: Case(m, p, b"{}" if m in ("POST", "PUT", "PATCH") else None, kind="unknown-route"),
                        st.sampled_from(["GET", "POST", "PUT", "DELETE"]), unknown_path)
    wrong = st.one_of(
        st.builds(lambda m, r: Case(m, r, encode(CHAT_BASE), kind="wrong-method"),
                  st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]), st.sampled_from(POST_ROUTES)),
        st.builds(lambda m, r: Case(m, r, b"{}", kind="wrong-method"),
                  st.sampled_from(["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"]), st.sampled_from(GET_ROUTES)),
    )
    return st.one_of(gets, unknown, wrong)


# -- issue 46's families: DRY breakers, slot ids, special files ----------------------------------------

N_SLOTS = 2   # the fuzzed server's --parallel (what an id_slot is taken modulo)
# --slot-save-path holds these (special_slot_dir): names an action may give, each no regular file but
# "saved.bin" (a slot saved there), "missing.bin" absent
SLOT_NAMES = ("saved.bin", "missing.bin", "pipe.bin", "dir.bin", "dev.bin", "outside.bin", "loop.bin")


def special_slot_dir(root: Path) -> Path:
    """A slot directory with special files in it: a FIFO (opening it waits for a writer), a directory,
    a symbolic link to /dev/zero (reads without end), one to a FIFO outside, a link to itself."""
    directory = root / "slots"
    directory.mkdir(parents=True, exist_ok=True)
    outside = root / "outside.fifo"
    for path, make in ((directory / "pipe.bin", os.mkfifo), (outside, os.mkfifo), (directory / "dir.bin", os.mkdir)):
        if not os.path.lexists(path):
            make(path)
    for name, target in (("dev.bin", "/dev/zero"), ("outside.bin", str(outside)), ("loop.bin", "loop.bin")):
        if not os.path.lexists(directory / name):
            os.symlink(target, directory / name)
    return directory


def expected_slot(id_slot: Json) -> int | None:
    """The slot llama-server runs a request asking for ``id_slot`` in (None: any it picks):
    ``json_value(data, "id_slot", -1)`` as an int, then ``get_slot_by_id``'s unsigned modulo."""
    if isinstance(id_slot, bool):
        value = int(id_slot)
    elif isinstance(id_slot, int) and -(2**31) <= id_slot < 2**31:
        value = id_slot
    elif isinstance(id_slot, float) and abs(id_slot) < 2**31:
        value = int(id_slot)
    else:
        return None   # a string, null, an object, a number past 32 bits (its cast: not worth modelling)
    return None if value == -1 else (value % 2**64) % N_SLOTS


DRY_COUNTS = (0, 1, 4, 16, 17, 64, 500, 1000, 5000)


def _breakers(n: int, stem: str) -> list[str]:
    return [f"{stem}{i}" for i in range(n)]


dry_breakers = st.one_of(
    st.builds(_breakers, st.sampled_from(DRY_COUNTS),
              st.sampled_from(["b", "x" * 60, "\u00e9\u4e2d", "\n", " ", "<|"])),
    st.lists(odd_strings, max_size=24),
    st.sampled_from([[], [""], ["\x00"], ["a\x00b"], ["a" * 10_000], [1], [None], "x", {}, ["\ud800"]]),
)


def dry_cases() -> st.SearchStrategy[Case]:
    """DRY's sequence breakers (issue 46: 1,000 stalled every slot for 36 s, 5,000 ran for minutes):
    any count, length and text, DRY on or off, on every route that samples."""
    def body(route: str, breakers: Json, multiplier: Json, last_n: Json, stream: bool) -> tuple[str, Json]:
        base = CHAT_BASE if route in CHAT_ROUTES or route == "/v1/messages" else COMPLETION_BASE
        if route == "/v1/messages":
            base = ANTHROPIC_BASE
        return route, {**base, "stream": stream, "dry_multiplier": multiplier, "dry_sequence_breakers": breakers,
                       "dry_penalty_last_n": last_n}

    routes = st.sampled_from(CHAT_ROUTES + COMPLETION_ROUTES + ("/completion", "/v1/messages"))
    return st.builds(body, routes, dry_breakers, st.sampled_from([0.8, 0.8, 0, -1, 1e30]),
                     st.sampled_from([64, 64, -1, 0, 10**9]), st.booleans()).flatmap(
        lambda t: _post_case(t[0], t[1], "dry" + t[0]))


slot_ids = st.one_of(st.integers(-5, 5), st.sampled_from([-1, 2**31 - 1, -(2**31), 2**31, 2**63, -(2**63), 2**64]),
                     st.sampled_from([0.5, 1.9, -1.5, 1e30, float("nan"), True, False, "1", None, [], {}]))


def slot_cases() -> st.SearchStrategy[Case]:
    """A request's ``id_slot`` (it must run in the slot llama-server would, and report it), and the slot
    actions on hostile ids and on the special files of ``special_slot_dir`` (refused at once: a FIFO
    froze the server for 154 s)."""
    def completion(id_slot: Json, stream: bool) -> Case:
        body = {"prompt": "Once upon a time", "n_predict": 2, "temperature": 0, "id_slot": id_slot, "stream": stream}
        expect = None if stream else expected_slot(id_slot)
        return Case("POST", "/completion", encode(body), kind="slots/id_slot", expect_slot=expect)

    def chat(id_slot: Json) -> Case:
        return Case("POST", "/v1/chat/completions", encode({**CHAT_BASE, "id_slot": id_slot}), kind="slots/id_slot")

    def action(slot: str, what: str, name: Json) -> Case:
        return Case("POST", f"/slots/{slot}?action={what}", encode({"filename": name}), kind=f"slots/{what}")

    ids = st.sampled_from(["0", "1", "2", "-1", "x", "99999999999", "1abc", "%00", "+1", " 1"])
    names = st.one_of(st.sampled_from(SLOT_NAMES), odd_strings, hostile_values)
    return st.one_of(
        st.builds(completion, slot_ids, st.booleans()),
        st.builds(chat, slot_ids),
        st.builds(action, ids, st.sampled_from(["save", "restore", "restore", "erase", "bogus"]), names),
    )


def media_file_cases() -> st.SearchStrategy[Case]:
    """``file://`` media paths with special names and bytes (issue 46: a NUL was a 500)."""
    paths = st.one_of(st.sampled_from(["x%00y", "x\x00y", "\x00", "pipe.bin", "../slots/pipe.bin", "/dev/zero",
                                       "/proc/self/fd/0", "dir.bin", "a" * 5000, "%2e%2e/x", "\ud800"]), odd_strings)

    def body(path: str, kind: str) -> Json:
        part = ({"type": "image_url", "image_url": {"url": f"file://{path}"}} if kind == "image"
                else {"type": "input_audio", "input_audio": {"data": f"file://{path}", "format": "wav"}})
        return {**CHAT_BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, part]}]}

    return st.builds(body, paths, st.sampled_from(["image", "audio"])).flatmap(
        lambda b: _post_case("/v1/chat/completions", b, "media-file"))


def all_cases() -> st.SearchStrategy[Case]:
    return st.one_of(chat_cases(), completion_cases(), grammar_cases(), template_cases(), raw_body_cases(),
                     admin_cases(), route_cases(), dry_cases(), slot_cases(), media_file_cases())


FAMILIES = {"chat": chat_cases, "completions": completion_cases, "grammars": grammar_cases,
            "templates": template_cases, "raw_bodies": raw_body_cases, "admin": admin_cases, "routes": route_cases,
            "dry": dry_cases, "slots": slot_cases, "media_files": media_file_cases}


# -- per-request LoRA scales under concurrency (issue 46) ------------------------------------------------

LORA_PROMPTS = ("Name a colour.", "Say hello.", "What is 2+2?")


@dataclass(frozen=True)
class LoraRound:
    """Requests sent at once, each with its own scale of the server's one adapter (``lora``), and how:
    every answer must equal the same request's answer alone."""

    prompt: str
    scales: tuple[float, ...]
    route: str = "/v1/chat/completions"

    def body(self, scale: float) -> Json:
        lora = [{"id": 0, "scale": scale}]
        if self.route == "/completion":
            return {"prompt": self.prompt, "n_predict": 6, "temperature": 0, "lora": lora}
        return {"messages": [{"role": "user", "content": self.prompt}], "max_tokens": 6, "temperature": 0, "lora": lora}


lora_rounds = st.builds(LoraRound, st.sampled_from(LORA_PROMPTS),
                        st.lists(st.sampled_from([0.0, 1.0, 0.5, 1.0, 0.0]), min_size=2, max_size=8).map(tuple),
                        st.sampled_from(["/v1/chat/completions", "/completion"]))


def lora_round_problems(port: int, round_: LoraRound, solo: dict[tuple[str, str, float], bytes]) -> list[str]:
    """Send the round's requests at once; what differs from each request's answer alone (``solo``:
    answers already known, filled in here, one request at a time)."""
    def answer(scale: float) -> bytes | str:
        outcome = send(port, Case("POST", round_.route, encode(round_.body(scale)), kind="lora"))
        if outcome.status != 200:
            return f"HTTP {outcome.status}: {outcome.describe(200)}"
        data = json.loads(outcome.body)
        text = data["content"] if round_.route == "/completion" else data["choices"][0]["message"]["content"]
        return str(text).encode()

    for scale in set(round_.scales):
        key = (round_.route, round_.prompt, scale)
        if key not in solo:
            alone = answer(scale)
            if isinstance(alone, str):
                return [f"alone, scale {scale}: {alone}"]
            solo[key] = alone
    with ThreadPoolExecutor(len(round_.scales)) as pool:
        together = list(pool.map(answer, round_.scales))
    return [f"scale {scale} answered {got!r}, alone {solo[(round_.route, round_.prompt, scale)]!r}"
            for scale, got in zip(round_.scales, together, strict=True)
            if got != solo[(round_.route, round_.prompt, scale)]]


def write_lora(path: Path, n_embd: int = 576, rank: int = 4) -> Path:
    """A random LoRA adapter on attn_q of SmolLM2's first two layers (large enough to move the logits)."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    for layer in (0, 1):
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_a", rng.normal(0, 0.5, (rank, n_embd)).astype(np.float32))
        writer.add_tensor(f"blk.{layer}.attn_q.weight.lora_b", rng.normal(0, 0.5, (n_embd, rank)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# -- findings -----------------------------------------------------------------------------------------

def _finding(path: str, body: Json, name: str) -> Case:
    return Case("POST", path, encode(body), kind=f"finding/{name}")


_DEEP_GRAMMAR = "root ::= " + "(" * 20_000 + '"a"' + ")" * 20_000
_ENUM = {"enum": [f"value number {i}" for i in range(MAX_ITEMS)]}

FINDINGS: dict[str, Case] = {
    # issue 26's list and what the fuzzer found on main since (each also drawn by the strategies);
    # tests/server/test_http_fuzz.py sends each one on its own
    "raw-grammar-20000-deep": _finding("/v1/completions", {**COMPLETION_BASE, "grammar": _DEEP_GRAMMAR}, "grammar"),
    "chat-grammar-20000-deep": _finding("/v1/chat/completions", {**CHAT_BASE, "grammar": _DEEP_GRAMMAR}, "grammar"),
    "raw-grammar-1000-deep-star": _finding("/v1/completions", {
        **COMPLETION_BASE, "grammar": "root ::= " + "[a]*(" * 1000 + '"b"' + ")" * 1000}, "grammar"),
    "raw-grammar-left-recursion": _finding("/v1/completions", {
        **COMPLETION_BASE, "grammar": 'root ::= root "a" | "a"'}, "grammar"),
    "chat-grammar-double-star": _finding("/v1/chat/completions", {**CHAT_BASE, "grammar": 'root ::= "a"**'},
                                         "grammar"),
    "chat-grammar-token-ref": _finding("/v1/chat/completions", {**CHAT_BASE, "grammar": "root ::= <[0]>"}, "grammar"),
    "huge-enum": _finding("/v1/chat/completions", {**CHAT_BASE, "json_schema": _ENUM}, "json_schema"),
    # issue 25's field table: an integer beyond 64 bits (nlohmann's double) and beyond a double
    "responses-penalty-10e400": _finding("/v1/responses", {**RESPONSES_BASE, "frequency_penalty": 10**400},
                                         "frequency_penalty"),
    "raw-temperature-10e400": _finding("/v1/completions", {**COMPLETION_BASE, "temperature": 10**400},
                                       "temperature"),
    "schema-min-items-above-max": _finding("/v1/completions", {
        **COMPLETION_BASE, "json_schema": {"type": "array", "minItems": 3, "maxItems": 2}}, "json_schema"),
    "schema-min-length-above-max": _finding("/v1/completions", {
        **COMPLETION_BASE, "json_schema": {"type": "string", "minLength": 3, "maxLength": 2}}, "json_schema"),
    "schema-minimum-above-maximum": _finding("/v1/completions", {
        **COMPLETION_BASE, "json_schema": {"type": "integer", "minimum": 5, "maximum": 2}}, "json_schema"),
    "schema-min-items-100000": _finding("/v1/chat/completions", {
        **CHAT_BASE, "response_format": {"type": "json_schema", "json_schema": {"schema": {
            "type": "array", "items": {"type": "integer"}, "minItems": 100_000}}}}, "response_format"),
    "schema-1000-deep": _finding("/v1/chat/completions", {
        **CHAT_BASE, "json_schema": _deep_schema(1000, "object")}, "json_schema"),
    "schema-ref-root": _finding("/v1/chat/completions", {**CHAT_BASE, "json_schema": {"$ref": "#"}}, "json_schema"),
    "schema-bogus-type": _finding("/v1/chat/completions", {**CHAT_BASE, "json_schema": {"type": "bogus"}},
                                  "json_schema"),
    "schema-huge-bounds": _finding("/v1/chat/completions", {
        **CHAT_BASE, "json_schema": {"type": "integer", "minimum": -1e30, "maximum": 1e30}}, "json_schema"),
    "response-format-xml": _finding("/v1/chat/completions", {**CHAT_BASE, "response_format": {"type": "xml"}},
                                    "response_format"),
    "response-format-string": _finding("/v1/chat/completions", {**CHAT_BASE, "response_format": "json"},
                                       "response_format"),
    "response-format-number": _finding("/v1/chat/completions", {**CHAT_BASE, "response_format": 5},
                                       "response_format"),
    "response-format-schema-string": _finding("/v1/chat/completions", {
        **CHAT_BASE, "response_format": {"type": "json_schema", "json_schema": {"schema": "x"}}}, "response_format"),
    "template-kwargs-messages": _finding("/v1/chat/completions", {
        **CHAT_BASE, "chat_template_kwargs": {"messages": 5}}, "chat_template_kwargs"),
    "body-100000-deep": Case("POST", "/v1/chat/completions", b"[" * 100_000 + b"]" * 100_000, kind="finding/body"),
    "field-1000-deep": _finding("/v1/chat/completions", {**CHAT_BASE, "seed": deep_text(1000)}, "body"),
    "tokenize-lone-surrogate": Case("POST", "/tokenize", b'{"content": "\\ud800"}', kind="finding/tokenize"),
    "tokenize-surrogate-bytes": Case("POST", "/tokenize", b'{"content": "\xed\xa0\x80"}', kind="finding/tokenize"),
    "tokenize-deep-field": Case("POST", "/tokenize", encode({"content": "x", "with_pieces": deep_text(1000, "dict")}),
                                kind="finding/tokenize"),
    "detokenize-negative": _finding("/detokenize", {"tokens": [-1]}, "detokenize"),
    "detokenize-out-of-vocabulary": _finding("/detokenize", {"tokens": [10**9]}, "detokenize"),
    "raw-prompt-token-out-of-vocabulary": _finding("/v1/completions", {**COMPLETION_BASE, "prompt": [10**9]},
                                                   "prompt"),
    "detokenize-deep-field": Case("POST", "/detokenize", encode({"tokens": deep_text(1000, "dict")}),
                                  kind="finding/detokenize"),
    "xtc-probability-negative": _finding("/v1/chat/completions", {**CHAT_BASE, "xtc_probability": -1}, "sampling"),
    "xtc-threshold-huge": _finding("/v1/completions", {**COMPLETION_BASE, "xtc_threshold": 2**31}, "sampling"),
    "top-p-above-one": _finding("/v1/completions", {**COMPLETION_BASE, "top_p": 5}, "sampling"),
    "top-k-negative": _finding("/v1/completions", {**COMPLETION_BASE, "top_k": -5}, "sampling"),
    "mirostat-7": _finding("/v1/completions", {**COMPLETION_BASE, "mirostat": 7}, "sampling"),
    "dry-base-below-one": _finding("/v1/completions", {**COMPLETION_BASE, "dry_multiplier": 1, "dry_base": 0.5},
                                   "sampling"),
    "seed-2-64": _finding("/v1/completions", {**COMPLETION_BASE, "seed": 2**64}, "sampling"),
    "logit-bias-out-of-vocabulary": _finding("/v1/chat/completions", {**CHAT_BASE, "logit_bias": {"999999": 1}},
                                             "sampling"),
    "tokenize-20-MB": _finding("/tokenize", {"content": "a " * (10 << 20)}, "tokenize"),
    # issue 46 (a hostile client's second attack)
    "dry-5000-breakers": _finding("/v1/chat/completions", {**CHAT_BASE, "dry_multiplier": 0.8,
                                                           "dry_sequence_breakers": _breakers(5000, "b")}, "dry"),
    "completion-ignore-eos": _finding("/completion", {**COMPLETION_BASE, "ignore_eos": True}, "bias"),
    "completion-bias-false": _finding("/completion", {**COMPLETION_BASE, "logit_bias": [[1, False]]}, "bias"),
    "completion-id-slot-3": Case("POST", "/completion", encode({**COMPLETION_BASE, "id_slot": 3}),
                                 kind="finding/id_slot", expect_slot=3 % N_SLOTS),
    "slot-restore-fifo": _finding("/slots/0?action=restore", {"filename": "pipe.bin"}, "slots"),
    "slot-save-over-fifo": _finding("/slots/1?action=save", {"filename": "pipe.bin"}, "slots"),
    "slot-restore-dev-zero": _finding("/slots/0?action=restore", {"filename": "dev.bin"}, "slots"),
    # found by the DRY family: a look-back window is allocated whole (10^9: 4-8 GB)
    "dry-penalty-last-n-1e9": _finding("/v1/completions", {**COMPLETION_BASE, "temperature": 0.7, "dry_multiplier": 0.8,
                                                           "dry_penalty_last_n": 10**9}, "dry"),
    "repeat-last-n-1e9": _finding("/v1/chat/completions", {**CHAT_BASE, "temperature": 0.7, "repeat_penalty": 1.1,
                                                           "repeat_last_n": 10**9}, "sampling"),
}
