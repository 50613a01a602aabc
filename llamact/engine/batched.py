"""Continuous batching: several chat completions in one context, one ``llama_decode`` per step.

    scheduler = BatchScheduler(engine)          # engine loaded with ModelParams(n_seq_max=N): N slots
    stream = scheduler.create(messages, ...)    # create()'s arguments; a ChatStream, from any thread
    scheduler.close()

A ``backend.ChatBackend`` beside its engine (a sibling, not a subclass): ``create`` / ``generate`` run
on a slot, ``templates`` / ``chat_template`` / ``tokenize`` / ``prompt_length`` are the engine's,
``cancel()`` ends every request, ``n_ctx`` is one slot's share of the context.

A scheduler thread owns the context. Each request waits in a queue until a slot (a sequence id of
the context) is free, then joins between two steps. Every step decodes one batch (llama-server's
``update_slots``): first the last sampled token of every generating sequence, then the prompt tokens
of joining sequences, as many as ``n_batch`` leaves room for (a long prompt is spread over several
steps; the generating sequences are never paused for it). After the decode each sequence whose
prompt is done, or that is generating, samples its next token from its own row of logits with its
own sampler (grammar, reasoning budget, preserved tokens: ``chat_sampler_config``), and hands the
text to its stream. A sequence leaves when it ends (end of generation, stop string, max_tokens, its
share of the context) or when its stream is closed or interrupted; its slot is free at the next step.

**Prompt cache per slot**: a slot keeps what its sequence holds in the KV cache after its request
leaves. A joining request takes the free slot whose cached tokens share the longest prefix with its
prompt (when that prefix is at least a tenth of the prompt; else the least recently used slot, as
llama-server's ``slot_prompt_similarity``), and only the rest of its prompt is evaluated (at least
one token: its logits are needed). ``cache_prompt=False`` evaluates the whole prompt. A slot about
to lose most of its cache saves it in host memory first (``PromptStore``, llama-server's
``--cache-ram``), and a request finds a saved prefix there when it reaches further than its slot's.

**Slot actions** (llama-server's ``POST /slots/{id}``): ``save_slot`` / ``restore_slot`` /
``erase_slot`` run on the scheduler's thread between two steps, once the slot holds no request (as
llama-server defers them), so the sequence they read or write is never being decoded. A restored
slot's tokens are its cache: the next request whose prompt starts with them evaluates only the rest.

The chunks each request receives are ``GenerationChunk`` values made by a ``SequenceDecoder`` (text,
stop strings, limits, end token, timings, logprobs), as ``generate()``'s are, so the request's
``ChatStream`` (parser, deltas, usage) is the same as ``create()``'s. A sequence has ``n_ctx / n_seq_max``
positions and ends when its next token would leave none free (llama-server's ``n_past + 1 >= n_ctx``).
Logits depend slightly on how tokens are batched, so a greedy answer may part from the single-sequence
one at a near tie (as llama-server's slots do).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from ..chat.request import ChatRequest, as_chat_request
from ..chat.result import ChatTemplateResult
from ..chat.templates import ChatTemplates
from ..errors import LlamaArgumentException, LlamaContextException, LlamaInferenceException, LlamaStateException
from ..native.batch import Batch
from ..native.guided import GuidedSampler
from .chat_calls import chat_keywords
from .chat_completion import ChatStream
from .decode import SequenceDecoder
from .engine import LlamaEngine
from .grammar_engines import grammar_sampler_spec
from .logprobs import LogprobReader
from .params import GenerationParams
from .prompt_cache import common_prefix
from .prompt_store import PromptStore
from .sampling import sampler_specs, within_context
from .slot_requests import AdapterKey, AdapterSet, Request, Scales, SequenceStream, Slot
from .slot_state import checked_slot_tokens, pack_tokens
from .speculative.slots import plan_drafts, verify_slot

__all__ = ["BatchScheduler", "SequenceStream"]

SIMILARITY = 0.1   # llama-server's default --slot-prompt-similarity


class BatchScheduler:
    """The slots of one engine (see the module docstring)."""

    def __init__(self, engine: LlamaEngine, *, cache_ram_mib: int = 8192) -> None:
        self.engine = engine
        self.context = engine.context
        self.n_slots = engine.params.n_seq_max
        self.n_ctx_seq = self.context.n_ctx_seq
        n_batch = self.context.n_batch
        if n_batch < self.n_slots:
            raise LlamaContextException(f"n_batch ({n_batch}) must be at least the number of slots ({self.n_slots})",
                                        {"n_batch": n_batch, "n_seq_max": self.n_slots})
        self._vocab = engine.model.vocab
        self.context.memory_clear()   # the slots' caches start empty: nothing the engine left may stay
        self._cond = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._slots = [Slot(seq) for seq in range(self.n_slots)]
        self._order: list[Slot] = []      # slots holding a request, in the order they joined
        self._closed = False
        self._step_listeners: list[Callable[[], None]] = []
        self._actions: deque[tuple[int, Callable[[Slot], Any], Future[Any]]] = deque()   # slot actions
        self._applied: AdapterKey | None = None   # the LoRA set on the context (None: not set by the slots yet)
        # llama-server's --cache-ram: MiB of host memory for slots' saved caches (0: off, -1: no limit)
        self.prompt_store = (PromptStore(self.context, cache_ram_mib << 20 if cache_ram_mib > 0 else 1 << 62)
                             if cache_ram_mib != 0 else None)
        self._batch = Batch(self.context, n_batch, 1)
        # llama-server's /metrics counters: every decode, the busy slots summed over them, and the
        # longest sequence a slot has held (prompt + generation)
        self.n_decodes = 0
        self.n_busy_slots = 0
        self.n_tokens_max = 0
        self.n_prompt_tokens = 0  # prompt tokens evaluated
        self.n_cached_tokens = 0  # prompt tokens found in the slots' caches
        self.thread = threading.Thread(target=self._loop, name="llamact-slots", daemon=True)
        self.thread.start()

    # -- the callers' side -----------------------------------------------------------------------

    @property
    def n_active(self) -> int:
        with self._cond:
            return len(self._order)

    @property
    def n_waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    @property
    def model_name(self) -> str:
        return self.engine.model_name

    @property
    def n_ctx(self) -> int:
        """The positions one request may take: a slot's share of the context (``n_ctx / n_seq_max``)."""
        return self.n_ctx_seq

    @property
    def n_threads(self) -> int:
        """The threads a one-token decode uses now (the engine's context's)."""
        return self.engine.n_threads

    def templates(self, custom_template: str | None = None) -> ChatTemplates:
        return self.engine.templates(custom_template)

    def chat_template(self, messages: Any, **options: Any) -> ChatTemplateResult:
        return self.engine.chat_template(messages, **options)

    def tokenize(self, text: str | bytes, add_special: bool = True, parse_special: bool = True,
                 limit: int | None = None) -> list[int]:
        return self.engine.tokenize(text, add_special, parse_special, limit)

    def prompt_length(self, request: ChatRequest) -> int:
        return self.engine.prompt_length(request)

    def create(self, messages: Any, *, params: GenerationParams | None = None, loras: Scales | None = None,
               slot: int = -1, **options: Any) -> ChatStream:
        """``LlamaEngine.create()`` on a slot: the same arguments (a ``ChatRequest``, or its messages and
        options; sampling settings as keywords) and the same stream. ``loras``: the LoRA scales it
        decodes with (path -> scale, of adapters the engine has loaded; None: those the engine applies
        now); ``slot``: the slot it must run in (-1: any; it waits for that one, as llama-server's
        ``id_slot``)."""
        adapters, slot = self._placement(loras, slot)
        params, options = chat_keywords(params, options)
        chat = self.engine.prepare_chat(as_chat_request(messages, options), params)
        try:
            self._check_prompt(chat.tokens)
        except BaseException:
            chat.close()
            raise
        request = self._submit(Request(chat.tokens, chat.sampling.sampler, chat.sampling.stops, chat.params,
                                        media=chat.media, adapters=adapters, want_slot=slot))
        return ChatStream(SequenceStream(self._cancel, request), chat.result, chat.parser, len(chat.tokens),
                          model=self.engine.model_name)

    def generate(self, prompt: str | Sequence[int], params: GenerationParams | None = None, *,
                 loras: Scales | None = None, slot: int = -1) -> SequenceStream:
        """``LlamaEngine.generate()`` on a slot: a raw prompt (text is tokenized with special tokens
        parsed); ``loras`` and ``slot`` as ``create()``'s."""
        adapters, slot = self._placement(loras, slot)
        params = within_context(params or GenerationParams(), self.n_ctx_seq)
        engine = self.engine
        tokens = engine.prompt_tokens(prompt) if isinstance(prompt, str) else engine.model.vocab.token_ids(prompt)
        self._check_prompt(tokens)
        sampler = GuidedSampler(engine.model, sampler_specs(replace(params, grammar=None)),
                                grammar=grammar_sampler_spec(engine.model, params.grammar, engine=params.grammar_engine)
                                if params.grammar else None)
        return SequenceStream(self._cancel, self._submit(Request(tokens, sampler, tuple(params.stop), params,
                                                          adapters=adapters, want_slot=slot)))

    def _placement(self, loras: Scales | None, slot: int) -> tuple[AdapterSet, int]:
        """A request's adapters and slot, checked before anything is made for it."""
        if isinstance(slot, bool) or not isinstance(slot, int) or not -1 <= slot < self.n_slots:
            raise LlamaArgumentException(f"slot must be -1 (any) or a slot id below {self.n_slots}, got {slot!r}",
                                          {"slot": repr(slot)})
        return self.engine._adapters_for(loras), slot

    def _check_prompt(self, tokens: Sequence[int]) -> None:
        if not tokens:
            raise LlamaArgumentException("the prompt is empty: give at least one token")
        if len(tokens) >= self.n_ctx_seq:
            raise LlamaContextException(
                f"the prompt ({len(tokens)} tokens) does not fit a slot ({self.n_ctx_seq} tokens: the context "
                f"split between {self.n_slots} slots); use a larger n_ctx or a shorter prompt",
                {"n_prompt": len(tokens), "n_ctx_seq": self.n_ctx_seq})

    def _submit(self, request: Request) -> Request:
        if request.params.logprobs:
            try:   # checks top_logprobs here, on the caller's thread
                request.logprobs = LogprobReader(self._vocab, request.params.top_logprobs)
            except BaseException:
                request.close()
                raise
        with self._cond:
            if self._closed:
                request.close()
                raise LlamaStateException("the scheduler is closed")
            self._waiting.append(request)
            self._cond.notify()
        return request

    # -- slot actions (llama-server's POST /slots/{id}) ----------------------------------------------

    def slot_states(self) -> list[tuple[bool, int]]:
        """Each slot's (holds a request, tokens in its KV cache), by id."""
        with self._cond:
            return [(slot.request is not None, len(slot.cache)) for slot in self._slots]

    def save_slot(self, seq: int, path: str | os.PathLike[str]) -> Future[int]:
        """Write slot ``seq``'s KV cache and tokens to ``path`` (llama-server's slot file: ``slot_state``);
        the future gives the number of tokens saved."""
        def save(slot: Slot) -> int:
            self.context.save_seq_state(path, slot.seq, pack_tokens(slot.cache), raw=True, checksum=False)
            return len(slot.cache)
        return self._slot_action(seq, save)

    def restore_slot(self, seq: int, path: str | os.PathLike[str]) -> Future[int]:
        """Replace slot ``seq``'s cache with a file of ``save_slot``; the future gives the tokens
        restored (LlamaStateException: the slot is left empty)."""
        def restore(slot: Slot) -> int:
            slot.cache.clear()   # load_seq_state empties the sequence whatever happens
            words = self.context.load_seq_state(path, slot.seq, capacity=self.n_ctx_seq + 4)
            try:
                slot.cache[:] = checked_slot_tokens(words, self._vocab.n_tokens, self.n_ctx_seq)
            except BaseException:
                self._forget(slot)
                raise
            return len(slot.cache)
        return self._slot_action(seq, restore)

    def erase_slot(self, seq: int) -> Future[int]:
        """Empty slot ``seq``'s cache; the future gives how many tokens it held."""
        def erase(slot: Slot) -> int:
            n = len(slot.cache)
            self._forget(slot)
            return n
        return self._slot_action(seq, erase)

    def _slot_action(self, seq: int, action: Callable[[Slot], Any]) -> Future[Any]:
        if not 0 <= seq < self.n_slots:
            raise LlamaArgumentException(f"no slot {seq} (there are {self.n_slots})", {"seq": seq})
        future: Future[Any] = Future()
        with self._cond:
            if self._closed:
                raise LlamaStateException("the scheduler is closed")
            self._actions.append((seq, action, future))
            self._cond.notify()
        return future

    def _due_actions(self) -> list[tuple[Slot, Callable[[Slot], Any], Future[Any]]]:
        """The queued slot actions whose slot holds no request (with the lock held, between steps);
        their slots are marked busy, so no request joins them while they run."""
        due = []
        for entry in list(self._actions):
            seq, action, future = entry
            slot = self._slots[seq]
            if slot.request is not None or slot.busy:
                continue   # deferred until its request leaves, as llama-server defers it
            self._actions.remove(entry)
            slot.busy = True
            due.append((slot, action, future))
        return due

    def _run_actions(self, due: list[tuple[Slot, Callable[[Slot], Any], Future[Any]]]) -> None:
        """Run slot actions on the scheduler's thread without the lock: a file's I/O takes as long as
        the disk (or a FIFO: forever), and everyone who reads the scheduler's state (``/metrics``,
        ``/slots``, a request joining) takes the lock."""
        for slot, action, future in due:
            try:
                future.set_result(action(slot))
            except BaseException as exc:
                future.set_exception(exc)
            finally:
                with self._cond:
                    slot.busy = False

    def add_step_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every step (and whenever items were made outside one), on the
        thread that made them: where a consumer of ``listen()`` hands a step's items on at once."""
        self._step_listeners.append(listener)

    def _emit(self, request: Request, item: Any) -> None:
        with request.lock:
            if request.listener is not None:
                request.listener(item)
            else:
                request.out.put(item)

    def _after_step(self) -> None:
        for listener in self._step_listeners:
            listener()

    def _cancel(self, request: Request) -> None:
        with self._cond:
            if request.cancelled:
                return
            request.cancelled = True
            queued = request in self._waiting
            if queued:     # never reached a slot: it ends here
                self._waiting.remove(request)
                request.close()
                self._emit(request, SequenceStream.END)
            self._cond.notify()
        if queued:
            self._after_step()

    def cancel(self) -> None:
        """Stop every request, waiting or on a slot (each stream ends)."""
        with self._cond:
            requests = [*self._waiting, *(slot.request for slot in self._order if slot.request is not None)]
        for request in requests:
            self._cancel(request)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self.thread.join()
        self._batch.close()
        if self._applied is not None and not self.context.closed:   # the engine's own adapters again
            self.context.set_loras(list(self.engine._adapters_for(None)))

    # -- the scheduler thread --------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._waiting and not self._order and not self._actions:
                    self._cond.wait()
                if self._closed:
                    pending = list(self._waiting) + [slot.request for slot in self._order if slot.request]
                    self._waiting.clear()
                    for _seq, _action, future in self._actions:
                        future.set_exception(LlamaStateException("the server is shutting down"))
                    self._actions.clear()
                    break
                for slot in [s for s in self._order if s.request is not None and s.request.cancelled]:
                    assert slot.request is not None
                    self._emit(slot.request, SequenceStream.END)
                    self._release(slot)
                due = self._due_actions()
                self._admit()
            self._run_actions(due)
            try:
                self._step()
            except Exception as exc:   # a failure outside a request's own decode must not end this thread
                for slot in [s for s in self._order if s.request is not None]:
                    self._fail(slot, exc)
            self._after_step()
        for request in pending:
            self._emit(request, LlamaStateException("the server is shutting down"))
            request.close()
        self._after_step()

    def _admit(self) -> None:
        """Give waiting requests the free slots, first come first served (with the lock held). One
        that asked for a slot waits for that slot (llama-server defers it) and keeps the requests
        after it off it; the others go on."""
        reserved: set[int] = set()
        for request in list(self._waiting):
            free = [s for s in self._slots if s.request is None and not s.busy and s.seq not in reserved]
            if not free:
                return
            if request.want_slot >= 0:
                wanted = self._slots[request.want_slot]
                if wanted not in free:
                    reserved.add(wanted.seq)
                    continue
                free = [wanted]
            self._waiting.remove(request)
            self._join(request, free)

    def _pick_slot(self, tokens: Sequence[int], key: AdapterKey, free: list[Slot]) -> tuple[Slot, int]:
        """The free slot for a prompt, and how many of its tokens that slot's cache holds (a cache
        computed with other adapters holds none)."""
        def held(slot: Slot) -> int:
            return common_prefix(slot.cache, tokens) if slot.cache_key == key else 0
        scored = [(held(slot), slot) for slot in free]
        # equal prefixes: the lowest id, as llama-server (the first slot that beats the best so far).
        # It also packs the busy slots into few ids: with a KV cache per sequence, llama.cpp puts only
        # consecutive ids in one ubatch, and slots spread by LRU made each step several computations
        best_lcp, best = max(scored, key=lambda pair: (pair[0], -pair[1].seq))
        if best_lcp >= SIMILARITY * len(tokens) and best_lcp > 0:
            return best, best_lcp
        lru = min(free, key=lambda slot: slot.t_used)
        return lru, held(lru)

    def _join(self, request: Request, free: list[Slot]) -> None:
        """Give ``request`` one of the ``free`` slots (called with the lock held): keep the cached
        prefix of its prompt, when that cache was computed with its adapters."""
        key = request.lora_key
        slot, lcp = self._pick_slot(request.tokens, key, free)
        store = self.prompt_store
        if store is not None and request.params.cache_prompt:
            if slot.cache and lcp < len(slot.cache) / 2:   # about to lose most of it: keep it in memory
                store.save(slot.seq, slot.cache, tag=slot.cache_key)
            loaded = store.load(slot.seq, request.tokens, better_than=lcp, tag=key)
            if loaded is not None:
                slot.cache, slot.cache_key = loaded, key
                lcp = common_prefix(loaded, request.tokens)
        if slot.cache_key != key:   # computed with other weights: of no use to this request
            self._forget(slot)
            slot.cache_key = key
        n_keep = min(lcp, len(request.tokens) - 1) if request.params.cache_prompt else 0
        if request.media is not None:   # never keep part of a medium
            n_keep = request.media.cut(n_keep)
        if n_keep < len(slot.cache) and not self.context.memory_seq_rm(slot.seq, request.position(n_keep), -1):
            self.context.memory_seq_rm(slot.seq, -1, -1)    # this memory cannot drop a suffix: start over
            n_keep = 0
        del slot.cache[n_keep:]
        slot.request = request
        slot.t_stepped = time.perf_counter()   # its turn among the adapter sets counts from here
        request.seq = slot.seq
        self._order.append(slot)
        request.n_past = request.n_cached = n_keep
        # room: the sequence ends when its next token would leave no free cell of its n_ctx_seq
        # (llama-server's n_past + 1 >= n_ctx)
        request.decoder = SequenceDecoder(
            request.stop_strings, request.params.max_tokens, self.n_ctx_seq, self.n_ctx_seq - len(request.tokens),
            len(request.tokens) - n_keep, n_keep, logprobs=request.logprobs, logits=self.context.borrow_logits,
            is_end=self._vocab.is_eog)
        speculator = self.engine.speculator
        if speculator is not None and request.params.speculative and request.media is None:   # (text only)
            request.spec = speculator.sequence(slot.seq, request.tokens, request.sampler)
        self.n_cached_tokens += n_keep

    def _release(self, slot: Slot) -> None:
        """Free a slot (with the lock held); its cache stays for the next request unless it is unknown."""
        request, slot.request = slot.request, None
        slot.t_used = time.perf_counter()
        if slot in self._order:
            self._order.remove(slot)
        if request is not None:
            request.close()
            if not request.params.cache_prompt:
                self._forget(slot)

    def _forget(self, slot: Slot) -> None:
        self.context.memory_seq_rm(slot.seq, -1, -1)
        slot.cache.clear()

    def _fail(self, slot: Slot, exc: BaseException) -> None:
        request = slot.request
        if request is not None:
            self._emit(request, exc)
        with self._cond:
            self._release(slot)
            self._forget(slot)

    def _step(self) -> None:
        """One decode: every generating sequence's last token, and prompt tokens while there is room
        (joining requests first come, first served). The batch lists sequences by id: with a KV cache
        per sequence, llama.cpp puts only consecutive sequence ids in one ubatch (split_equal's
        ``sequential``), so any other order splits a step into several graph computations."""
        batch = self._batch
        batch.clear()
        active = self._one_adapter_set([s for s in self._order if s.request is not None and not s.request.cancelled])
        for slot in active:
            if slot.request is not None and slot.request.media is not None and slot.request.prompting:
                self._evaluate_media(slot)
        active = [s for s in active if s.request is not None and not s.request.cancelled]
        n_generating = sum(not s.request.prompting for s in active)   # type: ignore[union-attr]
        drafts = self._drafts(active) if self.engine.speculator is not None else {}
        room, take = batch.capacity - n_generating - sum(map(len, drafts.values())), {}
        for slot in active:
            request = slot.request
            assert request is not None
            if request.prompting and room > 0:
                take[slot.seq] = n = min(room, request.text_end() - request.n_past)
                room -= n
        generating: list[tuple[int, Slot]] = []       # (batch index of its logits, slot)
        prompting: list[tuple[Slot, int, int]] = []   # (slot, tokens in this batch, logits index or -1)
        n_tokens = 0   # the batch's size so far: the next token's index
        for slot in sorted(active, key=lambda s: s.seq):
            request = slot.request
            assert request is not None
            if not request.prompting:
                generating.append((n_tokens, slot))
                batch.add(request.last, request.position(request.n_past), (slot.seq,), logits=True)
                n_tokens += 1
                if slot.seq in drafts:   # its draft after it, every token with its logits
                    n_tokens = batch.extend(drafts[slot.seq], request.n_past + 1, slot.seq, logits_all=True) + 1
            elif slot.seq in take:
                chunk = request.tokens[request.n_past:request.n_past + take[slot.seq]]
                ends = request.n_past + len(chunk) == len(request.tokens)   # (a medium is never last)
                index = batch.extend(chunk, request.position(request.n_past), slot.seq, logits_last=ends)
                prompting.append((slot, len(chunk), index if ends else -1))
                n_tokens = index + 1
        if not generating and not prompting:
            return
        try:
            self.context.observe_decode()   # the last step's decode, its logits read: the thread governor's input
            self.context.decode(batch)
        except BaseException as exc:
            for slot in [s for _, s in generating] + [s for s, _, _ in prompting]:
                self._fail(slot, exc)
            return
        self.n_decodes += 1
        self.n_busy_slots += len(active)
        now = time.perf_counter()
        for slot in active:
            slot.t_stepped = now
        for slot, n, _index in prompting:
            request = slot.request
            assert request is not None and request.decoder is not None
            slot.cache.extend(request.tokens[request.n_past:request.n_past + n])
            request.n_past += n
            self.n_prompt_tokens += n
            if not request.prompting:
                request.decoder.prompt_done(now)
                if request.spec is not None:
                    request.spec.begin()
        for _index, slot in generating:
            request = slot.request
            assert request is not None
            if slot.seq in drafts:
                continue   # verify_slot moves its cache and n_past by what the target keeps
            slot.cache.append(request.last)
            request.n_past += 1
        self.n_tokens_max = max(self.n_tokens_max, *(len(slot.cache) for slot in active))
        ready = generating + [(index, slot) for slot, _n, index in prompting if index >= 0]
        for index, slot in ready:
            request = slot.request
            assert request is not None and request.decoder is not None
            try:
                if request.decoder.reason is not None:   # max_tokens 0: it ended before its first token
                    self._finish(slot)
                elif slot.seq in drafts:
                    for out in verify_slot(self.context, self._vocab, request, slot, index, drafts[slot.seq]):
                        self._emit(request, out)
                    if request.decoder.reason is not None:
                        self._finish(slot)
                else:
                    self._take(slot, request.sampler.sample(self.context, index), index)
            except BaseException as exc:
                self._fail(slot, exc)

    def _one_adapter_set(self, active: list[Slot]) -> list[Slot]:
        """The slots this step decodes: those whose requests decode with the same LoRA adapters (the
        context applies one set per decode; llama-server batches only slots whose adapters agree), of
        several sets the one whose slot waited longest; the context is switched to that set. A
        request is never decoded with another request's adapters."""
        if not active:
            return active
        key = min(active, key=lambda s: s.t_stepped).request.lora_key   # type: ignore[union-attr]
        active = [s for s in active if s.request is not None and s.request.lora_key == key]
        if key != self._applied:
            assert active[0].request is not None
            self.context.set_loras(list(active[0].request.adapters))
            self._applied = key
        return active

    def _evaluate_media(self, slot: Slot) -> None:
        """The media at the front of a joining request's prompt, each decoded into its sequence on
        its own (as llama-server does: a medium's embeddings are not batched with other tokens), up
        to the next text; the batch then takes the text."""
        request = slot.request
        assert request is not None and request.media is not None
        media = request.media
        try:
            while request.prompting:
                span = media.span_at(request.n_past)
                if span is None:
                    return
                if not media.evaluate(self.context, request.n_past, slot.seq):
                    raise LlamaInferenceException("decoding was aborted")
                slot.cache.extend(request.tokens[request.n_past:span.end])
                request.n_past = span.end
                self.n_prompt_tokens += span.n_tokens
        except BaseException as exc:
            self._fail(slot, exc)

    def _drafts(self, active: list[Slot]) -> dict[int, list[int]]:
        """The drafts of this step's generating slots that speculate (speculative/slots.py)."""
        generating = [(s, s.request) for s in active if s.request is not None and not s.request.prompting]
        speculator = self.engine.speculator
        return plan_drafts(speculator, generating, self._batch.capacity, self.n_ctx_seq) if speculator else {}

    def _take(self, slot: Slot, token: int, index: int) -> None:
        """A sampled token (from logits row ``index``): its chunk to the stream, or the end of the request."""
        request = slot.request
        assert request is not None and request.decoder is not None
        decoder, sampler, vocab = request.decoder, request.sampler, self._vocab
        if request.spec is not None:   # the drafts follow what the slot decoded and sampled
            request.spec.stepped((request.last,) if decoder.n_generated else (), token)
        if vocab.is_eog(token):
            # its text only when it is preserved (render_special does not render it here)
            decoder.end(token, vocab.token_to_piece(token, special=True) if sampler.renders_as_text(token) else b"",
                        index)
            self._finish(slot)
            return
        request.last = token
        special = request.params.render_special or sampler.renders_as_text(token)
        self._emit(request, decoder.take(token, vocab.token_to_piece(token, special=special), index))
        if decoder.reason is not None:
            self._finish(slot)

    def _finish(self, slot: Slot) -> None:
        """The request ended (``decoder.reason``): its final chunk, and its slot is free."""
        request = slot.request
        assert request is not None and request.decoder is not None
        self._emit(request, request.decoder.finish())
        with self._cond:
            self._release(slot)
