"""Images and audio against upstream's own llama-server (built from the vendored tree, ``--mmproj``
with the same random projector): for the same model, projector and media, the rendered prompt
(``/apply-template``), the prompt's token count (``usage.prompt_tokens``: a medium counts as the
embeddings it becomes) and the greedy reply token by token (its logprobs entries) are llama-server's.

The projectors are random, so the replies mean nothing; what is compared is that llamact feeds the
model the same tokens and embeddings at the same positions as llama-server. llama-server renders its
random media marker unless ``LLAMA_MEDIA_MARKER`` pins it; the harness pins mtmd's default, which is
what llamact shows."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from media_helpers import engine_params, noise_image

from llamact import LlamaEngine
from llamact.json_types import Json
from llamact.parity.llama_server import LlamaServer, ServerConfig, find_llama_server

pytestmark = [pytest.mark.parity, pytest.mark.model, pytest.mark.slow]

MAX_TOKENS = 10


def _jpeg_part(data: bytes) -> Json:
    return {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(data).decode()}}


def _vision_requests(jpeg: bytes) -> dict[str, list[Json]]:
    return {
        "text_then_image": [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                                          noise_image(1)]}],
        "jpeg_then_text": [{"role": "user", "content": [_jpeg_part(jpeg), {"type": "text", "text": "Describe it."}]}],
        "two_images_two_turns": [
            {"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": [{"type": "text", "text": "Compare"}, noise_image(2),
                                         {"type": "text", "text": "with"}, noise_image(3, 24, 24)]},
            {"role": "assistant", "content": "They look alike."},
            {"role": "user", "content": "Why?"},
        ],
    }


def _server(model: Path, mmproj: Path) -> LlamaServer:
    return LlamaServer(ServerConfig(model, n_ctx=4096, extra_args=("--mmproj", str(mmproj))), find_llama_server())


def _upstream_answer(server: LlamaServer, messages: list[Json]) -> tuple[str, Json, list[str]]:
    prompt = server.post("/apply-template", {"messages": messages})["prompt"]
    reply = server.post("/v1/chat/completions", {"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0,
                                                 "cache_prompt": False, "logprobs": True})
    tokens = [entry["token"] for entry in reply["choices"][0]["logprobs"]["content"]]
    return prompt, reply["usage"], tokens


def _llamact_answer(engine: LlamaEngine, messages: list[Json]) -> tuple[str, Json, list[str]]:
    prompt = engine.chat_template(messages).prompt
    reply = engine.complete_chat(messages, max_tokens=MAX_TOKENS, temperature=0, cache_prompt=False, logprobs=True)
    tokens = [entry.token for entry in reply.logprobs or []]
    usage = {"completion_tokens": reply.usage.completion_tokens, "prompt_tokens": reply.usage.prompt_tokens}
    return prompt, usage, tokens


def _compare(server: LlamaServer, engine: LlamaEngine, messages: list[Json]) -> None:
    want_prompt, want_usage, want_tokens = _upstream_answer(server, messages)
    prompt, usage, tokens = _llamact_answer(engine, messages)
    assert prompt == want_prompt
    assert usage["prompt_tokens"] == want_usage["prompt_tokens"]
    assert usage["completion_tokens"] == want_usage["completion_tokens"]
    assert tokens == want_tokens


@pytest.fixture(scope="module")
def smollm2_vision(smollm2_path: Path, projectors: dict[str, Path]) -> Iterator[tuple[LlamaServer, LlamaEngine]]:
    with _server(smollm2_path, projectors["smollm2"]) as server, \
            LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2"])) as engine:
        yield server, engine


@pytest.mark.parametrize("name", ["text_then_image", "jpeg_then_text", "two_images_two_turns"])
def test_images_equal_llama_server(name: str, smollm2_vision: tuple[LlamaServer, LlamaEngine],
                                   mtmd_samples: dict[str, bytes]) -> None:
    server, engine = smollm2_vision
    _compare(server, engine, _vision_requests(mtmd_samples["jpeg"])[name])


def test_gemma3_projector_equals_llama_server(gemma3_path: Path, projectors: dict[str, Path]) -> None:
    """Gemma 3's own projector type: image tokens wrapped in the model's <start_of_image> tokens and
    decoded with non-causal attention."""
    messages = [{"role": "user", "content": [noise_image(4, 64, 64), {"type": "text", "text": "What is this?"}]}]
    with _server(gemma3_path, projectors["gemma3"]) as server, \
            LlamaEngine.load(gemma3_path, engine_params(projectors["gemma3"])) as engine:
        _compare(server, engine, messages)


def test_audio_equals_llama_server(smollm2_path: Path, projectors: dict[str, Path],
                                   mtmd_samples: dict[str, bytes]) -> None:
    """An MP3 clip through a Whisper-style audio projector (qwen2a)."""
    clip = base64.b64encode(mtmd_samples["mp3"]).decode()
    messages = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": clip, "format": "mp3"}},
                                             {"type": "text", "text": "What is said?"}]}]
    with _server(smollm2_path, projectors["smollm2_audio"]) as server, \
            LlamaEngine.load(smollm2_path, engine_params(projectors["smollm2_audio"])) as engine:
        assert engine.supports_audio and not engine.supports_vision
        _compare(server, engine, messages)
