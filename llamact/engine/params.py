"""The values users pass: how to load a model (ModelParams) and how to generate (GenerationParams)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .._build import build_info
from ..chat.media import RENDER_MARKER
from ..errors import LlamaArgumentException, LlamaModelException, LlamaRequestException
from ..grammar.engines.choice import check_engine_name
from ..native.context import ContextOptions
from ..native.model import ModelLoadOptions
from ..native.mtmd import ProjectorOptions
from .speculative.params import SpeculativeParams


@dataclass(frozen=True)
class ModelParams:
    """How a model is loaded and its context sized. ``LlamaEngine.load(path, ModelParams(...))``, or
    the same fields as keywords: ``LlamaEngine.load(path, n_ctx=2048)``.

    Attributes:
        n_ctx: the context size in tokens; 0 takes the model's training context.
        n_batch: the most prompt tokens one decode call takes (llama.cpp's ``-b``).
        n_ubatch: the physical batch size inside a decode (``-ub``).
        n_threads: CPU threads for generation; None: the cores, at most 4.
        n_threads_batch: CPU threads for prompt evaluation; None: as ``n_threads``.
        adaptive_threads: decode one-token steps with fewer threads while other work holds the cores
            (llama.cpp's spinning barriers collapse on shared cores); False keeps exactly ``n_threads``.
        n_gpu_layers: layers to offload to the GPU; -1: all of them (no effect on a CPU build).
        main_gpu: with ``split_mode="none"``, the device used (an index into the devices used).
        split_mode: "layer" spreads whole layers over the devices, "row" splits tensors across them,
            "none" uses ``main_gpu`` alone.
        tensor_split: each device's share of the model, e.g. ``[3, 1]``.
        devices: the devices to offload to, by name (``llamact.devices()``); None: every GPU; ``[]``: none.
        rpc_servers: ``"host:port"`` of ggml RPC servers (``llamact rpc-server``), added ahead of the
            local devices; each is probed first.
        use_mmap: map the weights from the file instead of reading them into memory.
        flash_attn: flash attention on or off; None lets llama.cpp decide.
        type_k: the KV cache's K element type ("f16" by default; "q8_0", "q4_0", ... save memory).
        type_v: the KV cache's V element type; a quantized V cache needs flash attention.
        chat_template: Jinja source replacing the model's chat template for every request (None
            keeps the model's; a request's ``custom_template`` wins over it).
        n_seq_max: sequences the context holds at once (the server's slots); each gets
            ``n_ctx / n_seq_max`` positions.
        loras: LoRA adapters applied from the start: ``(path of an adapter GGUF, scale)`` pairs.
        mmproj: the model's multimodal projector GGUF, for images and audio (llama-server's ``--mmproj``).
        mmproj_offload: run the projector's encoder on the GPU (False: on the CPU).
        image_min_tokens: the least tokens a dynamic-resolution projector gives an image; -1: its own.
        image_max_tokens: the most tokens a dynamic-resolution projector gives an image; -1: its own.
        media_path: the folder ``file://`` URLs in a request may be read from; None refuses them.
        media_fetch: download ``http(s)://`` URLs in a request (at most 10 MB in 10 s); False refuses them.
        media_max_pixels: the largest image, in pixels, read from its header before decoding.
        media_max_audio_seconds: the longest audio accepted.
        speculative: speculative decoding (``SpeculativeParams``); None: off.

    Raises:
        LlamaModelException: from ``LlamaEngine.load``, for a value llama.cpp's loader refuses.
        LlamaContextException: from ``LlamaEngine.load``, for a context size, thread count or KV type
            llama.cpp refuses.
    """

    n_ctx: int = 4096
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int | None = None
    n_threads_batch: int | None = None
    # one-token decodes use fewer threads while other work holds the cores (ggml's spinning barriers
    # collapse on shared cores: llamact/native/thread_governor.py); False keeps exactly n_threads
    adaptive_threads: bool = True
    n_gpu_layers: int = -1
    main_gpu: int = 0
    split_mode: str = "layer"
    tensor_split: Sequence[float] | None = None
    devices: Sequence[str] | None = None
    rpc_servers: Sequence[str] = ()
    use_mmap: bool = True
    flash_attn: bool | None = None
    type_k: str | None = None
    type_v: str | None = None
    chat_template: str | None = None
    # sequences the context holds at once (``BatchScheduler``'s slots); each gets n_ctx / n_seq_max positions
    n_seq_max: int = 1
    # LoRA adapters applied from the start: (path of an adapter GGUF made for this model, scale)
    loras: Sequence[tuple[str | os.PathLike[str], float]] = ()
    # images and audio (llama-server's --mmproj ...): the model's multimodal projector GGUF, and where
    # its encoder runs (False: on the CPU, --no-mmproj-offload); the image token budget of dynamic-
    # resolution projectors (-1: the projector's own, --image-min-tokens / --image-max-tokens)
    mmproj: str | os.PathLike[str] | None = None
    mmproj_offload: bool = True
    image_min_tokens: int = -1
    image_max_tokens: int = -1
    # where a request's media may come from besides data: URLs and base64 (engine.media.MediaPolicy):
    # file:// URLs under media_path (None: refused, as llama-server without --media-path), http(s)://
    # URLs only with media_fetch (bounded in size and time); and how large a medium may decode
    media_path: str | os.PathLike[str] | None = None
    media_fetch: bool = False
    media_max_pixels: int = 50_000_000
    media_max_audio_seconds: float = 600.0
    # speculative decoding (llama-server's --spec-*): draft sources, a draft model; None: off
    speculative: SpeculativeParams | None = None

    def __post_init__(self) -> None:
        # Tuples, so a frozen ModelParams stays hashable and no caller's list changes under it;
        # a lone string is one device/server, not a sequence of characters.
        for name in ("tensor_split", "devices", "rpc_servers"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            elif value is not None and isinstance(value, Iterable):
                value = tuple(value)
            object.__setattr__(self, name, value)
        if not isinstance(self.loras, (str, bytes)) and isinstance(self.loras, Iterable):
            object.__setattr__(self, "loras", tuple(self.loras))

    # -- what llama.cpp is given: the one mapping of these fields onto its options ----------------

    def load_options(self) -> ModelLoadOptions:
        """How llama.cpp loads the weights (``llama_model_params``): placement and mapping."""
        return ModelLoadOptions(
            n_gpu_layers=self.n_gpu_layers, main_gpu=self.main_gpu, use_mmap=self.use_mmap,
            split_mode=self.split_mode, tensor_split=_tuple_or_none(self.tensor_split),
            devices=_tuple_or_none(self.devices), rpc_servers=tuple(self.rpc_servers))

    def context_options(self) -> ContextOptions:
        """The context llama.cpp makes for the model (``llama_context_params``); made before the model
        is loaded, so a bad KV type or size is refused before it takes time and memory."""
        return ContextOptions(
            n_ctx=self.n_ctx, n_batch=self.n_batch, n_ubatch=self.n_ubatch, n_threads=self.n_threads or 0,
            n_threads_batch=self.n_threads_batch or 0, adaptive_threads=self.adaptive_threads,
            flash_attn=self.flash_attn, type_k=self.type_k, type_v=self.type_v, n_seq_max=self.n_seq_max)

    def projector_options(self) -> ProjectorOptions:
        """How the multimodal projector (``mmproj``) runs, as llama-server runs its ``--mmproj``."""
        return ProjectorOptions(
            use_gpu=self.mmproj_offload and self.offloads, n_threads=self.threads, flash_attn=self.flash_attn,
            image_min_tokens=self.image_min_tokens, image_max_tokens=self.image_max_tokens,
            media_marker=RENDER_MARKER)

    @property
    def threads(self) -> int:
        """``n_threads``, or its default when None: the machine's cores, at most 4."""
        return self.n_threads or max(1, min(os.cpu_count() or 1, 4))

    @property
    def offloads(self) -> bool:
        """Whether the model's layers (and so its KV cache) may live off this machine's RAM. The RPC
        backend is compiled in by default: only a real GPU backend or an actual RPC server counts."""
        offload_backends = [b for b in build_info()["backends"] if b not in ("cpu", "rpc")]
        return self.n_gpu_layers != 0 and bool(offload_backends or self.rpc_servers)


def _tuple_or_none(value: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


# the sampler chain between the logit bias and the selecting sampler, in upstream's default order, by
# llama.cpp's names for its samplers (llama-server's /props "samplers")
SAMPLER_NAMES = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")


@dataclass(frozen=True)
class GenerationParams:
    """Sampling and stopping, with llama.cpp's defaults and its sampler order. Pass one as
    ``params=``, or its fields as keywords: ``create(messages, temperature=0, max_tokens=64)``.

    Attributes:
        max_tokens: the most tokens to generate; -1: until an end-of-generation token, a stop string,
            or a full context.
        temperature: sampling temperature; 0 or below is greedy.
        top_k: keep the k most likely tokens (0: all).
        top_p: keep the most likely tokens up to this cumulative probability (1.0: all).
        min_p: drop tokens below this fraction of the most likely one's probability.
        typical_p: locally typical sampling (1.0: off).
        top_n_sigma: keep tokens within n standard deviations of the top logit (-1: off).
        xtc_probability: the chance that XTC removes the top choices (0: off).
        xtc_threshold: XTC's probability threshold.
        dynatemp_range: dynamic temperature's range around ``temperature`` (0: off).
        dynatemp_exponent: dynamic temperature's exponent.
        repeat_penalty: penalty for tokens among the last ``repeat_last_n`` (1.0: off).
        repeat_last_n: how many recent tokens the penalties look at (-1: the whole context).
        frequency_penalty: penalty growing with how often a token appeared (0: off).
        presence_penalty: penalty for a token that appeared at all (0: off).
        dry_multiplier: DRY's strength against repeated sequences (0: off).
        dry_base: DRY's base.
        dry_allowed_length: repeats up to this length are not penalised by DRY.
        dry_penalty_last_n: how many recent tokens DRY looks at (-1: the whole context).
        mirostat: 0 off, 1 Mirostat, 2 Mirostat 2.0 (replaces the other samplers).
        mirostat_tau: Mirostat's target entropy.
        mirostat_eta: Mirostat's learning rate.
        min_keep: the fewest tokens each sampler keeps.
        seed: the sampling seed; None: random.
        greedy: always take the most likely token.
        logit_bias: token id to a bias added to its logit (``-inf`` bans it).
        dry_sequence_breakers: strings that end a sequence for DRY.
        samplers: the samplers between the logit bias and the selecting one, in order, by llama.cpp's
            names (one left out is not run).
        grammar: a GBNF grammar the text must follow.
        stop: a stop string, or a list of them; the text stops before it.
        render_special: write special tokens into the text.
        cache_prompt: reuse the KV cache for the prompt's prefix in common with what the context
            holds (llama-server's); False evaluates the whole prompt.
        logprobs: record each generated token's log-probability (from the raw logits, before the
            sampler chain, as llama-server).
        top_logprobs: how many most likely alternatives each logprob entry lists.
        logits_processors: functions ``f(token_ids, logits)`` run in order on each token's logits row
            before sampling (in place, or returning a new row).
        speculative: False: no speculative decoding for this request, though the engine has it; it
            never changes what is sampled.

    Raises:
        LlamaRequestException: a stop or sequence-breaker value that is not text.
    """

    max_tokens: int = 256
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    top_n_sigma: float = -1.0
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64   # common_params_sampling's (and llama-server's); -1: the whole context
    mirostat: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    min_keep: int = 0
    seed: int | None = None
    greedy: bool = False
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    # DRY's sequence breakers (llama.cpp's default), and the order of the samplers between the logit
    # bias and the selecting one, by llama.cpp's names (sampling.SAMPLER_NAMES; one left out is not run)
    dry_sequence_breakers: Sequence[str] = ("\n", ":", '"', "*")
    samplers: Sequence[str] = SAMPLER_NAMES
    grammar: str | None = None
    # which engine runs the grammar (any grammar: this one, a template's tool-call grammar, a
    # response_format schema's): "llama" (llama.cpp's), "llguidance", or "auto" (llguidance for the
    # grammar classes proven equal to llama.cpp's engine; see llamact.grammar.engines)
    grammar_engine: str = "auto"
    stop: str | Sequence[str] = ()
    render_special: bool = False
    cache_prompt: bool = True
    # OpenAI's logprobs: each generated token's logprob and the ``top_logprobs`` most likely
    # alternatives, from the softmax of the raw logits (before the sampler chain), as llama-server
    logprobs: bool = False
    top_logprobs: int = 0
    # f(token_ids, logits) -> logits or None, run in order before the sampler chain on each
    # token's logits row (in place on native memory; see generator.LogitsProcessor)
    logits_processors: Sequence[Callable[[Any, Any], Any]] = ()
    # False: no speculative decoding for this request, though the engine has it (ModelParams.speculative);
    # it never changes what is sampled, only how many tokens one decode verifies
    speculative: bool = True

    def __post_init__(self) -> None:
        # OpenAI's `stop` is one string or a list of them; iterating a string would stop on each
        # of its characters. Stored as a tuple of strings either way.
        object.__setattr__(self, "stop", _stop_sequences(self.stop))
        check_engine_name(self.grammar_engine)
        for name in ("dry_sequence_breakers", "samplers"):
            value = getattr(self, name)
            items = tuple(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) else None
            if items is None or not all(isinstance(item, str) for item in items):
                raise LlamaArgumentException(f"{name} must be a sequence of strings, got {value!r}",
                                             {name: repr(value)})
            object.__setattr__(self, name, items)


def _stop_sequences(stop: object) -> tuple[str, ...]:
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, (bytes, bytearray)) or not isinstance(stop, Iterable):
        raise LlamaArgumentException(
            f"stop must be a string or a sequence of strings, got {type(stop).__name__}", {"stop": repr(stop)}
        )
    stops = tuple(stop)
    for item in stops:
        if not isinstance(item, str):
            raise LlamaArgumentException(
                f"each stop sequence must be a string, got {item!r} ({type(item).__name__})", {"stop": repr(stops)}
            )
    return stops


GENERATION_FIELDS = frozenset(f.name for f in fields(GenerationParams))
# what a chat request says itself (ChatRequest's fields): in create() these keywords are the request's
CHAT_REQUEST_OWNED = frozenset({"logprobs", "top_logprobs", "grammar"})


def split_sampling_keywords(options: Mapping[str, Any], owned: frozenset[str] = frozenset()) -> tuple[
        dict[str, Any], dict[str, Any]]:
    """``options`` as (GenerationParams keywords, the others); a name in ``owned`` stays with the others."""
    sampling = {k: v for k, v in options.items() if k in GENERATION_FIELDS and k not in owned}
    return sampling, {k: v for k, v in options.items() if k not in sampling}


def with_sampling_keywords(params: GenerationParams | None, keywords: Mapping[str, Any]) -> GenerationParams:
    """``params`` (None: the defaults) with ``keywords`` set: ``create(m, temperature=0)`` is a shortcut
    for ``create(m, params=GenerationParams(temperature=0))``, and a keyword wins over the same field
    of ``params``. The one place sampling keywords become settings; a name that is not a field is
    refused with the nearest one."""
    base = params or GenerationParams()
    if not keywords:
        return base
    unknown = [name for name in keywords if name not in GENERATION_FIELDS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(GENERATION_FIELDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise LlamaRequestException(f"{unknown[0]!r} is not a GenerationParams field{hint}", {"option": unknown[0]})
    return replace(base, **keywords)


MODEL_FIELDS = frozenset(f.name for f in fields(ModelParams))


def with_model_keywords(params: ModelParams | None, keywords: Mapping[str, Any]) -> ModelParams:
    """``params`` (None: the defaults) with ``keywords`` set: ``LlamaEngine.load(path, n_ctx=2048)``
    is a shortcut for ``load(path, ModelParams(n_ctx=2048))``; a keyword wins over the same field of
    ``params``, and a name that is not a field is refused with the nearest one."""
    base = params or ModelParams()
    if not keywords:
        return base
    unknown = [name for name in keywords if name not in MODEL_FIELDS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(MODEL_FIELDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise LlamaModelException(f"{unknown[0]!r} is not a ModelParams field{hint}", {"option": unknown[0]})
    return replace(base, **keywords)


def with_logprobs(params: GenerationParams, logprobs: bool | None, top_logprobs: int | None) -> GenerationParams:
    """``params`` with OpenAI's ``logprobs`` / ``top_logprobs`` set where given (None: left as they are)."""
    changes: dict[str, Any] = {}
    if logprobs is not None:
        changes["logprobs"] = bool(logprobs)
    if top_logprobs is not None:
        changes["top_logprobs"] = top_logprobs
    return replace(params, **changes) if changes else params
