"""``Llama``: llama-cpp-python's high-level class on a ``LlamaEngine``.

The constructor takes llama-cpp-python's options (``options.py`` maps them, refusing what llamact
cannot honour), the methods its signatures, and the results are its plain dicts (``text.py``,
``chat.py``). ``llama.engine`` is the ``LlamaEngine`` underneath, for llamact's own API.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..engine import GenerationParams, LlamaEngine
from ..errors import LlamaUnsupportedException
from ..json_types import JsonObject
from . import chat, text
from .grammar import LlamaGrammar
from .options import DEFAULT_SEED, model_params, pooling_name, sampling
from .processors import LlamaState, LogitsProcessorList, StoppingCriteriaList

# llama-cpp-python's chat_format names llamact can honour: the ones that are a template llama-server
# has built in. The others are hand-written formatters; the model's own template replaces them.
_CHAT_FORMAT_TEMPLATES = {"chatml": "chatml"}
_verbose_handler: logging.Handler | None = None


class Llama:
    """llama-cpp-python's ``Llama`` on llamact: ``Llama(model_path, n_ctx=..., ...)``, then
    ``create_completion`` / ``__call__``, ``create_chat_completion``, ``create_embedding`` / ``embed``,
    ``tokenize`` / ``detokenize``, ``save_state`` / ``load_state``, ``reset``.

    Where llamact differs, on purpose: the chat prompt is the model's own template as llama-server
    renders it and tool calls are parsed into ``tool_calls`` (``chat_format`` is None, or "chatml");
    logprobs and embeddings work without ``logits_all`` / ``embedding=True``; an option llamact
    cannot honour raises ``LlamaUnsupportedException`` instead of being ignored. ``verbose=True``
    shows llama.cpp's warnings and errors on stderr (not its info chatter).
    """

    def __init__(
        self,
        model_path: str,
        *,
        n_gpu_layers: int = 0,
        split_mode: int = 1,
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        use_mmap: bool = True,
        seed: int = DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        pooling_type: int = -1,
        logits_all: bool = False,
        embedding: bool = False,
        flash_attn: bool = False,
        last_n_tokens_size: int = 64,
        lora_scale: float = 1.0,
        lora_path: str | None = None,
        chat_format: str | None = None,
        type_k: int | None = None,
        type_v: int | None = None,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        del logits_all, embedding   # llamact gives logprobs and embeddings either way
        self.verbose = verbose
        if verbose:
            _show_native_warnings()
        if chat_format is not None and chat_format not in _CHAT_FORMAT_TEMPLATES:
            raise LlamaUnsupportedException(
                f"chat_format={chat_format!r} is one of llama-cpp-python's hand-written formatters; llamact "
                "renders the model's own chat template as llama-server does: leave chat_format None, or pass "
                "chat_template=<Jinja source> (or \"chatml\")", {"option": "chat_format"})
        if chat_format is not None:
            kwargs.setdefault("chat_template", _CHAT_FORMAT_TEMPLATES[chat_format])
        params = model_params(
            n_gpu_layers=n_gpu_layers, split_mode=split_mode, main_gpu=main_gpu, tensor_split=tensor_split,
            use_mmap=use_mmap, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_threads=n_threads,
            n_threads_batch=n_threads_batch, flash_attn=flash_attn, type_k=type_k, type_v=type_v,
            lora_path=lora_path, lora_scale=lora_scale, extra=kwargs)
        self._pooling = pooling_name(pooling_type)
        self.model_path = str(model_path)
        self.chat_format = chat_format
        self.n_batch = n_batch
        self.last_n_tokens_size = last_n_tokens_size
        self._seed = seed
        self.engine = LlamaEngine.load(model_path, params)
        self.metadata: dict[str, str] = self.engine.get_metadata()

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: str, *, revision: str | None = None,
                        cache_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> Llama:
        """``filename`` of the Hugging Face Hub repository ``repo_id``, downloaded once into the hub
        cache (``llamact[hub]``), then ``Llama(path, **kwargs)``. The name is exact: llamact does
        not list the repository to match a glob."""
        if any(ch in filename for ch in "*?["):
            raise LlamaUnsupportedException(
                f"from_pretrained: {filename!r} is a pattern; give the file's exact name", {"filename": filename})
        from ..hub import hf_download

        path = hf_download(repo_id, filename, revision=revision, cache_dir=cache_dir)
        return cls(str(path), **kwargs)

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Llama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the model and its vocabulary ------------------------------------------------------------

    def n_ctx(self) -> int:
        return self.engine.n_ctx

    def n_embd(self) -> int:
        return self.engine.n_embd

    def n_vocab(self) -> int:
        return self.engine.n_vocab

    def token_bos(self) -> int:
        bos = self.engine.bos_token_id
        return -1 if bos is None else bos

    def token_eos(self) -> int:
        eos = self.engine.eos_token_id
        return -1 if eos is None else eos

    def token_nl(self) -> int:
        return self.engine.tokenize("\n", add_special=False, parse_special=False)[0]

    def pooling_type(self) -> str:
        return self.engine.embedding_pooling(self._pooling)

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        """``text`` (UTF-8 bytes, as llama-cpp-python takes it) as token ids; ``add_bos`` adds the
        vocabulary's special tokens, ``special`` reads special-token text as those tokens."""
        return self.engine.tokenize(text, add_special=add_bos, parse_special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None,
                   special: bool = False) -> bytes:
        """The tokens' pieces joined, as bytes (a leading BOS's space dropped, as llama-cpp-python)."""
        del prev_tokens   # llama-cpp-python takes and ignores it too
        out = b"".join(self.engine.token_piece(int(t), special=special) for t in tokens)
        if tokens and tokens[0] == self.token_bos() and out.startswith(b" "):
            out = out[1:]
        return out

    # -- state -----------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the evaluated tokens: the next call evaluates its whole prompt."""
        self.engine.clear_cache()

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def save_state(self) -> LlamaState:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "state"
            self.engine.save_state(path)
            tokens = self.engine.context_tokens
            return LlamaState(path.read_bytes(), tokens, len(tokens))

    def load_state(self, state: LlamaState) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "state"
            path.write_bytes(state.llama_state)
            self.engine.load_state(path)

    # -- embeddings ------------------------------------------------------------------------------

    def embed(self, input: str | list[str], normalize: bool = False, truncate: bool = True,
              return_count: bool = False) -> Any:
        """A list of floats per text (pooled), or a list of per-token lists when the model (or
        ``pooling_type``) pools none, as llama-cpp-python; tokenized as it does (BOS, no special
        tokens), truncated to ``n_batch`` tokens unless ``truncate`` is False."""
        texts = [input] if isinstance(input, str) else list(input)
        tokens = [self.tokenize(t.encode("utf-8")) for t in texts]
        if truncate:
            tokens = [t[: self.n_batch] for t in tokens]
        if self.pooling_type() == "none":
            rows: list[Any] = [m.tolist() for m in self.engine.embed_tokens(tokens, normalize=normalize)]
        else:
            rows = [r.tolist() for r in self.engine.embed(tokens, normalize=normalize, pooling=self._pooling)]
        output = rows[0] if isinstance(input, str) else rows
        return (output, sum(len(t) for t in tokens)) if return_count else output

    def create_embedding(self, input: str | list[str], model: str | None = None) -> JsonObject:
        rows, n_tokens = self.embed(input, return_count=True)
        if isinstance(input, str):
            rows = [rows]
        return {"object": "list", "data": [{"object": "embedding", "embedding": row, "index": i}
                                           for i, row in enumerate(rows)],
                "model": model if model is not None else self.model_path,
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}

    # -- completions -----------------------------------------------------------------------------

    def create_completion(
        self, prompt: str | list[int], suffix: str | None = None, max_tokens: int | None = 16,
        temperature: float = 0.8, top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
        logprobs: int | None = None, echo: bool = False, stop: str | list[str] | None = None,
        frequency_penalty: float = 0.0, presence_penalty: float = 0.0, repeat_penalty: float = 1.0,
        top_k: int = 40, stream: bool = False, seed: int | None = None, tfs_z: float = 1.0,
        mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1, model: str | None = None,
        stopping_criteria: StoppingCriteriaList | None = None, logits_processor: LogitsProcessorList | None = None,
        grammar: LlamaGrammar | None = None, logit_bias: dict[Any, float] | None = None,
    ) -> JsonObject | Iterator[JsonObject]:
        """A text completion of ``prompt`` (see ``llamact.compat.text``). ``suffix`` (fill in the
        middle) is refused: ``llamact serve`` has llama-server's ``/infill``."""
        if suffix is not None:
            raise LlamaUnsupportedException("suffix (fill in the middle) is not supported here; llamact serve "
                                            "answers llama-server's /infill", {"option": "suffix"})
        params = sampling(
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, typical_p=typical_p,
            repeat_penalty=repeat_penalty, presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
            mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, tfs_z=tfs_z,
            seed=self._call_seed(seed), max_tokens=max_tokens, stop=stop, logit_bias=logit_bias,
            repeat_last_n=self.last_n_tokens_size, logits_processors=tuple(logits_processor or ()))
        if grammar is not None:
            params = _with_grammar(params, grammar)
        call = text.TextCall(prompt, params, model if model is not None else self.model_path, echo, logprobs,
                             stopping_criteria)
        return text.completion(self.engine, call, stream)

    def __call__(self, prompt: str | list[int], *args: Any, **kwargs: Any) -> JsonObject | Iterator[JsonObject]:
        return self.create_completion(prompt, *args, **kwargs)

    def create_chat_completion(
        self, messages: list[JsonObject], functions: list[JsonObject] | None = None, function_call: Any = None,
        tools: list[JsonObject] | None = None, tool_choice: Any = None, temperature: float = 0.2, top_p: float = 0.95,
        top_k: int = 40, min_p: float = 0.05, typical_p: float = 1.0, stream: bool = False,
        stop: str | list[str] | None = None, seed: int | None = None, response_format: JsonObject | None = None,
        max_tokens: int | None = None, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0, tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1, model: str | None = None, logits_processor: LogitsProcessorList | None = None,
        grammar: LlamaGrammar | None = None, logit_bias: dict[Any, float] | None = None,
        logprobs: bool | None = None, top_logprobs: int | None = None,
    ) -> JsonObject | Iterator[JsonObject]:
        """The reply to ``messages`` (see ``llamact.compat.chat``: the model's own template, tool
        calls parsed, ``response_format`` with or without a schema, ``tool_choice`` "auto" /
        "required" / "none" / a named function)."""
        params = sampling(
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, typical_p=typical_p,
            repeat_penalty=repeat_penalty, presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
            mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, tfs_z=tfs_z,
            seed=self._call_seed(seed), max_tokens=max_tokens, stop=stop, logit_bias=logit_bias,
            repeat_last_n=self.last_n_tokens_size, logits_processors=tuple(logits_processor or ()))
        tools, tool_choice = chat.legacy_tools(functions, function_call, tools, tool_choice)
        options: JsonObject = {"tools": tools, "response_format": response_format}
        if tool_choice is not None:
            options["tool_choice"] = tool_choice
        if grammar is not None:
            options["grammar"] = grammar.grammar
        if logprobs:
            options.update(logprobs=True, top_logprobs=top_logprobs or 0)
        return chat.chat_completion(self.engine, messages, options, params,
                                    model if model is not None else self.model_path, stream)

    def create_chat_completion_openai_v1(self, *args: Any, **kwargs: Any) -> Any:
        """``create_chat_completion`` as the ``openai`` package's types (needs ``openai``)."""
        try:
            from openai.types.chat import ChatCompletion, ChatCompletionChunk
        except ImportError as exc:
            raise LlamaUnsupportedException("create_chat_completion_openai_v1 needs the openai package: "
                                            "pip install openai") from exc
        result = self.create_chat_completion(*args, **kwargs)
        if isinstance(result, dict):
            return ChatCompletion(**result)
        return (ChatCompletionChunk(**chunk) for chunk in result)

    def _call_seed(self, seed: int | None) -> int | None:
        """A call's seed: its own, else the Llama's unless that is llama.cpp's "random"."""
        if seed is not None:
            return seed
        return None if self._seed in (DEFAULT_SEED, -1) else self._seed


def _with_grammar(params: GenerationParams, grammar: LlamaGrammar) -> GenerationParams:
    return replace(params, grammar=grammar.grammar)


def _show_native_warnings() -> None:
    """verbose=True: llama.cpp's warnings and errors on stderr (one handler for the process)."""
    global _verbose_handler
    if _verbose_handler is None:
        _verbose_handler = logging.StreamHandler(sys.stderr)
        _verbose_handler.setLevel(logging.WARNING)
        logging.getLogger("llamact.native").addHandler(_verbose_handler)


__all__ = ["Llama"]
