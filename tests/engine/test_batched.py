"""BatchScheduler: prompts mixed into the generating sequences' steps, the slots' prompt caches, and
cancelling a request that waits for a slot. (The server tests drive it through HTTP.)"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from llamact import ChatRequest, GenerationParams, LlamaEngine, ModelParams
from llamact.engine.batched import BatchScheduler, SequenceStream

pytestmark = pytest.mark.model

END_TEXT = "<|im_end|><|endoftext|>"


def no_end(engine: LlamaEngine) -> dict[int, float]:
    return {t: float("-inf") for t in engine.tokenize(END_TEXT, add_special=False, parse_special=True)}


def test_a_long_prompt_joins_while_another_sequence_generates(smollm2_path: Path) -> None:
    """B's prompt (~300 tokens) needs several batches of 64: each also carries A's next token, so A keeps
    generating while B's prompt is evaluated (a prompt decoded on its own would pause A meanwhile)."""
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=4096, n_seq_max=2, n_batch=64, n_ubatch=64,
                                                    n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            events: list[tuple[str, Any]] = []   # in the order the scheduler's thread made them
            a_started = threading.Event()

            def record(name: str) -> Any:
                def listener(item: Any) -> None:
                    events.append((name, item))
                    a_started.set()
                return listener

            a = scheduler.generate("Once upon a time", GenerationParams(greedy=True, max_tokens=40,
                                                                        logit_bias=no_end(engine)))
            a.listen(record("A"))
            assert a_started.wait(60)
            long_prompt = engine.tokenize("Summarize: " + "The cat sat on the mat. " * 50)
            assert len(long_prompt) > 5 * 63
            events.append(("B submitted", None))
            b = scheduler.generate(long_prompt, GenerationParams(greedy=True, max_tokens=2))
            done = threading.Event()
            b.listen(lambda item: (events.append(("B", item)), item is SequenceStream.END or
                                   getattr(item, "stop_reason", None) is not None) and done.set())
            assert done.wait(120)
            names = [name for name, _ in events]
            submitted, b_first = names.index("B submitted"), names.index("B")
            # each batch: A's token + up to 63 of B's prompt tokens -> at least 5 batches before B's first
            assert names[submitted:b_first].count("A") >= 4
        finally:
            scheduler.close()


def test_a_slot_keeps_its_prompt_for_the_next_request(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_seq_max=2, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            messages = [{"role": "user", "content": "Name a planet."}]
            params = GenerationParams(greedy=True, max_tokens=6)
            first = scheduler.create(messages, params=params).completion()
            n_prompt = first.usage.prompt_tokens
            assert first.usage.cached_tokens == 0
            again = scheduler.create(messages, params=params).completion()
            assert again.usage.cached_tokens == n_prompt - 1    # its logits are needed: one is evaluated
            assert again.timings.prompt_n == 1
            assert again.content == first.content
            # the conversation goes on: its earlier turn is found in the slot
            longer = messages + [{"role": "assistant", "content": first.content},
                                 {"role": "user", "content": "And another?"}]
            follow = scheduler.create(longer, params=params).completion()
            assert follow.usage.cached_tokens >= n_prompt - 1
            alone = scheduler.create(longer, params=GenerationParams(greedy=True, max_tokens=6,
                                                                     cache_prompt=False)).completion()
            assert alone.usage.cached_tokens == 0
            assert alone.timings.prompt_n == alone.usage.prompt_tokens
        finally:
            scheduler.close()


def test_a_waiting_request_cancelled_ends_at_once(smollm2_path: Path) -> None:
    """One slot, busy with a generation that would take minutes; the request queued behind it is
    interrupted: the thread reading it stops waiting at once, the running one goes on."""
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=8192, n_seq_max=1, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            busy = scheduler.generate("Once upon a time", GenerationParams(greedy=True, max_tokens=-1,
                                                                           logit_bias=no_end(engine)))
            next(busy)
            queued = scheduler.generate("Hello", GenerationParams(greedy=True, max_tokens=4))
            got: list[Any] = []
            reader = threading.Thread(target=lambda: got.extend(queued))
            reader.start()
            assert scheduler.n_waiting == 1
            queued.interrupt()
            reader.join(60)
            assert not reader.is_alive() and got == []
            assert scheduler.n_waiting == 0 and scheduler.n_active == 1
            assert next(busy).stop_reason is None        # still generating
            busy.close()
        finally:
            scheduler.close()


def test_each_step_lists_its_sequences_by_id(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a KV cache per sequence, llama.cpp puts only consecutive sequence ids in one ubatch: a step
    listing them in join order (slot 1, then slot 0) would run as two graph computations, not one."""
    from llamact.native.context import Context

    orders: list[list[int]] = []
    decode = Context.decode

    def recording(self: Context, batch: Any) -> None:
        s = batch.struct
        orders.append([s.seq_id[i][0] for i in range(s.n_tokens)])
        decode(self, batch)

    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_seq_max=2, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            params = GenerationParams(greedy=True, max_tokens=8, logit_bias=no_end(engine))
            first = engine.tokenize("The first story begins")
            list(scheduler.generate(first, params))                 # slot 0 now holds this prompt
            other = scheduler.generate("Something else entirely", params)   # slot 1: nothing cached
            next(other)
            monkeypatch.setattr(Context, "decode", recording)
            again = scheduler.generate(first, params)               # joins later, into slot 0
            list(again)
            list(other)
        finally:
            scheduler.close()
    both = [order for order in orders if len(set(order)) == 2]
    assert both, orders
    assert all(order == sorted(order) for order in both), both


@pytest.mark.parametrize("cache_ram_mib", [64, 0], ids=["store", "no-store"])
def test_a_slot_taken_by_another_prompt_finds_its_cache_again(smollm2_path: Path, cache_ram_mib: int) -> None:
    """One slot: A, then B (which takes A's slot and keeps little of it), then A again: A's cache comes back
    from host memory (llama-server's --cache-ram) and only its last token is evaluated; without the
    store, A is evaluated again from where B parted from it."""
    params = GenerationParams(greedy=True, max_tokens=6)
    a = [{"role": "user", "content": "Tell me about the history of the printing press in Europe, from "
                                     "Gutenberg's workshop in Mainz to the spread of print shops in "
                                     "Venice, Paris and London, and what it changed for books."}]
    b = [{"role": "user", "content": "Hi"}]
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_seq_max=1, n_threads=2)) as engine:
        # the reference: A twice in a row (the second run: A's cache as its first run made it, plus one token)
        scheduler = BatchScheduler(engine, cache_ram_mib=0)
        try:
            scheduler.create(a, params=params).completion()
            reference = scheduler.create(a, params=params).completion()
        finally:
            scheduler.close()
        scheduler = BatchScheduler(engine, cache_ram_mib=cache_ram_mib)
        try:
            scheduler.create(a, params=params).completion()
            scheduler.create(b, params=params).completion()
            again = scheduler.create(a, params=params).completion()
        finally:
            scheduler.close()
    n_prompt = again.usage.prompt_tokens
    assert reference.usage.cached_tokens == n_prompt - 1
    if cache_ram_mib:
        assert again.usage.cached_tokens == n_prompt - 1
        assert again.content == reference.content     # the restored cache is the one A's first run made
    else:
        assert again.usage.cached_tokens < n_prompt // 2   # the template's opening only


def test_a_slot_gives_the_same_chunks_as_the_engine(smollm2_path: Path) -> None:
    """A raw generation on a slot: the same texts, the end token's logprob entry on the final chunk,
    and the tokens that end inside a character marked, as ``LlamaEngine.generate`` gives them."""
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_seq_max=2, n_threads=2)) as engine:
        cases = [("<|im_start|>user\nSay only the word yes.<|im_end|>\n<|im_start|>assistant\n",
                  GenerationParams(greedy=True, max_tokens=30, logprobs=True, top_logprobs=1)),
                 ("Write a symbol:", GenerationParams(greedy=True, max_tokens=8, grammar='root ::= "\U0001d538 ok"'))]
        alone = [[(c.text, c.token, c.incomplete, c.logprob.id if c.logprob else None, c.end_token)
                  for c in engine.generate(prompt, params)] for prompt, params in cases]
        scheduler = BatchScheduler(engine)
        try:
            on_slot = [[(c.text, c.token, c.incomplete, c.logprob.id if c.logprob else None, c.end_token)
                        for c in scheduler.generate(prompt, params)] for prompt, params in cases]
        finally:
            scheduler.close()
    assert on_slot == alone
    assert alone[0][-1][3] == alone[0][-1][4] is not None     # the end token's entry
    assert any(incomplete for _, _, incomplete, _, _ in alone[1])


def test_equal_prefixes_go_to_the_lowest_slot(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slots whose caches share a prompt equally well: the lowest id takes it (llama-server's choice),
    not the least recently used, which spread requests over the ids (and split the steps, see above)."""
    from llamact.native.context import Context

    seqs: list[int] = []
    decode = Context.decode

    def recording(self: Context, batch: Any) -> None:
        s = batch.struct
        seqs.extend(s.seq_id[i][0] for i in range(s.n_tokens))
        decode(self, batch)

    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_seq_max=3, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine, cache_ram_mib=0)
        try:
            params = GenerationParams(greedy=True, max_tokens=2)
            streams = [scheduler.generate(f"The shared opening of every story, part {i}", params) for i in range(3)]
            for stream in streams:      # each slot now holds the opening (and its own end)
                list(stream)
            list(scheduler.generate("The shared opening of every story, part 0", params))   # slot 0 used last
            monkeypatch.setattr(Context, "decode", recording)
            list(scheduler.generate("The shared opening of every story, part 9", params))
        finally:
            scheduler.close()
    assert seqs and set(seqs) == {0}, seqs


def test_a_chat_request_on_a_slot_takes_every_option_create_takes(smollm2_path: Path) -> None:
    """One ChatRequest for the engine and the slots: logprobs (which the scheduler's own keyword list
    lacked) and the request's grammar give the same reply and entries on a slot as on the engine."""
    request = ChatRequest([{"role": "user", "content": "Yes or no?"}], logprobs=True, top_logprobs=2,
                          grammar='root ::= "yes" | "no"')
    params = GenerationParams(greedy=True, max_tokens=8, cache_prompt=False)
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_seq_max=2, n_threads=2)) as engine:
        alone = engine.complete_chat(request, params=params)
        scheduler = BatchScheduler(engine)
        try:
            with scheduler.create(request, params=params) as stream:
                on_slot = stream.completion()
        finally:
            scheduler.close()
    assert on_slot.content == alone.content and alone.content in ("yes", "no")
    assert alone.logprobs is not None and on_slot.logprobs is not None
    assert [(e.id, [t.id for t in e.top_logprobs]) for e in on_slot.logprobs] == \
        [(e.id, [t.id for t in e.top_logprobs]) for e in alone.logprobs]
    assert all(len(e.top_logprobs) == 2 for e in alone.logprobs)


def test_a_reply_not_streamed_costs_the_event_loop_nothing_per_token(smollm2_path: Path) -> None:
    """SlotRunner (the server's worker): a job whose items nobody reads (``run_to_end`` without
    ``on_item``) gets no item handed to the event loop, only its end, with the whole completion; a
    streamed job gets every chunk. Both completions are the same."""
    import asyncio

    from llamact.server.runners.slot_runner import SlotRunner

    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_seq_max=2, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        runner = SlotRunner(scheduler)
        handed_over: list[int] = []
        post = runner._post
        runner._post = lambda job, kind, value: (handed_over.append(kind), post(job, kind, value))[1]

        flag_set = threading.Event()

        def start(s: Any) -> Any:   # (on the preparing thread: after the test has set wants_items)
            assert flag_set.wait(30)
            return s.create([{"role": "user", "content": "Name a colour."}],
                            params=GenerationParams(greedy=True, max_tokens=12, logit_bias=no_end(engine)))

        async def run(streamed: bool) -> tuple[int, Any]:
            job = runner.submit(start, lambda stream: stream.completion())
            job.wants_items = streamed
            flag_set.set()
            items = [item async for item in job]
            return len(items), job.result

        try:
            handed_over.clear()
            n_streamed, streamed = asyncio.run(run(True))
            streamed_posts = len(handed_over)
            handed_over.clear()
            flag_set.clear()
            n_whole, whole = asyncio.run(run(False))
            assert n_streamed >= 12 and streamed_posts >= 13
            assert n_whole == 0 and len(handed_over) == 1   # its end alone
            assert whole.text == streamed.text and whole.content == streamed.content
        finally:
            runner.close()
            scheduler.close()


def test_the_scheduler_is_a_chat_backend(smollm2_path: Path) -> None:
    """The scheduler keeps the contract its engine keeps (engine/backend.py, issue 41): the same
    template and tokens, the sampling keywords of create(), one slot's share of the context as its
    n_ctx, cancel() ending every request, waiting or on a slot, and the asyncio face over it."""
    import asyncio

    from llamact import AsyncLlamaEngine, StopReason

    ask = [{"role": "user", "content": "Hi"}]
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=1024, n_seq_max=2, n_threads=2)) as engine:
        scheduler = BatchScheduler(engine)
        try:
            assert scheduler.chat_template(ask).prompt == engine.chat_template(ask).prompt
            assert scheduler.tokenize("Hello") == engine.tokenize("Hello")
            assert scheduler.prompt_length(ChatRequest(ask)) == engine.prompt_length(ChatRequest(ask))
            assert (scheduler.n_ctx, scheduler.n_threads, scheduler.model_name) == \
                (engine.n_ctx_seq, engine.n_threads, engine.model_name) and scheduler.n_ctx == 512
            # sampling keywords, as create() takes them (the scheduler's slots answer as one engine)
            reply = scheduler.create(ask, max_tokens=3, greedy=True).completion()
            assert reply.usage.completion_tokens == 3 and reply.finish_reason == "length"

            async def streamed() -> str:
                pieces = [c.content or "" async for c in AsyncLlamaEngine(scheduler).create(ask, max_tokens=3,
                                                                                            greedy=True)]
                return "".join(pieces)
            assert asyncio.run(streamed()) == reply.content

            long = GenerationParams(greedy=True, max_tokens=-1, logit_bias=no_end(engine))
            running = [scheduler.generate("Once upon a time", long) for _ in range(3)]   # 2 slots, 1 waits
            next(running[0])
            scheduler.cancel()
            for stream in running:   # each ends: its reader is not left waiting
                assert all(chunk.stop_reason in (None, StopReason.CANCELLED) for chunk in stream)
            assert scheduler.n_active == 0 and scheduler.n_waiting == 0
            assert scheduler.create(ask, max_tokens=2, greedy=True).completion().finish_reason == "length"
        finally:
            scheduler.close()
