"""``LitertEngine``: a LiteRT-LM ``.litertlm`` bundle as a ``ChatBackend`` (``llamact[litert]``).

    engine = LlamaEngine.load("model.litertlm")      # the loader picks this class by the file's suffix
    engine.create(messages, tools=..., response_format=...)     ChatChunk stream, as for a GGUF model
    engine.chat_template(messages) / complete_chat / create_structured / ChatSession(engine) / cancel()

A sibling of ``LlamaEngine`` (``backend.py``), not a subclass: it has the chat calls, the tokens and
the model's facts (what the server and the session read), and shares their code with
``LlamaEngine`` through ``chat_calls``, ``streams`` and ``ChatStream``. ``isinstance(engine,
LlamaEngine)`` is False for it.

What enters: a bundle's path and ``ModelParams`` (``n_ctx`` is the runtime's token budget, at most
what the bundle was exported for; ``n_threads``; ``chat_template``), then the same requests and
``GenerationParams`` as ``LlamaEngine``. What leaves: the same ``ChatStream`` / ``ChatCompletion``
/ ``ChatTemplateResult`` values: llamact's template results and its parser over the runtime's text.

How a chat request runs (the specification's LiteRT-LM behaviour): llamact renders it (the prompt,
the format, the parser) with the model's template (``backends.litert.choose_template``); an
eligible request then goes through the runtime's Conversation API -- the history as a preface,
tools declared, template variables as extra context, ``enable_thinking`` as its thinking switch, a
JSON-schema ``response_format`` as the runtime's constrained decoding -- and one it cannot express
is generated from llamact's prompt (``stream.generation.path`` says which). Either way llamact's
``ChatStreamParser`` reads the streamed text. Once per model, at the first conversation, the
runtime's rendering of the template is probed and a template written for string content gets the
content-as-parts adapter (``backends.litert.content_shape``); one it cannot adapt logs one warning.
``template_now`` does not reach a template the runtime renders (it keeps its own clock).

Raises what ``LlamaEngine`` raises for the same input, plus ``LlamaUnsupportedException`` for what
the runtime cannot do (see ``backends.litert``). What only llama.cpp has (embeddings, LoRA, KV-cache
state and slot files, logits) is declared here by ``LlamaEngine``'s names as ``LlamaCppOnly``: reading
one raises ``LlamaUnsupportedException`` naming it, and mypy types it as never returning, so code that
takes either engine (the server's routes) type-checks and answers a typed refusal.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn, overload

from ..backends import litert
from ..chat.pipeline import apply_request
from ..chat.request import ChatRequest, as_chat_request, chat_template_request
from ..chat.result import ChatTemplateResult
from ..chat.streaming import ChatStreamParser
from ..chat.templates import ORIGIN_PER_CALL, ChatTemplates, load_chat_templates
from ..errors import (
    LlamaContextException,
    LlamaException,
    LlamaInferenceException,
    LlamaModelException,
    LlamaStateException,
    LlamaTokenLimitException,
    LlamaUnsupportedException,
)
from . import chat_calls
from .chat_calls import chat_keywords
from .chat_completion import ChatStream
from .chat_types import ChatCompletion
from .generator import GenerationResult
from .litert_generation import RuntimeGeneration
from .params import GenerationParams, ModelParams, with_logprobs, with_model_keywords, with_sampling_keywords
from .streams import collect

__all__ = ["LitertEngine", "LlamaCppOnly"]

log = logging.getLogger("llamact.litert")

_GENERATION_DEFAULTS = {f.name: getattr(GenerationParams(), f.name) for f in fields(GenerationParams)}
# ModelParams fields that change what a model computes, which the runtime cannot honour
_MODEL_REFUSED = {"loras": ("LoRA adapters", ()), "rpc_servers": ("RPC servers", ()),
                  "n_seq_max": ("parallel sequences (llamact serve --parallel: one slot)", 1),
                  "speculative": ("speculative decoding (--spec-*)", None)}


class LlamaCppOnly:
    """A ``LlamaEngine`` name for what only llama.cpp has: read on a ``LitertEngine``, it raises
    ``LlamaUnsupportedException`` naming it (typed as never returning)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, engine: None, owner: type | None = None) -> LlamaCppOnly: ...

    @overload
    def __get__(self, engine: object, owner: type | None = None) -> NoReturn: ...

    def __get__(self, engine: object, owner: type | None = None) -> LlamaCppOnly:
        if engine is None:
            return self
        _unsupported(self.name)


class LitertEngine:
    """A ``.litertlm`` model (see the module docstring). One generation at a time, as ``LlamaEngine``."""

    speculator = None     # no speculative decoding (refused at load)

    def __init__(self, runtime: litert.RuntimeEngine, bundle: litert.BundleInfo, params: ModelParams) -> None:
        self.params = params
        self.bundle = bundle
        self._runtime = runtime
        self._busy = threading.Lock()
        self._state = threading.Lock()
        self._closed = False
        self._active: RuntimeGeneration | None = None
        self._choice = litert.choose_template(bundle, params.chat_template)
        self._default: ChatTemplates | None = None
        self._runtime_template: str | None = None   # the choice's runtime source, adapted once probed
        self._probed = False
        self.content_shape: litert.ContentShape | None = None   # the template's, once probed

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, params: ModelParams | None = None,
             progress: Any = None, *, model_path: str | os.PathLike[str] | None = None,
             **model_options: Any) -> LitertEngine:
        """Read and check the bundle, then load it into the runtime (CPU)."""
        if (path is None) == (model_path is None):
            raise LlamaModelException("LlamaEngine.load: give the model's path (path or model_path=), once")
        target = Path(path if path is not None else model_path)  # type: ignore[arg-type]
        params = with_model_keywords(params, model_options)
        for name, (what, default) in _MODEL_REFUSED.items():
            if getattr(params, name) != default:
                raise LlamaUnsupportedException(f"the LiteRT-LM runtime has no {what}: leave ModelParams.{name} at "
                                                f"{default!r} for a .litertlm model", {"field": name})
        if not target.is_file():
            raise LlamaModelException(f"no model file at {target}", {"path": str(target)})
        bundle = litert.read_bundle(target)
        limit = bundle.max_num_tokens or params.n_ctx or 4096
        n_ctx = min(params.n_ctx, limit) if params.n_ctx > 0 else limit
        runtime = litert.RuntimeEngine.open(target, threads=params.threads, max_num_tokens=n_ctx)
        if progress is not None:
            progress(1.0)
        return cls(runtime, bundle, params)

    # what only llama.cpp has, by LlamaEngine's names (tests/backends/litert: every public name of
    # LlamaEngine is either one of these or answered here)
    embed = LlamaCppOnly()                  # embeddings
    embed_tokens = LlamaCppOnly()
    embedding_pooling = LlamaCppOnly()
    rerank_tokens = LlamaCppOnly()
    n_embd = LlamaCppOnly()
    set_lora = LlamaCppOnly()               # LoRA adapters
    remove_lora = LlamaCppOnly()
    clear_loras = LlamaCppOnly()
    save_state = LlamaCppOnly()             # KV-cache and slot files
    load_state = LlamaCppOnly()
    save_slot = LlamaCppOnly()
    restore_slot = LlamaCppOnly()
    logits = LlamaCppOnly()                 # llama.cpp's logits and its sampler
    prepare_chat = LlamaCppOnly()

    # -- lifecycle and what callers read ------------------------------------------------------

    def __enter__(self) -> LitertEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Free the runtime; a generation in progress is cancelled first and the runtime is freed when
        its stream is released (never under it)."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            active = self._active
        if active is not None:
            active.interrupt()
        if self._busy.acquire(blocking=False):
            try:
                self._runtime.close()
            finally:
                self._busy.release()

    def cancel(self) -> None:
        """Stop the generation in progress, from any thread (``StopReason.CANCELLED``)."""
        active = self._active
        if active is not None:
            active.interrupt()

    def _check_open(self) -> None:
        if self._closed:
            raise LlamaStateException("this engine is closed")

    @property
    def model_path(self) -> Path:
        return self.bundle.path

    @property
    def model_name(self) -> str:
        return self.bundle.path.name

    @property
    def model_ftype(self) -> str:
        return "litertlm"

    @property
    def n_ctx(self) -> int:
        return int(self._runtime.max_num_tokens)

    @property
    def n_ctx_seq(self) -> int:
        return self.n_ctx

    @property
    def n_batch(self) -> int:
        return self.params.n_batch

    @property
    def n_seq_max(self) -> int:
        return 1

    @property
    def n_threads(self) -> int:
        """The threads the runtime was given (``ModelParams.threads``)."""
        return self.params.threads

    @property
    def n_vocab(self) -> int:
        return litert.vocab_size(self.bundle) or 0

    @property
    def context_tokens(self) -> tuple[int, ...]:
        return ()   # the runtime keeps no prompt cache between requests

    def clear_cache(self) -> int:
        return 0    # (nothing to clear: see context_tokens)

    @property
    def loras(self) -> dict[Path, float]:
        return {}   # the runtime takes no adapters (refused at load)

    @property
    def supports_vision(self) -> bool:
        return False

    @property
    def supports_audio(self) -> bool:
        return False

    @property
    def eog_tokens(self) -> tuple[int, ...]:
        return tuple(s[0] for s in self._runtime.stop_tokens if len(s) == 1)

    @property
    def bos_token_id(self) -> int | None:
        return self._runtime.start_token

    @property
    def bos_id(self) -> int | None:
        return self._runtime.start_token

    @property
    def eos_token_id(self) -> int | None:
        single = self.eog_tokens
        return single[0] if single else None

    @property
    def bos_token(self) -> str:
        return self._token_text(self.bos_token_id)

    @property
    def eos_token(self) -> str:
        return self._token_text(self.eos_token_id)

    def _token_text(self, token: int | None) -> str:
        return "" if token is None else self._runtime.detokenize([token])

    def fim_token(self, kind: str) -> int | None:
        return None

    @overload
    def get_metadata(self) -> dict[str, str]: ...
    @overload
    def get_metadata(self, key: str, default: str | None = None) -> str | None: ...

    def get_metadata(self, key: str | None = None, default: str | None = None) -> dict[str, str] | str | None:
        """The bundle's system metadata and what its LLM metadata says, as text; ``tokenizer.chat_template``
        is the template llamact renders with unless ``ModelParams.chat_template`` replaced it (then the
        bundle's own, as a GGUF's metadata keeps its own). With ``key``, that key's value (or ``default``)."""
        b = self.bundle
        out = {str(k): str(v) for k, v in b.system_metadata.items()}
        out.update({"general.architecture": "litert-lm", "litert.file_version": ".".join(map(str, b.version)),
                    "litert.model_type": b.model_type or "", "litert.max_num_tokens": str(b.max_num_tokens),
                    "litert.min_runtime_version": b.min_runtime_version or "",
                    "litert.runtime_version": litert.runtime_version() or ""})
        own = b.template if self.params.chat_template is not None else self._choice.source
        if own:
            out["tokenizer.chat_template"] = own
        return out if key is None else out.get(key, default)

    # -- tokens ----------------------------------------------------------------------------------

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = True,
                 limit: int | None = None) -> list[int]:
        """Text -> ids with the bundle's tokenizer; ``add_special`` puts the start token first (the
        runtime adds it to every prompt). The runtime always reads special-token text as the token."""
        self._check_open()
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        ids = self._runtime.tokenize(text)
        if add_special and self._runtime.start_token is not None:
            ids = [self._runtime.start_token, *ids]
        if limit is not None and len(ids) > limit:
            raise LlamaTokenLimitException(f"the text has {len(ids)} tokens, more than {limit}",
                                           {"at_least": len(ids), "exact": True, "limit": limit})
        return ids

    def detokenize(self, tokens: Sequence[int], render_special: bool = True) -> str:
        self._check_open()
        return self._runtime.detokenize(tokens)

    def token_piece(self, token: int, special: bool = True) -> bytes:
        return self.detokenize([token]).encode("utf-8")

    def prompt_tokens(self, text: str | bytes) -> list[int]:
        """A prompt's ids (the start token first); one longer than the context raises
        ``LlamaContextException``."""
        try:
            return self.tokenize(text, add_special=True, parse_special=True, limit=self.n_ctx)
        except LlamaTokenLimitException as exc:
            n = exc.details["at_least"]
            raise LlamaContextException(f"the prompt ({n} tokens) does not fit the context ({self.n_ctx} tokens); "
                                        "use a shorter prompt", {"n_prompt": n, "n_ctx": self.n_ctx}) from None

    # -- templates -------------------------------------------------------------------------------

    def templates(self, custom_template: str | None = None) -> ChatTemplates:
        """The template set llamact renders with: ``custom_template`` when given, else the model's
        (``backends.litert.choose_template``), with empty BOS / EOS texts as the runtime renders them."""
        self._check_open()
        if custom_template:
            return load_chat_templates(custom_template, origin=ORIGIN_PER_CALL)
        if self._default is None:
            self._default = load_chat_templates(self._choice.render_source, origin=self._choice.origin)
        return self._default

    def chat_template(self, messages: Any, **options: Any) -> ChatTemplateResult:
        request = chat_template_request(messages, options)
        return apply_request(self.templates(request.custom_template), request)

    def runtime_template(self) -> str | None:
        """The template the runtime's conversation renders with: the model's, adapted for content
        parts where it needs it (probed on first use); None when the runtime keeps the bundle's affixes."""
        with self._state:
            if not self._probed:
                self._probed = True
                self._runtime_template = self._adapt(self._choice.runtime_source)
        return self._runtime_template

    def runtime_render(self, messages: Any, **options: Any) -> str:
        """What the runtime's own template engine renders for a request's conversation path (its
        ``render_message_to_string``: the history, the last message, the generation prompt), "" when
        the runtime's render fails. ``chat_template()`` is llamact's rendering; for a request the
        conversation takes, the two are equal (tested), which this shows."""
        request = as_chat_request(messages, options)
        call, reason = litert.conversation_call(request, has_template=self.runtime_template() is not None,
                                                runtime_parses_tools=False)
        if call is None:
            raise LlamaUnsupportedException(f"this request does not take the runtime's conversation ({reason})",
                                            {"reason": reason})
        return self._runtime.render(self.runtime_template(), [*call.preface, call.message], call.extra_context,
                                    tools=call.tools)

    def _adapt(self, source: str | None) -> str | None:
        if source is None:
            return None

        def render(template: str, probe: str) -> str:
            return self._runtime.render(template, [{"role": "user", "content": probe}], quiet=True)

        shape = litert.classify(render, source)
        self.content_shape = shape
        if shape is not litert.ContentShape.UNADAPTABLE:
            return litert.adapted(source) if shape.needs_prelude else source
        if self._renders_probe():
            # the runtime's engine cannot run it ({% continue %}, a Python method), llamact's can
            log.warning("LiteRT-LM %s's template engine cannot render the chat template from %s; llamact renders "
                        "its requests (they do not use the runtime's conversation path)", litert.runtime_version(),
                        self._choice.origin)
            return None
        log.warning("the chat template from %s cannot be adapted to LiteRT-LM %s's content parts: requests that "
                    "fail name it; set ModelParams.chat_template to a template that reads content as a list of "
                    "{'type': 'text', 'text': ...} parts", self._choice.origin, litert.runtime_version())
        return source

    def _renders_probe(self) -> bool:
        """Whether llamact's rendering of the model's template shows a message's text."""
        try:
            prompt = self.chat_template([{"role": "user", "content": litert.PROBE}]).prompt
        except LlamaException:
            return False
        return litert.PROBE in prompt

    # -- generation --------------------------------------------------------------------------------

    def create(self, messages: Any, *, params: GenerationParams | None = None, **options: Any) -> ChatStream:
        """``LlamaEngine.create`` on the runtime (see the module docstring)."""
        params, options = chat_keywords(params, options)
        params = params or GenerationParams()
        request = as_chat_request(messages, options)
        self._check_open()
        litert.refuse_unsupported(request)
        sampling = litert.runtime_sampling(_values(params), _GENERATION_DEFAULTS)
        result = self.chat_template(request)
        parser = ChatStreamParser(result, tools=request.inputs.tools, upstream_compat=request.upstream_compat,
                                  is_continuation=request.is_continuation, tool_choice=request.inputs.tool_choice,
                                  named_tool=request.named_tool)
        n_prompt = len(self.tokenize(result.prompt))
        if n_prompt >= self.n_ctx:
            raise LlamaContextException(f"the prompt ({n_prompt} tokens) does not fit the context ({self.n_ctx} "
                                        "tokens); use a shorter conversation (ChatSession trims one)",
                                        {"n_prompt": n_prompt, "n_ctx": self.n_ctx})
        template = self.runtime_template() if request.custom_template is None else None
        call, reason = litert.conversation_call(request, has_template=template is not None,
                                                runtime_parses_tools=self.bundle.model_type not in (None, "generic"))
        stops = (*sampling.stop, *result.additional_stops)
        if call is not None:
            generation = self._converse(call, template, sampling, stops, n_prompt)
        else:
            if request.thinking_budget_tokens not in (None, -1):
                raise LlamaUnsupportedException(f"thinking_budget_tokens needs the runtime's conversation path, which "
                                                f"this request cannot take ({reason})", {"reason": reason})
            generation = self._generate_text(result.prompt, sampling, stops, n_prompt, "rendered")
        generation.reason = reason
        return ChatStream(generation, result, parser, n_prompt, 0, model=self.model_name)

    def _converse(self, call: litert.ConversationCall, template: str | None, sampling: litert.RuntimeSampling,
                  stops: Sequence[str], n_prompt: int) -> RuntimeGeneration:
        def start() -> tuple[litert.RuntimeStream, Callable[[], int | None]]:
            conversation = self._runtime.conversation(
                template=template, messages=call.preface, tools=call.tools, extra_context=call.extra_context,
                sampler=sampling.sampler, max_output_tokens=sampling.max_output_tokens,
                enable_thinking=call.enable_thinking, thinking_budget=call.thinking_budget,
                constrained=call.json_schema is not None)
            options: dict[str, Any] = {}
            lt = self._runtime.lt
            if call.json_schema is not None:
                options["response_format"] = lt.ResponseFormat.json(call.json_schema)
            if sampling.repetition is not None:
                options["repetition_penalty_config"] = lt.RepetitionPenaltyConfig(**sampling.repetition)
            if sampling.suppress:
                options["suppress_tokens_config"] = lt.SuppressTokensConfig(suppress_tokens=list(sampling.suppress))
            try:
                chunks = conversation.send_message_async(call.message, **options)
                pieces = litert.conversation_text(chunks, self.bundle.channels)
                first = next(pieces, None)   # a template or schema the runtime refuses fails here, before any text
            except (RuntimeError, ValueError) as exc:
                conversation.close()
                raise self._start_failed(exc, call.json_schema is not None) from exc
            except BaseException:
                conversation.close()
                raise
            stream = litert.RuntimeStream(_prepend(first, pieces), conversation.cancel_process, conversation.close)
            return stream, lambda: _token_count(conversation)

        return self._start(start, sampling, stops, n_prompt, "conversation")

    def _start_failed(self, exc: BaseException, constrained: bool) -> LlamaException:
        if constrained:
            return LlamaUnsupportedException(f"the LiteRT-LM runtime refused the response format's schema ({exc}): "
                                             "simplify the schema, or use a GGUF model", {"option": "response_format"})
        return LlamaInferenceException(
            f"the LiteRT-LM runtime failed to render the chat template from {self._choice.origin} ({exc}); "
            "set ModelParams.chat_template to a template that reads each message's content as a list of "
            "{'type': 'text', 'text': ...} parts", {"template": self._choice.origin})

    def _generate_text(self, prompt: str, sampling: litert.RuntimeSampling, stops: Sequence[str], n_prompt: int,
                       path: str) -> RuntimeGeneration:
        if sampling.repetition is not None or sampling.suppress:
            raise LlamaUnsupportedException("repetition penalties and token bans need the runtime's conversation "
                                            "path; a rendered prompt cannot take them", {"path": path})

        def start() -> tuple[litert.RuntimeStream, Callable[[], int | None]]:
            session = self._runtime.session(sampler=sampling.sampler, max_output_tokens=sampling.max_output_tokens)
            try:
                session.run_prefill([prompt])
                pieces = litert.session_text(session.run_decode_async())
            except RuntimeError as exc:
                session.close()
                raise LlamaInferenceException(f"the LiteRT-LM runtime failed on the prompt: {exc}") from exc
            return litert.RuntimeStream(pieces, session.cancel_process, session.close), lambda: None

        return self._start(start, sampling, stops, n_prompt, path)

    def _start(self, start: Callable[[], tuple[litert.RuntimeStream, Callable[[], int | None]]],
               sampling: litert.RuntimeSampling, stops: Sequence[str], n_prompt: int, path: str) -> RuntimeGeneration:
        if not self._busy.acquire(blocking=False):
            raise LlamaStateException("this engine is already generating; finish or close that stream first")
        started = time.perf_counter()
        try:
            self._check_open()
            stream, token_count = start() if sampling.max_output_tokens != 0 else (None, lambda: None)
        except BaseException:
            self._busy.release()
            raise

        def release() -> None:
            with self._state:
                self._active = None
                closing = self._closed
            if closing:
                self._runtime.close()
            self._busy.release()

        generation = RuntimeGeneration(stream, stops=stops, max_tokens=sampling.max_output_tokens, n_prompt=n_prompt,
                                       n_ctx=self.n_ctx, token_count=token_count, path=path, release=release,
                                       started=started)
        with self._state:
            self._active = generation
        return generation

    def generate(self, prompt: str | bytes | Sequence[int],
                 params: GenerationParams | None = None) -> RuntimeGeneration:
        """A raw completion of ``prompt`` (text, or ids turned back into text) through the runtime, no
        template applied."""
        params = params or GenerationParams()
        settings = litert.runtime_sampling(_values(params), _GENERATION_DEFAULTS)
        text = self._prompt_text(prompt)
        n_prompt = len(self.tokenize(text))
        return self._generate_text(text, settings, settings.stop, n_prompt, "prompt")

    def _prompt_text(self, prompt: str | bytes | Sequence[int]) -> str:
        if isinstance(prompt, (bytes, bytearray)):
            return bytes(prompt).decode("utf-8", errors="replace")
        if isinstance(prompt, str):
            return prompt
        ids = list(prompt)   # the runtime adds the start token itself
        return self.detokenize(ids[1:] if ids[:1] == [self._runtime.start_token] else ids)

    def complete(self, prompt: str | bytes | Sequence[int], params: GenerationParams | None = None, *,
                 logprobs: bool | None = None, top_logprobs: int | None = None,
                 **sampling: Any) -> GenerationResult:
        """``generate()`` run to its end (``LlamaEngine.complete``'s arguments)."""
        params = with_logprobs(with_sampling_keywords(params, sampling), logprobs, top_logprobs)
        tokens = self.prompt_tokens(bytes(prompt) if isinstance(prompt, bytearray) else prompt) \
            if isinstance(prompt, (str, bytes, bytearray)) else list(prompt)
        return collect(self.generate(tokens, params), tokens, params.logprobs)

    def complete_chat(self, messages: Any, *, params: GenerationParams | None = None,
                      **options: Any) -> ChatCompletion:
        """``create()`` run to its end (``LlamaEngine.complete_chat``)."""
        return chat_calls.complete_chat(self, messages, params, options)

    def create_structured(self, messages: Any, output: Any, *, params: GenerationParams | None = None,
                          **options: Any) -> Any:
        """The reply as an ``output`` value (``LlamaEngine.create_structured``)."""
        return chat_calls.create_structured(self, messages, output, params, options)

    def prompt_length(self, request: ChatRequest) -> int:
        """The request's rendered prompt, tokenized (what a session fits into the context)."""
        return len(self.tokenize(self.chat_template(request).prompt, add_special=True, parse_special=True))


def _unsupported(what: str) -> NoReturn:
    raise LlamaUnsupportedException(f"{what} needs llama.cpp: a .litertlm model runs on the LiteRT-LM runtime, which "
                                    "has no such thing; use a GGUF model for it", {"method": what})


def _values(params: GenerationParams) -> dict[str, Any]:
    return {f.name: getattr(params, f.name) for f in fields(GenerationParams)}


def _token_count(conversation: Any) -> int | None:
    try:
        return int(conversation.token_count)
    except (RuntimeError, ValueError):
        return None


def _prepend(first: str | None, rest: Any) -> Any:
    if first is not None:
        yield first
    yield from rest
