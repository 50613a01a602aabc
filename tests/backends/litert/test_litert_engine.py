"""LlamaEngine's surface on a .litertlm bundle (the tiny random-weight one): loading by suffix, the
conversation path and the rendered path giving the same text and parse, cancellation, limits and
stop strings, sessions that trim, structured output and the early refusals, the bad inputs, and
the command line. The model's words are nonsense; the tests compare paths, never a text."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from litert_bundles import needs_runtime

from llamact import (
    ChatSession,
    LlamaContextException,
    LlamaEngine,
    LlamaModelException,
    LlamaStateException,
    LlamaUnsupportedException,
    StopReason,
)
from llamact.engine import LitertEngine
from llamact.engine.speculative import SpeculativeParams

pytestmark = needs_runtime

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
SAMPLED = {"seed": 7, "temperature": 1.0, "top_k": 40, "top_p": 0.95}
# a template that thinks first (its generation prompt opens a thought): llamact's parser splits it
THINKING = ("{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' -}}"
            "{%- if m['role'] == 'assistant' and m.get('reasoning_content') -%}"
            "{{- '<think>\\n' + m['reasoning_content'] + '\\n</think>\\n\\n' -}}{%- endif -%}"
            "{{- m['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
            "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}")


def _reply(engine: LlamaEngine, messages: list[dict], **options: object) -> tuple[str, list, object]:
    stream = engine.create(messages, **options)
    chunks = list(stream)
    return stream.generation.path, chunks, stream.completion()


def test_load_picks_the_litert_engine_by_suffix(tiny_engine: LlamaEngine, tiny_bundle: Path) -> None:
    # a sibling of LlamaEngine, not a subclass (issue 41): the loader picks it, isinstance tells them apart
    assert isinstance(tiny_engine, LitertEngine) and not isinstance(tiny_engine, LlamaEngine)
    assert tiny_engine.n_ctx == 512 and tiny_engine.model_name == tiny_bundle.name
    assert tiny_engine.speculator is None and not tiny_engine.supports_vision   # what the server reads
    metadata = tiny_engine.get_metadata()
    assert metadata["general.architecture"] == "litert-lm" and metadata["litert.model_type"] == "generic"
    assert metadata["tokenizer.chat_template"].startswith("{% for message in messages %}")
    assert tiny_engine.tokenize("<|im_start|>user") == [tiny_engine.bos_token_id, 1, 4093]
    assert tiny_engine.detokenize(tiny_engine.tokenize("Hello world", add_special=False)) == "Hello world"


@pytest.mark.parametrize("template", [None, THINKING], ids=["bundle", "thinking"])
def test_the_conversation_path_and_the_rendered_path_give_the_same_text_and_parse(tiny_bundle: Path,
                                                                                  template: str | None) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        source = engine.templates().default.source
        conv_path, conv_chunks, conv = _reply(engine, USER, max_tokens=16, **SAMPLED)
        rend_path, rend_chunks, rend = _reply(engine, USER, max_tokens=16, custom_template=source, **SAMPLED)
    assert (conv_path, rend_path) == ("conversation", "rendered")
    assert conv.text == rend.text and conv.text                       # the same tokens
    assert conv.message == rend.message                                # the same parse
    assert conv.usage == rend.usage and conv.usage.completion_tokens == 16 and conv.finish_reason == "length"
    streamed = "".join(c.thinking or "" for c in conv_chunks), "".join(c.content or "" for c in conv_chunks)
    assert streamed == ("".join(c.thinking or "" for c in rend_chunks), "".join(c.content or "" for c in rend_chunks))
    if template is THINKING:   # the reply went to the thought, as the template's format says
        assert conv.message.reasoning_content and not conv.content
        assert streamed[0] == conv.message.reasoning_content


def test_a_second_request_after_a_reply_and_seeds(tiny_engine: LlamaEngine) -> None:
    first = tiny_engine.complete_chat(USER, max_tokens=8, **SAMPLED)
    again = tiny_engine.complete_chat(USER, max_tokens=8, **SAMPLED)
    other = tiny_engine.complete_chat(USER, max_tokens=8, **{**SAMPLED, "seed": 8})
    assert first.text == again.text != other.text


def test_cancel_from_another_thread_ends_the_stream(tiny_engine: LlamaEngine) -> None:
    stream = tiny_engine.create(USER, max_tokens=400, **SAMPLED)
    seen = 0
    for _chunk in stream:
        seen += 1
        if seen == 3:
            threading.Thread(target=tiny_engine.cancel).start()
    reply = stream.completion()
    assert reply.finish_reason == "cancelled" and reply.usage.completion_tokens < 400
    assert tiny_engine.complete_chat(USER, max_tokens=4, **SAMPLED).usage.completion_tokens == 4  # usable after


def test_a_stream_closed_early_frees_the_engine(tiny_engine: LlamaEngine) -> None:
    stream = tiny_engine.create(USER, max_tokens=400, **SAMPLED)
    next(stream), next(stream)
    with pytest.raises(LlamaStateException, match="already generating"):
        tiny_engine.create(USER, max_tokens=4)
    stream.close()
    assert tiny_engine.complete_chat(USER, max_tokens=3, **SAMPLED).finish_reason in ("length", "stop")


def test_stop_strings_end_the_reply_where_they_appear(tiny_engine: LlamaEngine) -> None:
    text = tiny_engine.complete_chat(USER, max_tokens=20, **SAMPLED).text
    stop = text[10:14]
    reply = tiny_engine.complete_chat(USER, max_tokens=20, stop=[stop], **SAMPLED)
    assert reply.text == text[:text.index(stop)] and reply.finish_reason == "stop"


def test_a_raw_prompt_completes_through_the_runtime(tiny_engine: LlamaEngine) -> None:
    prompt = tiny_engine.chat_template(USER).prompt
    result = tiny_engine.complete(prompt, max_tokens=16, **SAMPLED)
    assert result.text == tiny_engine.complete_chat(USER, max_tokens=16, **SAMPLED).text
    assert result.stop_reason is StopReason.MAX_TOKENS


def test_a_session_trims_its_history_to_the_context(tiny_bundle: Path) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=160, n_threads=1) as engine:
        session = ChatSession(engine, system_prompt="Be brief.", params=None)
        for i in range(8):
            session.add_message({"role": "user", "content": f"Question {i}: tell me about the number {i} at length."})
            session.add_message({"role": "assistant", "content": f"The number {i} is a number, and that is all."})
        reply = session.send("And the number 9?", max_tokens=16, **SAMPLED)
        assert session.last_request_fit_context and session.last_request_dropped > 0
        assert reply.usage.prompt_tokens + 16 <= 160
        assert session.history[-1]["role"] == "assistant" and len(session.history) == 18
        with pytest.raises(LlamaContextException):
            session.send("word " * 200, max_tokens=16)


def test_structured_output_uses_the_runtime_constraint(tiny_engine: LlamaEngine) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "size": {"enum": ["S", "M", "L"]}},
              "required": ["ok", "size"], "additionalProperties": False}
    answer = tiny_engine.create_structured(USER, schema, max_tokens=40, **SAMPLED)
    assert set(answer) == {"ok", "size"} and isinstance(answer["ok"], bool) and answer["size"] in ("S", "M", "L")
    session = ChatSession(tiny_engine)
    assert session.create_structured("Answer.", schema, max_tokens=40, **SAMPLED)["size"] in ("S", "M", "L")


@pytest.mark.parametrize(("options", "match"), [
    ({"grammar": 'root ::= "yes"'}, "GBNF"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}}}, "named tool_choice"),
    ({"min_p": 0.2}, "min_p"),
    ({"mirostat": 2}, "mirostat"),
    ({"logprobs": True}, "probabilities"),
    ({"thinking_budget_tokens": 8, "custom_template": "{{ messages[0]['content'] }}"}, "thinking_budget_tokens"),
])
def test_what_the_runtime_cannot_do_fails_before_generating(tiny_engine: LlamaEngine, options: dict,
                                                           match: str) -> None:
    with pytest.raises(LlamaUnsupportedException, match=match):
        tiny_engine.create(USER, **options)
    assert tiny_engine.complete_chat(USER, max_tokens=2, **SAMPLED).finish_reason is not None   # nothing left reserved


def test_a_strict_format_the_conversation_cannot_take_fails_early(tiny_engine: LlamaEngine) -> None:
    with pytest.raises(LlamaUnsupportedException, match="response_format"):
        tiny_engine.create(USER + [{"role": "assistant", "content": "{"}], continue_final_message=True,
                           response_format={"type": "json_object"})


@pytest.mark.parametrize("method,args", [("embed", ("hi",)), ("set_lora", ("x.gguf",)), ("save_state", ("s",)),
                                         ("logits", ()), ("prepare_chat", (None,))])
def test_what_needs_llama_cpp_says_so(tiny_engine: LlamaEngine, method: str, args: tuple) -> None:
    with pytest.raises(LlamaUnsupportedException, match=f"{method} needs llama.cpp"):
        getattr(tiny_engine, method)(*args)
    with pytest.raises(AttributeError):   # no llama.cpp objects behind it (it inherits nothing)
        tiny_engine.model  # type: ignore[attr-defined]  # noqa: B018


def test_a_closed_engine_refuses_use(tiny_bundle: Path) -> None:
    engine = LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1)
    stream = engine.create(USER, max_tokens=400, **SAMPLED)
    next(stream)
    engine.close()   # cancels the generation; the runtime is freed when the stream lets go
    assert stream.completion().finish_reason == "cancelled"
    assert engine.closed
    with pytest.raises(LlamaStateException, match="closed"):
        engine.create(USER)


def test_bad_bundles_and_options_are_typed(tmp_path: Path, tiny_bundle: Path) -> None:
    truncated = tmp_path / "cut.litertlm"
    truncated.write_bytes(tiny_bundle.read_bytes()[: 3_000_000])
    with pytest.raises(LlamaModelException, match="truncated"):
        LlamaEngine.load(truncated)
    with pytest.raises(LlamaModelException, match="no model file"):
        LlamaEngine.load(tmp_path / "missing.litertlm")
    with pytest.raises(LlamaUnsupportedException, match="parallel sequences.*n_seq_max"):
        LlamaEngine.load(tiny_bundle, n_seq_max=2)
    with pytest.raises(LlamaUnsupportedException, match="speculative decoding"):
        LlamaEngine.load(tiny_bundle, speculative=SpeculativeParams(types=("ngram-simple",)))


def test_a_missing_or_unsupported_runtime_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                              tiny_bundle: Path) -> None:
    from llamact.backends.litert import runtime

    monkeypatch.setattr(runtime, "runtime_version", lambda: None)
    with pytest.raises(LlamaUnsupportedException, match=r"pip install 'llamact\[litert\]'"):
        LlamaEngine.load(tiny_bundle)
    monkeypatch.setattr(runtime, "runtime_version", lambda: "0.17.2")
    with pytest.raises(LlamaUnsupportedException, match="0.17.2 is installed.*supports 0.18"):
        LlamaEngine.load(tiny_bundle)


def test_llamact_chat_runs_a_bundle(tiny_bundle: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "llamact", "chat", "-m", str(tiny_bundle), "-p", "Hello", "-n", "6",
                           "--seed", "3", "-t", "1", "-c", "512"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("> Hello\n") and len(done.stdout) > len("> Hello\n\n")
    bad = subprocess.run([sys.executable, "-m", "llamact", "chat", "-m", str(tiny_bundle), "-p", "Hi", "--min-p", "0.3",
                          "-t", "1"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "min_p" in bad.stderr and "Traceback" not in bad.stderr


def test_the_tiny_bundle_is_what_the_script_builds() -> None:
    """The committed bundle's provenance: the build script names it, and its metadata is the export's."""
    script = Path(__file__).parents[3] / "scripts" / "litert" / "build_bundles.py"
    assert '"smollm2-tiny-random.litertlm"' in script.read_text()
    from llamact.backends.litert import read_bundle

    info = read_bundle(Path(__file__).parent / "data" / "smollm2-tiny-random.litertlm")
    assert json.dumps(info.system_metadata.get("Authors")) == '"ODML"'


def test_the_async_engine_and_complete_chat_run_a_bundle(tiny_bundle: Path) -> None:
    import asyncio

    from llamact import AsyncLlamaEngine

    async def run() -> tuple[str, str]:
        async with await AsyncLlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1) as engine:
            pieces = [c.content or "" async for c in engine.create(USER, max_tokens=8, **SAMPLED)]
            whole = await engine.complete_chat(USER, max_tokens=8, **SAMPLED)
            return "".join(pieces), whole.content

    streamed, whole = asyncio.run(run())
    assert streamed == whole and whole
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1) as engine:
        assert engine.complete_chat(USER, max_tokens=8, **SAMPLED).content == whole


def test_every_name_of_llama_engine_answers_or_refuses_typed(tiny_engine: LitertEngine) -> None:
    """Code that takes either engine reads LlamaEngine's names (tests/test_architecture.py checks
    that each exists here): each answers, or is llama.cpp's alone and raises LlamaUnsupportedException
    naming itself -- exactly the LlamaCppOnly ones."""
    import inspect

    from llamact.engine.litert_engine import LlamaCppOnly

    refused = set()
    for name in dir(LlamaEngine):
        if name.startswith("_") or isinstance(inspect.getattr_static(LlamaEngine, name), classmethod):
            continue
        try:
            getattr(tiny_engine, name)
        except LlamaUnsupportedException as exc:
            assert exc.details["method"] == name
            refused.add(name)
    assert refused == {name for name, value in vars(LitertEngine).items() if isinstance(value, LlamaCppOnly)}
    assert tiny_engine.loras == {} and tiny_engine.context_tokens == () and tiny_engine.clear_cache() == 0


def _pieces(engine: LlamaEngine, **options: object) -> list[str]:
    """The runtime's streamed pieces (one per token) of a reply, unparsed."""
    with engine.create(USER, **options) as stream:
        return [chunk.text for chunk in stream.generation if chunk.text]


def test_token_bans_and_repetition_penalties_reach_the_runtime(tiny_engine: LlamaEngine) -> None:
    from collections import Counter

    plain = _pieces(tiny_engine, max_tokens=12, temperature=0)
    piece, count = Counter(plain).most_common(1)[0]
    ids = tiny_engine.tokenize(piece, add_special=False)
    assert len(ids) == 1, "the most frequent piece is one token"
    banned = _pieces(tiny_engine, max_tokens=12, temperature=0, logit_bias={ids[0]: float("-inf")})
    assert piece not in banned and len(banned) == 12
    if count > 1:   # the greedy answer repeats a token: a strong penalty changes it
        assert _pieces(tiny_engine, max_tokens=12, temperature=0, repeat_penalty=3.0) != plain
    with pytest.raises(LlamaUnsupportedException, match="conversation"):   # a rendered prompt cannot take them
        tiny_engine.complete_chat(USER, max_tokens=4, repeat_penalty=3.0, custom_template="{{ 'x' }}")
