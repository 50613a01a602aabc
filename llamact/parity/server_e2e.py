"""The server_e2e parity row: the case matrix (server_cases.py) answered by upstream's llama-server.

    python -m llamact.parity.server_e2e                      # every case, a line per answer
    python -m llamact.parity.server_e2e --cases 'smollm2/Qwen*' --out answers.json

Each case is asked twice, with the same request: streamed (the chunks, usage and timings) and not
streamed with llama-server's ``verbose`` and ``return_tokens`` (the generated token ids and raw text,
which the streamed chat chunks do not carry). The prompt tokens are the server's ``/tokenize``
(add_special, parse_special: what its chat endpoint does) of its ``/apply-template`` prompt, checked
against the token count the completion reports. Greedy sampling and ``cache_prompt: false`` make
each answer a function of the request alone.

Why here and not only in tests/: the scoreboard (``python -m llamact.parity``) reports this row
beside the oracle's, so users who run parity see it too; tests/parity drives the same code.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .. import errors
from ..json_types import Json
from .chat_answer import ChatAnswer, answer_from_openai
from .corpus import Case, Corpus
from .llama_server import LlamaServer, LlamaServerError, ServerConfig, find_llama_server
from .server_cache import ServerAnswerCache
from .server_cases import E2ECase, e2e_cases
from .server_compare import Verdict, compare


@dataclass
class ServerRecord:
    """llama-server's answer to one case (or the error it answered), with the clock its template saw."""

    case_id: str
    template_now: float
    answer: ChatAnswer | None = None
    error: str | None = None
    seconds: float = 0.0

    def to_json(self, with_raw: bool = False) -> Json:
        return {"case_id": self.case_id, "template_now": self.template_now, "seconds": round(self.seconds, 3),
                "error": self.error, "answer": self.answer.to_json(with_raw) if self.answer else None}

    @classmethod
    def from_json(cls, data: Json) -> ServerRecord:
        answer = ChatAnswer.from_json(data["answer"]) if data.get("answer") is not None else None
        return cls(data["case_id"], data["template_now"], answer, data.get("error"), data.get("seconds", 0.0))


def ask_server(server: LlamaServer, case: E2ECase) -> ChatAnswer:
    """One case's answer from a running server (started with the case's server configuration)."""
    chunks = list(server.stream("/v1/chat/completions", case.request_body(stream=True)))
    completion = server.post("/v1/chat/completions", case.request_body(stream=False))
    verbose = completion.pop("__verbose", None)
    if not isinstance(verbose, dict) or "tokens" not in verbose:
        raise LlamaServerError(f"{case.id}: the completion has no __verbose.tokens (was verbose ignored?)")
    prompt = server.post("/apply-template", case.request_body(stream=False))["prompt"]
    prompt_tokens = server.post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
    answer = answer_from_openai(chunks, completion, prompt=prompt, prompt_tokens=prompt_tokens,
                                tokens=verbose["tokens"], text=verbose.get("content", ""))
    # the harness's own view of the server must agree with what the server says it did
    evaluated = verbose.get("tokens_evaluated")
    if evaluated != len(prompt_tokens):
        answer.problems.append(f"/tokenize gave {len(prompt_tokens)} prompt tokens, the completion evaluated "
                               f"{evaluated}")
    usage = answer.usage or {}
    if usage.get("prompt_tokens") != len(prompt_tokens):
        answer.problems.append(f"usage.prompt_tokens {usage.get('prompt_tokens')} != {len(prompt_tokens)}")
    if usage.get("completion_tokens") != len(answer.tokens):
        answer.problems.append(f"usage.completion_tokens {usage.get('completion_tokens')} != "
                               f"{len(answer.tokens)} tokens of the non-streamed run")
    return answer


def run_server_cases(cases: Iterable[E2ECase], models: dict[str, Path], llama_cpp: Path,
                     executable: Path | None = None, n_threads: int | None = None,
                     progress: Any = None, cache: bool = False) -> dict[str, ServerRecord]:
    """Ask llama-server every case: one server per (model, template, reasoning format), stopped after its
    cases. A case the server refuses is recorded with its error; a server that does not start is an
    exception (the harness is broken, not the case). ``cache``: read and keep answers in the
    on-disk cache (server_cache.py); a server starts only for a group with a case not cached."""
    groups: dict[tuple[str, str, str], list[E2ECase]] = {}
    for case in cases:
        groups.setdefault(case.server_key(), []).append(case)
    records: dict[str, ServerRecord] = {}
    executable = executable if executable is not None else find_llama_server()
    answers = ServerAnswerCache(executable) if cache else None
    for (model, _template, reasoning_format), group in groups.items():
        config = ServerConfig(models[model], group[0].template_path(llama_cpp), reasoning_format)
        if n_threads:
            config = replace(config, n_threads=n_threads)
        keys = {case.id: answers.key(case, config) for case in group} if answers else {}
        missing = []
        for case in group:
            cached = answers.get(keys[case.id]) if answers else None
            if cached is None:
                missing.append(case)
                continue
            records[case.id] = ServerRecord.from_json(cached)
            if progress is not None:
                progress(records[case.id])
        if not missing:
            continue
        with LlamaServer(config, executable) as server:
            for case in missing:
                started = time.perf_counter()
                record = ServerRecord(case.id, template_now=time.time())
                try:
                    record.answer = ask_server(server, case)
                except LlamaServerError as exc:
                    if not server.running:
                        raise LlamaServerError(f"{case.id}: llama-server died:\n{server.log_tail()}") from exc
                    record.error = str(exc)
                record.seconds = time.perf_counter() - started
                records[case.id] = record
                if answers is not None:
                    answers.put(keys[case.id], record.to_json(with_raw=True))
                if progress is not None:
                    progress(record)
    return records


# -- the scoreboard row ------------------------------------------------------------------------

COMPONENT = "server_e2e"


def add_server_e2e_cases(corpus: Corpus, models: dict[str, Path], llama_cpp: Path, *, with_answers: bool,
                         executable: Path | None = None, cache: bool = True) -> None:
    """The row's cases for the models at hand. ``with_answers`` asks llama-server (minutes); without
    it the cases are listed with no answer (counted, never judged equal).
    """
    cases = [c for c in e2e_cases() if c.model in models]
    records = run_server_cases(cases, models, llama_cpp, executable, cache=cache) if with_answers else {}
    for e2e in cases:
        corpus.add(row_case(e2e, records.get(e2e.id)))


def row_case(e2e: E2ECase, record: ServerRecord | None) -> Case:
    """The scoreboard's case for ``e2e``, with the server's record as the expected answer."""
    return Case(COMPONENT, f"{COMPONENT}/{e2e.id}", e2e.template, asdict(e2e),
                record.to_json() if record is not None else None)


def judge_answers(cases: Iterable[E2ECase], records: dict[str, ServerRecord], runner: Any) -> dict[str, Verdict]:
    """Every case's verdict as the scoreboard reaches it: ``runner.run`` (create_answer.CreateRunner)
    answers the row's case, :func:`judge` compares that with the server's record."""
    mode = bool(getattr(runner, "upstream_compat", False))
    return judge_answers_in_modes(cases, records, runner, (mode,))[mode]


def judge_answers_in_modes(cases: Iterable[E2ECase], records: dict[str, ServerRecord], runner: Any,
                           modes: tuple[bool, ...]) -> dict[bool, dict[str, Verdict]]:
    """``judge_answers`` with ``upstream_compat`` set to each of ``modes``, from one set of generations
    (``CreateRunner.run_modes``)."""
    verdicts: dict[bool, dict[str, Verdict]] = {mode: {} for mode in modes}
    for e2e in cases:
        case = row_case(e2e, records.get(e2e.id))
        for mode, got in runner.run_modes(case, modes).items():
            verdicts[mode][e2e.id] = judge(case, got, upstream_compat=mode)
    return verdicts


def case_from_input(data: Json) -> E2ECase:
    return E2ECase(**{**data, "stop": tuple(data.get("stop") or ())})


def _failure(got: Json) -> Exception | str:
    """What llamact raised, from the runner's ``{"error": {"exception", "message", "details"}}``: the
    LlamaException itself where it names one, else the JSON as text."""
    error = (got.get("error") or got.get("raised")) if isinstance(got, dict) else None
    if isinstance(error, dict):
        kind = getattr(errors, str(error.get("exception")), None)
        if isinstance(kind, type) and issubclass(kind, errors.LlamaException):
            return kind(str(error.get("message", "")), error.get("details") or {})
    return json.dumps(got)


def judge(case: Case, got: Json, *, upstream_compat: bool = False) -> Verdict:
    """The scoreboard's verdict on a runner's answer: ``got`` is a ChatAnswer's JSON, or
    ``{"error": {...}}`` when llamact raised (``{"raised": {...}}`` when it raised past the runner)."""
    expected = case.expected or {}
    server: ChatAnswer | str = (ChatAnswer.from_json(expected["answer"]) if expected.get("answer") is not None
                                else str(expected.get("error")))
    failed = not isinstance(got, dict) or "error" in got or "raised" in got
    llamact: ChatAnswer | Exception | str = (_failure(got) if failed else ChatAnswer.from_json(got))
    return compare(case_from_input(case.input), server, llamact, upstream_compat=upstream_compat)


def summary_line(record: ServerRecord) -> str:
    if record.answer is None:
        return f"{record.case_id}: ERROR {record.error}"
    a = record.answer
    calls = ", ".join(f"{c['name']}({c['arguments']})" for c in a.message["tool_calls"])
    parts = [f"{record.case_id} [{record.seconds:.1f}s] {a.finish_reason} "
             f"prompt={len(a.prompt_tokens)} gen={len(a.tokens)}"]
    if a.message["reasoning_content"]:
        parts.append(f"thinking={a.message['reasoning_content'][:60]!r}")
    if a.message["content"]:
        parts.append(f"content={a.message['content'][:60]!r}")
    if calls:
        parts.append(f"calls={calls[:100]}")
    if a.problems:
        parts.append(f"PROBLEMS={a.problems}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    from .locate import available_models, find_llama_cpp

    parser = argparse.ArgumentParser(prog="python -m llamact.parity.server_e2e", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", help="the pinned llama.cpp tree (for its templates)")
    parser.add_argument("--server", help="the llama-server executable (default: the installed one)")
    parser.add_argument("--cases", help="a glob over case ids (default: every case)")
    parser.add_argument("--threads", type=int, help="llama-server threads (default: as llamact's default)")
    parser.add_argument("--out", help="write every answer (raw chunks included) as JSON here")
    args = parser.parse_args(argv)

    llama_cpp = find_llama_cpp(args.llama_cpp)
    models = available_models(True)
    cases = [c for c in e2e_cases() if c.model in models and (not args.cases or fnmatch.fnmatch(c.id, args.cases))]
    started = time.perf_counter()
    records = run_server_cases(cases, models, llama_cpp, Path(args.server) if args.server else None,
                               args.threads, progress=lambda r: print(summary_line(r), flush=True))
    print(f"\n{len(records)} cases in {time.perf_counter() - started:.1f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({k: r.to_json(with_raw=True) for k, r in records.items()},
                                             ensure_ascii=False, indent=1) + "\n")
    return 1 if any(r.answer is not None and r.answer.problems for r in records.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
