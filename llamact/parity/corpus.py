"""Reference corpora: inputs generated from the pinned tree, expected outputs answered by the oracle.

Nothing here is hand-written expectation. Inputs come from three places:

* every template in ``models/templates/`` x the scenario matrix (scenarios.py);
* model outputs synthesised by rendering assistant messages through the template itself and
  taking what the assistant turn adds (then parsed at every UTF-8-safe prefix, as a stream);
* upstream's own unit-test vectors that are plain data (upstream_vectors.py);

and the oracle, built from the same tree, answers each. A corpus is a list of ``Case`` per
component; ``build_corpus`` is deterministic (the oracle's clock is fixed), which the tests check.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..json_types import Json
from .oracle import OracleClient, OracleError, OracleProcessError
from .scenarios import ASSISTANT_OUTPUTS, SCENARIOS, USER, AssistantOutput

# Fixed special tokens for bare templates: parity needs both sides to see the same values,
# not any model's real ones.
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"

# What a model stops at. A rendered assistant turn ends with an end-of-turn marker (the model's
# end-of-generation token, never seen as text) and sometimes whatever the template puts after a
# turn. That tail is learnt per template by rendering an assistant message whose content is a
# sentinel: what follows the sentinel is the turn's tail, and the synthesised output loses the
# longest part of that tail it ends with (cut at a marker start). These markers are the fallback.
TURN_TAIL_SENTINEL = "TAIL_SENTINEL_7f3a"
END_OF_TURN_MARKERS = (
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|eot|>", "<|eom|>", "<end_of_turn>", "</s>",
    "<|endoftext|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|return|>", "<|END_OF_TURN_TOKEN|>",
    "<|end_of_msg|>", "<end_of_sentence>", "<|role_end|>", "<|END_RESPONSE|>", "<turn|>", "</assistant>",
)
_MARKER_STARTS = "<[\n"


@dataclass(frozen=True)
class Case:
    """One comparison: the component's ``input`` and the oracle's ``expected`` answer.

    ``expected`` is the oracle's result, or ``{"error": {"kind", "message"}}`` when upstream
    itself fails (a fact to record, not to hide). ``group`` names what the case is about (usually
    the template), for per-template error counts.
    """

    component: str
    id: str
    group: str
    input: Json
    expected: Json

    @property
    def oracle_error(self) -> bool:
        return isinstance(self.expected, dict) and set(self.expected) == {"error"}


@dataclass
class Corpus:
    cases: dict[str, list[Case]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, case: Case) -> None:
        self.cases.setdefault(case.component, []).append(case)

    def digest(self) -> str:
        """A hash of every case, to prove two builds identical."""
        h = hashlib.sha256()
        for component in sorted(self.cases):
            for case in self.cases[component]:
                h.update(json.dumps([case.id, case.input, case.expected], sort_keys=True,
                                    ensure_ascii=False).encode())
        return h.hexdigest()

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for component, cases in self.cases.items():
            with (directory / f"{component}.jsonl").open("w", encoding="utf-8") as fh:
                for case in cases:
                    fh.write(json.dumps({"id": case.id, "group": case.group, "input": case.input,
                                         "expected": case.expected}, ensure_ascii=False) + "\n")


def ask(oracle: OracleClient, op: str, /, **fields: Any) -> Any:
    """``oracle.request``, except that an oracle that cannot answer (died, hung, garbled) becomes
    an error answer of kind ``oracle_failed``: recorded in the corpus, never matched by llamact,
    and the build carries on (the client restarts the process on the next request)."""
    try:
        return oracle.request(op, **fields)
    except OracleProcessError as exc:
        return OracleError("oracle_failed", str(exc), op)


def _answer(result: Any) -> Json:
    if isinstance(result, OracleError):
        return {"error": {"kind": result.kind, "message": result.message}}
    return result


def template_files(llama_cpp_dir: Path) -> list[Path]:
    return sorted((llama_cpp_dir / "models" / "templates").glob("*.jinja"))


def _apply_request(template: str, inputs: Json) -> Json:
    return {"template": template, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "add_bos": False,
            "add_eos": False, "inputs": inputs}


# -- template corpora ------------------------------------------------------------------------


def _template_cases(oracle: OracleClient, name: str, source: str, corpus: Corpus) -> dict[str, Json]:
    """caps + chat_apply (and its prompt) for every scenario; returns the answers by scenario."""
    corpus.add(Case("caps", f"caps/{name}", name, {"template": source}, _answer(ask(oracle, "caps", template=source))))
    _template_jinja_cases(oracle, name, source, corpus)
    answers: dict[str, Json] = {}
    for scenario in SCENARIOS:
        request = _apply_request(source, scenario.inputs())
        answer = _answer(ask(oracle, "chat_apply", **request))
        answers[scenario.name] = answer
        case_id = f"{name}/{scenario.name}"
        corpus.add(Case("chat_apply", f"chat_apply/{case_id}", name, request, answer))
        prompt = answer if "error" in answer else {"prompt": answer["prompt"]}
        corpus.add(Case("template_render", f"template_render/{case_id}", name, request, prompt))
    return answers


def _analysis_case(oracle: OracleClient, name: str, source: str, corpus: Corpus) -> None:
    """autoparser_analysis: upstream's differential analysis of the template (op ``analyze``), with
    the special tokens chat_apply sees; it runs on any template, specialized families included."""
    request = {"template": source, "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN}
    corpus.add(Case("autoparser_analysis", f"autoparser_analysis/{name}", name, request,
                    _answer(ask(oracle, "analyze", **request))))


def _template_jinja_cases(oracle: OracleClient, name: str, source: str, corpus: Corpus) -> None:
    """template_jinja: the template rendered directly (oracle op ``jinja_render``), every scenario.

    The context is what a bare render sees: the scenario's messages (OpenAI JSON as-is), its tools
    when it has any, fixed special tokens, ``add_generation_prompt`` only when set, and
    ``enable_thinking``. The oracle's clock stays at its default instant.
    """
    for scenario in SCENARIOS:
        inputs = scenario.inputs()
        context: Json = {"messages": inputs["messages"]}
        if inputs.get("tools"):
            context["tools"] = inputs["tools"]
        context.update(bos_token=BOS_TOKEN, eos_token=EOS_TOKEN)
        if scenario.add_generation_prompt:
            context["add_generation_prompt"] = True
        context["enable_thinking"] = scenario.enable_thinking
        request = {"template": source, "context": context}
        corpus.add(Case("template_jinja", f"template_jinja/{name}/{scenario.name}", name, request,
                        _answer(ask(oracle, "jinja_render", **request))))


def _turn_tail(oracle: OracleClient, source: str) -> str:
    """What the template renders after an assistant message's content ("" if it cannot tell)."""
    inputs = {"messages": [USER, {"role": "assistant", "content": TURN_TAIL_SENTINEL}],
              "add_generation_prompt": False}
    answer = ask(oracle, "chat_apply", **_apply_request(source, inputs))
    if isinstance(answer, OracleError) or TURN_TAIL_SENTINEL not in answer["prompt"]:
        return ""
    return str(answer["prompt"].rsplit(TURN_TAIL_SENTINEL, 1)[1])


def _strip_turn_tail(text: str, tail: str) -> str:
    common = len(os.path.commonprefix([text[::-1], tail[::-1]]))
    if common:
        cut = len(text) - common
        while cut < len(text) and text[cut] not in _MARKER_STARTS:
            cut += 1  # never cut inside a marker the output shares only partly with the tail
        if cut < len(text):
            return text[:cut]
    stripped = text.rstrip()
    for marker in END_OF_TURN_MARKERS:
        if stripped.endswith(marker):
            return stripped[: -len(marker)]
    return text


def output_base_request(source: str, output: AssistantOutput) -> Json:
    """The ``chat_apply`` request whose prompt a synthesised output continues."""
    return _apply_request(source, {"messages": [USER], "tools": output.tools, "tool_choice": "auto",
                                   "parallel_tool_calls": output.parallel_tool_calls,
                                   "reasoning_format": output.reasoning_format, "add_generation_prompt": True})


def synthesise_output(oracle: OracleClient, source: str, output: AssistantOutput) -> tuple[Json, str, bool] | None:
    """Render the prompt without and with the assistant message; the difference is what a model
    would have generated. Returns (apply answer for the prompt, output text, exact) or None when
    upstream cannot render either. ``exact`` is False when the assistant turn does not extend the
    generation prompt (the text is then taken after the longest common prefix)."""
    base_request = output_base_request(source, output)
    base_inputs = base_request["inputs"]
    base = ask(oracle, "chat_apply", **base_request)
    full = ask(oracle, "chat_apply", **_apply_request(
        source, dict(base_inputs, messages=[USER, output.message], add_generation_prompt=False)))
    if isinstance(base, OracleError) or isinstance(full, OracleError):
        return None
    before, after = base["prompt"], full["prompt"]
    tail = _turn_tail(oracle, source)
    if after.startswith(before):
        return base, _strip_turn_tail(after[len(before):], tail), True
    common = len(os.path.commonprefix([before, after]))
    return base, _strip_turn_tail(after[common:], tail), False


def _parse_cases(oracle: OracleClient, name: str, source: str, corpus: Corpus) -> None:
    for output in ASSISTANT_OUTPUTS:
        synthesised = synthesise_output(oracle, source, output)
        if synthesised is None:
            corpus.notes.append(f"{name}/{output.name}: upstream cannot render the output; no parse cases")
            continue
        applied, text, exact = synthesised
        if not exact:
            corpus.notes.append(f"{name}/{output.name}: assistant turn does not extend the generation prompt")
        stream_request = {"parser": applied["parser"], "format": applied["format"],
                          "generation_prompt": applied["generation_prompt"],
                          "reasoning_format": output.reasoning_format, "text": text}
        steps = _answer(ask(oracle, "chat_parse_stream", **stream_request))
        stream_id = f"{name}/{output.name}"
        # the same stream, parsed with the parser llamact builds itself for the same request
        own_expected = {k: applied[k] for k in ("format", "generation_prompt", "parser")}
        own_expected["steps"] = steps
        corpus.add(Case("chat_parse_own", f"chat_parse_own/{stream_id}", name,
                        {"apply": output_base_request(source, output), "text": text}, own_expected))
        if "error" in steps:
            corpus.add(Case("chat_parse", f"chat_parse/{stream_id}", name, stream_request, steps))
            continue
        for step in steps:
            end, partial = step["end"], step["is_partial"]
            parse_input = {k: v for k, v in stream_request.items() if k != "text"}
            parse_input.update(text=text[:_char_index(text, end)], is_partial=partial, stream=stream_id)
            expected = {"error": {"kind": "parse", "message": step["error"]}} if "error" in step else step["message"]
            step_id = f"{stream_id}@{end}{'' if partial else '/final'}"
            corpus.add(Case("chat_parse", f"chat_parse/{step_id}", name, parse_input, expected))
            if "diffs" in step or "diffs_error" in step:
                error = {"error": {"kind": "diff", "message": step.get("diffs_error")}}
                diffs = step["diffs"] if "diffs" in step else error
                corpus.add(Case("msg_diffs", f"msg_diffs/{step_id}", name, {"stream": stream_id, "end": end,
                                "is_partial": partial}, diffs))
        if applied.get("parser"):
            corpus.add(Case("peg_arena", f"peg_arena/{stream_id}", name, {"parser": applied["parser"]},
                            applied["parser"]))
            _raw_parse_cases(oracle, corpus, name, stream_id, stream_request)
            for lazy in (False, True):
                request = {"parser": applied["parser"], "lazy": lazy}
                corpus.add(Case("peg_grammar", f"peg_grammar/{stream_id}/{'lazy' if lazy else 'full'}", name,
                                request, _answer(ask(oracle, "peg_grammar", **request))))


def _raw_parse_cases(oracle: OracleClient, corpus: Corpus, name: str, stream_id: str, request: Json) -> None:
    """The executor's raw result (type, span, AST) at every UTF-8-safe prefix of the generation
    prompt + output, as digests of its compact JSON (the oracle's peg_parse_stream)."""
    prompt = (request["generation_prompt"] or "").encode("utf-8")
    data = prompt + request["text"].encode("utf-8")
    steps = _answer(ask(oracle, "peg_parse_stream", parser=request["parser"], text_hex=data.hex(),
                                   **{"from": len(prompt)}))
    if "error" in steps:
        corpus.add(Case("peg_parse", f"peg_parse/{stream_id}", name, {"stream": stream_id, "end": None}, steps))
        return
    for step in steps:
        corpus.add(Case("peg_parse", f"peg_parse/{stream_id}@{step['end']}", name,
                        {"stream": stream_id, "end": step["end"]}, step["digest"]))


def _char_index(text: str, byte_offset: int) -> int:
    """The character index of a UTF-8 byte offset that lies on a character boundary."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8"))


# -- upstream vectors and models -------------------------------------------------------------


def _vector_cases(oracle: OracleClient, llama_cpp_dir: Path, corpus: Corpus) -> None:
    from . import upstream_vectors

    for vec in upstream_vectors.jinja_vectors(llama_cpp_dir):
        request = {"template": vec.template, "context": vec.context}
        corpus.add(Case("jinja", f"jinja/{vec.group}/{vec.name}", vec.group, request,
                        _answer(ask(oracle, "jinja_render", **request))))
    for svec in upstream_vectors.json_schema_vectors(llama_cpp_dir):
        try:
            schema = json.loads(svec.schema_text)
        except ValueError:
            schema = svec.schema_text  # upstream feeds some unparsable text on purpose
        request = {"schema": schema}
        corpus.add(Case("json_schema", f"json_schema/{svec.name}", "upstream", request,
                        _answer(ask(oracle, "json_schema_to_grammar", **request))))
    from .schema_corpus import SCHEMA_CORPUS

    for name, schema in SCHEMA_CORPUS:
        request = {"schema": schema}
        corpus.add(Case("json_schema", f"json_schema/corpus/{name}", "corpus", request,
                        _answer(ask(oracle, "json_schema_to_grammar", **request))))


TOKENIZE_TEXTS = [
    "Hello, world!",
    " leading space and  double  spaces",
    "Ünïcödé — 世界 🎉 naïve café",
    "line one\nline two\n\n\ttabbed",
    "def f(x):\n    return x ** 2  # code",
    "<|im_start|>user\nhi<|im_end|>",
    "<start_of_turn>user\nhi<end_of_turn>",
]

GENERATE_PROMPTS = ["The capital of France is", "Once upon a time, in a small village,", "1, 2, 3, 4,"]


def _model_cases(oracle: OracleClient, models: dict[str, Path], corpus: Corpus) -> None:
    for label, path in models.items():
        for i, text in enumerate(TOKENIZE_TEXTS):
            for parse_special in (False, True):
                request = {"model": str(path), "text": text, "add_special": True, "parse_special": parse_special}
                corpus.add(Case("tokenize", f"tokenize/{label}/{i}/{int(parse_special)}", label,
                                {**request, "model": label}, _answer(ask(oracle, "tokenize", **request))))
        for i, prompt in enumerate(GENERATE_PROMPTS):
            request = {"model": str(path), "prompt": prompt, "n_predict": 24, "n_ctx": 256, "n_batch": 256,
                       "n_threads": 2}
            corpus.add(Case("generate_greedy", f"generate_greedy/{label}/{i}", label, {**request, "model": label},
                            _answer(ask(oracle, "generate_greedy", **request))))


# -- the whole corpus ------------------------------------------------------------------------


def build_corpus(
    oracle: OracleClient,
    llama_cpp_dir: Path,
    models: dict[str, Path] | None = None,
    templates: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Corpus:
    """Every component's cases. ``templates`` restricts to template file stems (a fast subset)."""
    corpus = Corpus()
    wanted = set(templates) if templates is not None else None
    _vector_cases(oracle, llama_cpp_dir, corpus)
    for path in template_files(llama_cpp_dir):
        if wanted is not None and path.stem not in wanted:
            continue
        if progress:
            progress(path.stem)
        source = path.read_text(encoding="utf-8")
        _template_cases(oracle, path.stem, source, corpus)
        _analysis_case(oracle, path.stem, source, corpus)
        _parse_cases(oracle, path.stem, source, corpus)
    if models:
        _model_cases(oracle, models, corpus)
    return corpus


def oracle_errors_by_group(corpus: Corpus, components: Iterable[str]) -> dict[str, dict[str, int]]:
    """{group: {component: number of cases upstream itself fails}} for the closing notes."""
    out: dict[str, dict[str, int]] = {}
    for component in components:
        for case in corpus.cases.get(component, []):
            if case.oracle_error:
                out.setdefault(case.group, {}).setdefault(component, 0)
                out[case.group][component] += 1
    return out


def iter_cases(corpus: Corpus, component: str) -> Iterator[Case]:
    yield from corpus.cases.get(component, [])
