#!/usr/bin/env python3
"""Tool calling on BFCL v4, side by side: ``llamact serve``, llama-server at the pin and
llama-cpp-python's server, same GGUF, greedy, one server at a time on 127.0.0.1.

Questions, function docs and possible answers come from the ``bfcl-eval`` wheel (scripts/bench/bfcl/
data.py; categories simple_python, multiple, parallel), the docs become OpenAI tools as BFCL's own
OpenAI handler makes them, and each reply is scored by BFCL's possible-answer AST rules
(bfcl/scorer.py) on the ``tool_calls`` the server returned, as BFCL scores a function-calling model.
Every request: the question's messages, the tools, ``tool_choice`` (``auto`` and ``required``:
``--modes``), ``temperature`` 0, ``seed`` 0, ``repeat_penalty`` 1 (llama-cpp-python's default is
1.1), ``max_tokens`` ``--max-tokens``.

Per server x mode x category: ``correct`` (BFCL's verdict on the structured calls), ``structured``
(replies with at least one tool call), ``in text`` (replies whose ``content`` holds a call naming a
given tool: ``<tool_call>`` JSON, a fenced JSON block, bare JSON, a Python-style call; found by
bfcl/textcalls.py), ``no call``, ``HTTP err``, ``model ok`` (BFCL's verdict on what the model wrote,
structured or as text: the ceiling a recovery can reach), ``calls kept`` (of the replies where the
model wrote a call, structured or in its text, those whose calls all came back structured), tokens/s
(completion tokens over the requests' wall time, prompt included, the same measure for every server;
``gen tok/s``: the server's own generation figure where it gives one), and, when llamact says which recovery rule
produced a call (``choices[0].message.llamact.recovered``: a list of rule names), a count per rule.

    cd /tmp && nice -n 5 python /path/to/scripts/bench/bench_bfcl.py                  # qwen2.5-coder-0.5b, 10/category
    python .../bench_bfcl.py --model qwen2.5-coder-1.5b --limit 5 --json /tmp/bfcl-1.5b.json --markdown /tmp/b.md
    python .../bench_bfcl.py --servers llamact,llama-server --modes auto --limit 3   # a quick look
    python .../bench_bfcl.py --report /tmp/bfcl-1.5b.json                          # the tables again

The JSON file has every reply (server, mode, category, id, HTTP status, the raw message with its
``content`` and ``tool_calls``, the calls found in text with how they were written, BFCL's verdicts,
usage and timings) and the summary. Sizes: ``--limit`` questions per category, spread evenly over
the category (deterministic). The run stops asking after ``--budget-minutes`` and says so.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bfcl import data, scorer  # noqa: E402
from bfcl.textcalls import find_text_calls  # noqa: E402

HOST = "127.0.0.1"
PEER_PYTHON = Path.home() / ".cache/llamact/venv-peer/bin/python"
SERVERS = ("llamact", "llama-server", "llama-cpp-python")
# llama-cpp-python's function-calling handler for a model that is not Functionary: its README's
# "generic" choice; without --chat_format its server renders the GGUF's template and never returns
# tool_calls for "auto". It shows the tools only with a system message, and supports no "required".
PEER_CHAT_FORMAT = "chatml-function-calling"


@dataclass
class Reply:
    server: str
    mode: str
    category: str
    id: str
    status: int                       # HTTP status; 0: no answer (connection, timeout)
    seconds: float
    message: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    llamact: Any = None               # message.llamact (the recovery's extension), as sent
    recovered: list[str] = field(default_factory=list)
    text_calls: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] = field(default_factory=dict)
    model_verdict: dict[str, Any] = field(default_factory=dict)


# -- servers -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def server_command(name: str, model: Path, port: int, args: argparse.Namespace) -> tuple[list[str], str]:
    """The command line and the readiness path of one server."""
    t, c = str(args.threads), str(args.ctx_size)
    if name == "llamact":
        return [sys.executable, "-m", "llamact", "serve", "--model", str(model), "--host", HOST, "--port", str(port),
                "--parallel", "1", "--threads", t, "--threads-batch", t, "--ctx-size", c], "/health"
    if name == "llama-server":
        from llamact.parity.llama_server import find_llama_server

        return [str(find_llama_server()), "--model", str(model), "--host", HOST, "--port", str(port), "--jinja",
                "--parallel", "1", "--threads", t, "--threads-batch", t, "--ctx-size", c, "--no-webui"], "/health"
    return [args.llama_cpp_python, "-m", "llama_cpp.server", "--model", str(model), "--host", HOST,
            "--port", str(port), "--n_ctx", c, "--n_threads", t, "--n_threads_batch", t,
            "--chat_format", args.chat_format], "/v1/models"


class Server:
    def __init__(self, name: str, model: Path, args: argparse.Namespace) -> None:
        self.name, self.port = name, free_port()
        command, self.ready_path = server_command(name, model, self.port, args)
        self.log = tempfile.TemporaryFile()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        env.setdefault("OMP_WAIT_POLICY", "passive")   # the same for all three: no spinning on a shared machine
        env.pop("LLAMACT_PARSER_MEMO", None)   # the tests' "verify" rebuilds every memoised parser
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env)

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=5)
                conn.request("GET", self.ready_path)
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become ready:\n{self.log_tail()}")

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:].decode("utf-8", "replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def peer_ready(python: str) -> str | None:
    """None when ``python`` can run llama-cpp-python's server, else why not (with the fix)."""
    if not Path(python).exists():
        return f"{python} does not exist (scripts/_env.sh builds the peer's venv)"
    probe = subprocess.run([python, "-c", "import llama_cpp, llama_cpp.server.app, uvicorn"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        return None
    reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "no error text"
    return (f"{python} cannot import llama-cpp-python's server ({reason}): {python} -m pip install "
            "'llama-cpp-python[server]==<its version>'")


# -- one request -----------------------------------------------------------------------------------

def ask(server: Server, entry: data.Entry, mode: str, args: argparse.Namespace) -> Reply:
    body = {"model": "bfcl", "messages": entry.messages, "tools": entry.tools, "tool_choice": mode,
            "temperature": 0, "seed": args.seed, "repeat_penalty": 1.0, "max_tokens": args.max_tokens}
    reply = Reply(server.name, mode, entry.category, entry.id, 0, 0.0)
    t0 = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(HOST, server.port, timeout=args.timeout)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        reply.status = response.status
    except (OSError, http.client.HTTPException) as exc:
        reply.error = f"{type(exc).__name__}: {exc}"
        reply.seconds = time.perf_counter() - t0
        return reply
    reply.seconds = time.perf_counter() - t0
    try:
        answer = json.loads(raw)
    except ValueError:
        reply.error = raw[:2000].decode("utf-8", "replace")
        return reply
    if reply.status != 200:
        reply.error = json.dumps(answer)[:2000]
        return reply
    choice = (answer.get("choices") or [{}])[0]
    reply.message = choice.get("message") or {}
    reply.finish_reason = choice.get("finish_reason")
    reply.usage = answer.get("usage") or {}
    reply.timings = answer.get("timings") or {}
    extension = reply.message.get("llamact")
    reply.llamact = {"message": extension, "response": answer.get("llamact")} \
        if extension is not None or answer.get("llamact") is not None else None
    if isinstance(extension, dict) and isinstance(extension.get("recovered"), list):
        reply.recovered = [str(rule) for rule in extension["recovered"]]
    return reply


def decode_structured(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """BFCL's FC decoding: ``[{name: json.loads(arguments)}]``; None if the decoder would fail."""
    calls = message.get("tool_calls") or []
    if not calls:
        return None
    out = []
    for call in calls:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            return None
        out.append({function.get("name"): parsed})
    return out


def score(reply: Reply, entry: data.Entry) -> None:
    content = reply.message.get("content") or ""
    text_calls = find_text_calls(content if isinstance(content, str) else json.dumps(content), entry.tools)
    reply.text_calls = [{"name": c.name, "arguments": c.arguments, "kind": c.kind, "fixes": c.fixes}
                        for c in text_calls]
    structured = decode_structured(reply.message)
    if structured is None:
        kind = "ast_decoder:no_tool_calls" if not reply.message.get("tool_calls") else "ast_decoder:decoder_failed"
        reply.verdict = {"valid": False, "error_type": kind if reply.status == 200 else "http_error"}
    else:
        v = scorer.check(entry.category, entry.functions, structured, entry.possible_answer)
        reply.verdict = {"valid": v.valid, "error_type": v.error_type, "errors": [str(e)[:300] for e in v.errors]}
    written = structured if structured is not None else [c.as_output() for c in text_calls] or None
    if written is None:
        reply.model_verdict = {"valid": False, "error_type": "no_call_written"}
    else:
        v = scorer.check(entry.category, entry.functions, written, entry.possible_answer)
        reply.model_verdict = {"valid": v.valid, "error_type": v.error_type}


# -- the run ---------------------------------------------------------------------------------------

def spread(entries: list[data.Entry], limit: int) -> list[data.Entry]:
    """``limit`` entries evenly over the category (its first ones are all one subject)."""
    if limit <= 0 or limit >= len(entries):
        return entries
    return [entries[i * len(entries) // limit] for i in range(limit)]


def summarize(replies: list[Reply]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], list[Reply]] = {}
    for r in replies:
        rows.setdefault((r.server, r.mode, r.category), []).append(r)
    out = []
    for (server, mode, category), group in rows.items():
        n = len(group)
        ok = [r for r in group if r.status == 200]
        completion = sum(int(r.usage.get("completion_tokens") or 0) for r in ok)
        gen = [r.timings["predicted_per_second"] for r in ok if r.timings.get("predicted_per_second")]
        out.append({
            "server": server, "mode": mode, "category": category, "n": n,
            "correct": sum(r.verdict.get("valid", False) for r in group),
            "structured": sum(bool(r.message.get("tool_calls")) for r in group),
            "in_text": sum(bool(r.text_calls) for r in group),
            "in_text_only": sum(bool(r.text_calls) and not r.message.get("tool_calls") for r in group),
            # replies where the model wrote a call (structured, or in its text), and those whose calls all
            # came back structured (none left in the text)
            "wrote_call": sum(bool(r.text_calls) or bool(r.message.get("tool_calls")) for r in group),
            "kept": sum(bool(r.message.get("tool_calls")) and not r.text_calls for r in group),
            "no_call": sum(r.status == 200 and not r.text_calls and not r.message.get("tool_calls") for r in group),
            "http_errors": sum(r.status != 200 for r in group),
            "model_correct": sum(r.model_verdict.get("valid", False) for r in group),
            "tokens_per_s": completion / sum(r.seconds for r in ok) if ok else 0.0,
            "gen_tokens_per_s": sum(gen) / len(gen) if gen else None,
            "seconds": sum(r.seconds for r in group),
            "finish": dict(Counter(str(r.finish_reason) for r in ok)),
            "recovered": dict(Counter(rule for r in group for rule in r.recovered)),
            "text_call_kinds": dict(Counter(c["kind"] for r in group for c in r.text_calls)),
            "text_call_fixes": dict(Counter(f for r in group for c in r.text_calls for f in c["fixes"])),
        })
    return out


def same_as(replies: list[Reply], server: str, other: str) -> dict[str, list[int]]:
    """Per mode, [replies of ``server`` identical to ``other``'s (content and tool calls), compared]."""
    def key(r: Reply) -> Any:
        calls = [(c.get("function") or {}).get("name") for c in r.message.get("tool_calls") or []]
        args = [(c.get("function") or {}).get("arguments") for c in r.message.get("tool_calls") or []]
        return r.status, r.message.get("content"), calls, args

    theirs = {(r.mode, r.category, r.id): key(r) for r in replies if r.server == other}
    out: dict[str, list[int]] = {}
    for r in replies:
        if r.server == server and (r.mode, r.category, r.id) in theirs:
            tally = out.setdefault(r.mode, [0, 0])
            tally[0] += key(r) == theirs[(r.mode, r.category, r.id)]
            tally[1] += 1
    return out


def markdown(summary: list[dict[str, Any]], replies: list[Reply], meta: dict[str, Any]) -> str:
    lines = [f"BFCL v4 ({data.BFCL_VERSION}), model {meta['model']}, {meta['limit']} questions per category "
             f"(spread), greedy, {meta['threads']} thread(s), max_tokens {meta['max_tokens']}; "
             f"{meta['minutes']:.1f} min in all."]
    for mode in meta["modes"]:
        lines += ["", f"tool_choice `{mode}`:", "",
                  "| category | server | correct | structured | in text | no call | HTTP err | model ok "
                  "| calls kept | tok/s | gen tok/s | recovered |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in sorted((r for r in summary if r["mode"] == mode),
                          key=lambda r: (data.CATEGORIES.index(r["category"]), SERVERS.index(r["server"]))):
            n = row["n"]
            gen = f"{row['gen_tokens_per_s']:.1f}" if row["gen_tokens_per_s"] else "-"
            rec = ", ".join(f"{k} {v}" for k, v in sorted(row["recovered"].items())) or "-"
            kept = f"{row['kept']}/{row['wrote_call']}"
            lines.append(f"| {row['category']} | {row['server']} "
                         f"| {row['correct']}/{n} ({100 * row['correct'] / n:.0f}%) "
                         f"| {row['structured']} | {row['in_text']} | {row['no_call']} | {row['http_errors']} "
                         f"| {row['model_correct']}/{n} | {kept} | {row['tokens_per_s']:.1f} | {gen} | {rec} |")
    same = same_as(replies, "llamact", "llama-server")
    if same:
        lines += ["", "llamact's replies identical to llama-server's (content and calls): "
                  + "; ".join(f"{mode} {a}/{b}" for mode, (a, b) in same.items())]
    kinds = Counter((r.server, r.mode, c["kind"], "+".join(c["fixes"]) or "-") for r in replies for c in r.text_calls)
    if kinds:
        lines += ["", "Calls left in text, by how they were written (server, mode, envelope, fixes needed: calls):", ""]
        lines += [f"- {s} / {m} / {k} / {f}: {n}" for (s, m, k, f), n in sorted(kinds.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="GGUF path or a llamact named model")
    ap.add_argument("--categories", default=",".join(data.CATEGORIES))
    ap.add_argument("--limit", type=int, default=10, help="questions per category (0: all)")
    ap.add_argument("--modes", default="auto,required", help="tool_choice values")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request")
    ap.add_argument("--budget-minutes", type=float, default=90, help="stop asking after this long")
    ap.add_argument("--llama-cpp-python", default=str(PEER_PYTHON), help="the peer venv's python")
    ap.add_argument("--chat-format", default=PEER_CHAT_FORMAT, help="llama-cpp-python's --chat_format")
    ap.add_argument("--bfcl-wheel", type=Path, help="the bfcl-eval wheel (default: downloaded into the cache)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--report", type=Path, help="only print the tables of an earlier run's --json file again")
    args = ap.parse_args(argv)
    if args.report is not None:
        saved = json.loads(args.report.read_text(encoding="utf-8"))
        replies = [Reply(**r) for r in saved["replies"]]
        table = markdown(summarize(replies), replies, saved["meta"])
        print(table)
        if args.markdown:
            args.markdown.write_text(table, encoding="utf-8")
        return 0
    # a kill (SIGTERM) unwinds like Ctrl-C, so that the running server is stopped by its finally
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    from llamact.hub import resolve_model_path

    model = resolve_model_path(args.model)
    wheel = args.bfcl_wheel or data.wheel_path()
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    entries = {c: spread(data.load(wheel, c), args.limit) for c in categories}
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if "llama-cpp-python" in servers and (why := peer_ready(args.llama_cpp_python)) is not None:
        print(f"llama-cpp-python is left out: {why}", file=sys.stderr)
        servers.remove("llama-cpp-python")
    start = time.monotonic()
    deadline = start + args.budget_minutes * 60
    replies: list[Reply] = []
    skipped = 0
    by_id = {(c, e.id): e for c, es in entries.items() for e in es}
    for name in servers:
        t_server = time.monotonic()
        for mode in modes:
            # a fresh server per mode: the same prompts come again in the next mode, and a server that
            # keeps past prompts (llama-server's --cache-ram) would answer them from its cache
            server = Server(name, model, args)
            try:
                server.wait_ready()
                for category, group in entries.items():
                    for entry in group:
                        if time.monotonic() > deadline:
                            skipped += 1
                            continue
                        reply = ask(server, entry, mode, args)
                        score(reply, by_id[(category, entry.id)])
                        replies.append(reply)
                    done = [r for r in replies if (r.server, r.mode, r.category) == (name, mode, category)]
                    print(f"{name:16} {mode:8} {category:13} correct {sum(r.verdict.get('valid', False) for r in done)}"
                          f"/{len(done)}  structured {sum(bool(r.message.get('tool_calls')) for r in done)}"
                          f"  in text {sum(bool(r.text_calls) for r in done)}"
                          f"  http err {sum(r.status != 200 for r in done)}"
                          f"  {sum(r.seconds for r in done):.0f} s", flush=True)
            finally:
                server.stop()
        print(f"{name}: {time.monotonic() - t_server:.0f} s", flush=True)
    minutes = (time.monotonic() - start) / 60
    meta = {"model": args.model, "model_file": str(model), "limit": args.limit, "threads": args.threads,
            "max_tokens": args.max_tokens, "modes": modes, "servers": servers, "categories": categories,
            "seed": args.seed, "ctx_size": args.ctx_size, "chat_format_llama_cpp_python": args.chat_format,
            "bfcl_version": data.BFCL_VERSION, "minutes": minutes, "skipped_for_budget": skipped,
            "ids": {c: [e.id for e in es] for c, es in entries.items()}, "loadavg": os.getloadavg()}
    summary = summarize(replies)
    table = markdown(summary, replies, meta)
    if skipped:
        table += f"\n{skipped} requests were not sent: --budget-minutes {args.budget_minutes} ran out.\n"
    print("\n" + table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary,
                                         "replies": [r.__dict__ for r in replies]}, indent=1, default=str),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
