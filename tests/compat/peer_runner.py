"""Runs requests through llama-cpp-python, the peer: a script for the peer venv's python.

Never imported by the tests' process (its libllama must not meet llamact's): tests/compat/peer.py
starts it as a subprocess. stdin: a JSON list of cases, each

    {"model": path, "llama": {Llama kwargs}, "method": name, "args": [...], "kwargs": {...}}

stdout: one JSON list, a result per case: {"ok": value} or {"error": "Type: message"}. A stream
(``kwargs.stream``) comes back as the list of its chunk dicts. Arguments written {"$bytes": str}
become bytes (UTF-8); bytes results come back the same way (decoded as Latin-1, so exact), numpy
scalars (the peer's logprobs are float32) as numbers. Each model (path and Llama kwargs, among them
``chat_template_file``: a Jinja template rendered instead of the GGUF's) is loaded once, always
with verbose=False, and reset before each request. Two methods of the runner
itself: ``_info`` (the chat format the peer chose and the version), ``_attr`` (the attribute
``args[0]``, e.g. metadata) and ``_top2`` (the two largest logits after evaluating ``args[0]``, a
token list: how close a greedy choice was).
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

import llama_cpp


def _decode_arg(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return value["$bytes"].encode("utf-8")
        return {k: _decode_arg(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_arg(v) for v in value]
    return value


def _encode_result(value: Any) -> Any:
    if hasattr(value, "dtype") and hasattr(value, "item"):  # a numpy scalar (the peer's logprobs)
        return value.item()
    if isinstance(value, bytes):
        return {"$bytes": value.decode("latin-1")}
    if isinstance(value, dict):
        return {k: _encode_result(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode_result(v) for v in value]
    return value


def _info(llm: llama_cpp.Llama) -> dict[str, Any]:
    return {"version": llama_cpp.__version__, "chat_format": llm.chat_format, "n_ctx": llm.n_ctx(),
            "template": llm.metadata.get("tokenizer.chat_template")}


def _top2(llm: llama_cpp.Llama, tokens: list[int]) -> list[list[float]]:
    llm.reset()
    llm.eval(tokens)
    # the last row as llama.cpp holds it (Llama.scores is only filled with logits_all=True)
    row = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    logits = [row[i] for i in range(llm.n_vocab())]
    order = sorted(range(len(logits)), key=logits.__getitem__, reverse=True)[:2]
    return [[i, float(logits[i])] for i in order]


def _template_handler(llm: llama_cpp.Llama, template: str) -> Any:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text(token: int) -> str:
        return llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    return Jinja2ChatFormatter(template=template, eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()),
                               stop_token_ids=[llm.token_eos()]).to_chat_handler()


def _kwargs(case: dict[str, Any]) -> dict[str, Any]:
    kwargs = _decode_arg(case.get("kwargs", {}))
    grammar = kwargs.pop("grammar_gbnf", None)  # a grammar is an object: sent as its text
    if grammar is not None:
        kwargs["grammar"] = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
    return kwargs


def run(case: dict[str, Any], models: dict[str, llama_cpp.Llama]) -> Any:
    key = json.dumps([case["model"], case.get("llama", {})], sort_keys=True)
    if key not in models:
        options = dict(case.get("llama", {}))
        template = options.pop("chat_template_file", None)
        models[key] = llm = llama_cpp.Llama(model_path=case["model"], verbose=False, **options)
        if template is not None:  # the peer's way to another Jinja template: a handler made from it
            llm.chat_handler = _template_handler(llm, open(template, encoding="utf-8").read())
    llm = models[key]
    args = _decode_arg(case.get("args", []))
    if case["method"] == "_info":
        return _info(llm)
    if case["method"] == "_attr":
        return getattr(llm, args[0])
    if case["method"] == "_top2":
        return _top2(llm, *args)
    kwargs = _kwargs(case)
    llm.reset()  # every request from a fresh evaluation (no prefix of the previous one reused)
    result = getattr(llm, case["method"])(*args, **kwargs)
    if kwargs.get("stream"):
        result = list(result)
    return result


def main() -> None:
    cases = json.load(sys.stdin)
    models: dict[str, llama_cpp.Llama] = {}
    results = []
    for case in cases:
        try:
            results.append({"ok": _encode_result(run(case, models))})
        except Exception as exc:  # a case's failure is its answer, not the end of the others
            traceback.print_exc(file=sys.stderr)
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
