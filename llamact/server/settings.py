"""``llamact serve``'s settings: command-line flags over ``LLAMACT_*`` environment variables over an
optional JSON config file over the defaults (pydantic-settings)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from ..engine import ModelParams
from ..engine.speculative.params import speculative_params
from ..errors import LlamaException
from ..grammar import limits
from ..grammar.gbnf import MAX_PARSE_DEPTH

__all__ = ["ServerSettings", "file_problem", "load_settings", "read_text_file"]


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
        raise LlamaException(problem)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LlamaException(f"cannot read the {what} file {path}: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LlamaException(f"the {what} file {path} is not UTF-8 text (byte {exc.start}: "
                             f"{raw[exc.start:exc.start + 1]!r})") from None


class ServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LLAMACT_", extra="forbid", protected_namespaces=())

    model: Path | None = None                 # None: the bundled SmolLM2
    alias: str | None = None                  # the model's name in answers (default: the file name)
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    ctx_size: int = Field(4096, ge=0)
    parallel: int = Field(1, ge=1, le=256)    # slots: requests decoded together (the context is split)
    cache_ram: int = Field(8192, ge=-1)      # MiB for slots' saved prompt caches (0: off, -1: no limit)
    batch_size: int = Field(2048, ge=1)
    ubatch_size: int = Field(512, ge=1)
    threads: int | None = Field(None, ge=1)
    fixed_threads: bool = False               # True: exactly `threads` even while the cores are busy
    n_gpu_layers: int = -1
    api_key: str | None = None
    chat_template_file: Path | None = None
    n_predict: int = -1                       # a request's max_tokens when it gives none (-1: no limit)
    reasoning_format: str = "deepseek"
    enable_thinking: bool = True
    # transport limits (README, "The server's limits"): what no request can exceed
    max_body_size: int = Field(32 << 20, ge=1)      # bytes of a request body (413 above)
    max_body_depth: int = Field(512, ge=1, le=10_000)   # nesting of a JSON body (400 above)
    max_tokenize_tokens: int = Field(1 << 20, ge=1)   # tokens /tokenize answers and /detokenize takes
    timeout: float = Field(600.0, gt=0)             # s to send a whole request (headers and body)
    shutdown_timeout: float = Field(5.0, ge=0)      # s running requests get after SIGTERM / SIGINT
    # what a request's grammar (given, or made from a schema or tools) may cost: grammar.limits
    grammar_max_bytes: int = Field(limits.DEFAULT_MAX_BYTES, ge=1)
    grammar_max_depth: int = Field(limits.DEFAULT_MAX_DEPTH, ge=1, le=MAX_PARSE_DEPTH)
    grammar_max_alternatives: int = Field(limits.DEFAULT_MAX_ALTERNATIVES, ge=1)
    grammar_max_elements: int = Field(limits.DEFAULT_MAX_ELEMENTS, ge=1)
    lenient_schemas: bool = False             # generate with schema keywords the grammar ignores (llama-server)
    # llama-server's admin switches: GET /slots (on by default), POST /slots/{id} (a directory to
    # save slots in; None: refused), POST /props (off by default), LoRA adapters loaded at start
    slots: bool = True
    slot_save_path: Path | None = None
    props: bool = False
    # (adapter file as given: /lora-adapters shows it so, scale), in --lora / --lora-scaled order
    lora: tuple[tuple[str, float], ...] = ()
    # embeddings (server.embeddings_api): served whatever `embeddings` says (llama-server's flag, accepted)
    embeddings: bool = False
    pooling: Literal["none", "mean", "cls", "last", "rank"] | None = None   # None: the model's own
    reranking: bool = False                   # the /rerank routes: pooling "rank" (llama-server's --reranking)
    embd_normalize: int = Field(2, ge=-1)     # pooled vectors' norm: -1 none, 0 max-abs (int16), 1, 2 euclidean, p
    # speculative decoding, llama-server's --spec-* (engine.speculative.params; None: its default)
    spec_type: str | None = None              # comma-separated: ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod,
    #                                           draft-simple, grammar (llamact's own)
    spec_default: bool = False                # ngram-mod with n_match 24, n_min 48, n_max 64
    spec_draft_model: Path | None = None
    spec_draft_n_max: int | None = None
    spec_draft_n_min: int | None = None
    spec_draft_p_min: float | None = None
    spec_draft_ctx_size: int | None = None    # 0: the target's context size
    spec_draft_threads: int | None = None
    spec_draft_threads_batch: int | None = None
    spec_draft_ngl: int | None = None
    spec_ngram_simple_size_n: int | None = None
    spec_ngram_simple_size_m: int | None = None
    spec_ngram_simple_min_hits: int | None = None
    spec_ngram_map_k_size_n: int | None = None
    spec_ngram_map_k_size_m: int | None = None
    spec_ngram_map_k_min_hits: int | None = None
    spec_ngram_map_k4v_size_n: int | None = None
    spec_ngram_map_k4v_size_m: int | None = None
    spec_ngram_map_k4v_min_hits: int | None = None
    spec_ngram_mod_n_match: int | None = None
    spec_ngram_mod_n_min: int | None = None
    spec_ngram_mod_n_max: int | None = None
    spec_grammar_n_max: int | None = None

    def embedding_pooling(self) -> str | None:
        """The pooling the embedding routes ask for (None: the model's own)."""
        return "rank" if self.reranking else self.pooling

    def grammar_limits(self) -> limits.GrammarLimits:
        return limits.GrammarLimits(max_bytes=self.grammar_max_bytes, max_depth=self.grammar_max_depth,
                             max_alternatives=self.grammar_max_alternatives, max_elements=self.grammar_max_elements)

    def model_path(self) -> Path:
        if self.model is not None:
            return self.model
        from ..models import smollm2_path

        return smollm2_path()

    def model_params(self) -> ModelParams:
        template = None
        if self.chat_template_file is not None:
            template = read_text_file(self.chat_template_file, "chat template")
        return ModelParams(n_ctx=self.ctx_size, n_batch=self.batch_size, n_ubatch=self.ubatch_size,
                           n_threads=self.threads, n_threads_batch=self.threads,
                           adaptive_threads=not self.fixed_threads, n_gpu_layers=self.n_gpu_layers,
                           chat_template=template, n_seq_max=self.parallel, loras=self.lora,
                           speculative=speculative_params(self.model_dump()))


def load_settings(flags: dict[str, Any], config_file: Path | None = None) -> ServerSettings:
    """``flags`` (the options given on the command line, None for those left out) over the
    environment over ``config_file`` (a JSON object of the same names)."""
    file_values: dict[str, Any] = {}
    if config_file is not None:
        try:
            file_values = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LlamaException(f"cannot read the config file {config_file}: {exc}") from exc
        if not isinstance(file_values, dict):
            raise LlamaException(f"the config file {config_file} must hold a JSON object")

    class _Settings(ServerSettings):
        @classmethod
        def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                       env_settings: PydanticBaseSettingsSource,
                                       dotenv_settings: PydanticBaseSettingsSource,
                                       file_secret_settings: PydanticBaseSettingsSource,
                                       ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=file_values)

    given = {k: v for k, v in flags.items() if v is not None}
    return ServerSettings.model_validate(_Settings(**given).model_dump())
