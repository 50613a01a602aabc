"""Random-weight multimodal projectors (mmproj GGUFs) for a text model, written with ``gguf``.

    python -m llamact.parity.projectors --model smollm2 mmproj.gguf          # a CLIP "mlp" projector
    write_projector(path, n_embd_text=576, kind="mlp", seed=0)

No vision or audio model ships on the package registries, so the media tests and the README's
example make their own projector: mtmd loads it, the text model decodes its embeddings, and the
output is meaningless -- what the tests compare is llamact against llama-server on the same files.

Kinds (each the smallest file mtmd's loader at the pin accepts for that projector type):

- ``mlp``: LLaVA's CLIP projector (``clip.projector_type=mlp``): a 2-block ViT over 32x32 images in
  8x8 patches (16 image tokens), then a 2-layer MLP to the text model's embedding width.
- ``gemma3``: Gemma 3's projector (``gemma3``): a 2-block ViT, the patches average-pooled 2x2, an
  RMS norm and one projection (4 image tokens); mtmd wraps them in the model's image tokens.
- ``qwen2a``: Qwen2-Audio's projector (audio): a Whisper-style encoder (two 1-D convolutions over 128
  mel bins, 2 blocks, 16 kHz audio in 30-second windows: 750 tokens each) and one projection; mtmd
  wraps each clip in ``<|audio_bos|>`` / ``<|audio_eos|>`` (text to a model that lacks them).

What enters: the text model's embedding width (its ``<arch>.embedding_length``; ``--model`` reads it
from the GGUF). What leaves: the file. Raises ``ValueError`` for an unknown kind. Needs the ``gguf``
package (the test extra installs it; without it, a ``LlamaException`` says ``pip install gguf``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LlamaException

__all__ = ["KINDS", "embedding_width", "write_projector"]

KINDS = ("mlp", "gemma3", "qwen2a")
_N_EMBD = 64      # the vision encoder's width
_N_FF = 128
_N_BLOCKS = 2
_N_HEAD = 4


def _gguf() -> Any:
    """The ``gguf`` package (llama.cpp's GGUF writer), which llamact itself does not need."""
    try:
        import gguf
    except ImportError:
        raise LlamaException("writing a projector needs the gguf package (llama.cpp's GGUF writer), which "
                             "llamact does not install: pip install gguf") from None
    return gguf


def embedding_width(model_path: str | Path) -> int:
    """The text model's embedding width, read from its GGUF (what the projection must output)."""
    gguf = _gguf()

    reader = gguf.GGUFReader(str(model_path))
    arch = _field_text(reader, "general.architecture")
    field = reader.fields[f"{arch}.embedding_length"]
    return int(field.parts[field.data[0]][0])


def _field_text(reader: object, key: str) -> str:
    field = reader.fields[key]   # type: ignore[attr-defined]
    return bytes(field.parts[field.data[0]]).decode()


def write_projector(path: str | Path, n_embd_text: int, kind: str = "mlp", seed: int = 0,
                    image_size: int | None = None) -> Path:
    """Write a random-weight projector of ``kind`` whose output width is ``n_embd_text``; ``image_size``
    (a multiple of the patch size: 8 for mlp, 32 for gemma3) sets a vision projector's input size."""
    gguf = _gguf()

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    rng = np.random.default_rng(seed)
    path = Path(path)
    if kind == "qwen2a":
        return _write_audio_projector(path, n_embd_text, rng)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("general.name", f"llamact random {kind} projector")
    writer.add_string("clip.projector_type", kind)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    image_size, patch = (image_size or 32, 8) if kind == "mlp" else (image_size or 64, 16)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", patch)
    writer.add_uint32("clip.vision.embedding_length", _N_EMBD)
    writer.add_uint32("clip.vision.feed_forward_length", _N_FF)
    writer.add_uint32("clip.vision.block_count", _N_BLOCKS)
    writer.add_uint32("clip.vision.attention.head_count", _N_HEAD)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.vision.projection_dim", n_embd_text)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    if kind == "gemma3":
        writer.add_uint32("clip.vision.projector.scale_factor", 2)

    def tensor(name: str, *shape: int, scale: float = 0.05, ones: bool = False) -> None:
        # numpy shape is ggml's ne reversed: (out, in) for a matrix applied to an `in` vector
        data = np.ones(shape, np.float32) if ones else rng.normal(0.0, scale, shape).astype(np.float32)
        writer.add_tensor(name, data)

    n_patches = (image_size // patch) ** 2
    tensor("v.patch_embd.weight", _N_EMBD, 3, patch, patch)
    tensor("v.patch_embd.bias", _N_EMBD)
    tensor("v.position_embd.weight", n_patches, _N_EMBD)
    for i in range(_N_BLOCKS):
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(f"v.blk.{i}.{part}.weight", _N_EMBD, _N_EMBD)
            tensor(f"v.blk.{i}.{part}.bias", _N_EMBD)
        for norm in ("ln1", "ln2"):
            tensor(f"v.blk.{i}.{norm}.weight", _N_EMBD, ones=True)
            tensor(f"v.blk.{i}.{norm}.bias", _N_EMBD, scale=0.01)
        tensor(f"v.blk.{i}.ffn_up.weight", _N_FF, _N_EMBD)
        tensor(f"v.blk.{i}.ffn_up.bias", _N_FF)
        tensor(f"v.blk.{i}.ffn_down.weight", _N_EMBD, _N_FF)
        tensor(f"v.blk.{i}.ffn_down.bias", _N_EMBD)
    if kind == "mlp":
        tensor("mm.0.weight", n_embd_text, _N_EMBD)
        tensor("mm.0.bias", n_embd_text)
        tensor("mm.2.weight", n_embd_text, n_embd_text)
        tensor("mm.2.bias", n_embd_text)
    else:
        tensor("v.post_ln.weight", _N_EMBD, ones=True)
        tensor("v.post_ln.bias", _N_EMBD, scale=0.01)
        tensor("mm.soft_emb_norm.weight", _N_EMBD, ones=True)
        tensor("mm.input_projection.weight", _N_EMBD, n_embd_text)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _write_audio_projector(path: Path, n_embd_text: int, rng: np.random.Generator) -> Path:
    import gguf

    n_mel, n_pos = 128, 1500   # Whisper's mel bins and positions (3000 frames of a 30 s window, halved)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("general.name", "llamact random qwen2a projector")
    writer.add_string("clip.projector_type", "qwen2a")
    writer.add_bool("clip.has_audio_encoder", True)
    writer.add_uint32("clip.audio.num_mel_bins", n_mel)
    writer.add_uint32("clip.audio.embedding_length", _N_EMBD)
    writer.add_uint32("clip.audio.feed_forward_length", _N_FF)
    writer.add_uint32("clip.audio.block_count", _N_BLOCKS)
    writer.add_uint32("clip.audio.attention.head_count", _N_HEAD)
    writer.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.audio.projection_dim", n_embd_text)

    def tensor(name: str, *shape: int, scale: float = 0.05, ones: bool = False) -> None:
        data = np.ones(shape, np.float32) if ones else rng.normal(0.0, scale, shape).astype(np.float32)
        writer.add_tensor(name, data)

    tensor("a.conv1d.1.weight", _N_EMBD, n_mel, 3)
    tensor("a.conv1d.1.bias", _N_EMBD, 1)
    tensor("a.conv1d.2.weight", _N_EMBD, _N_EMBD, 3)
    tensor("a.conv1d.2.bias", _N_EMBD, 1)
    tensor("a.position_embd.weight", n_pos, _N_EMBD)
    for i in range(_N_BLOCKS):
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(f"a.blk.{i}.{part}.weight", _N_EMBD, _N_EMBD)
            if part != "attn_k":   # Whisper's key projection has no bias
                tensor(f"a.blk.{i}.{part}.bias", _N_EMBD)
        for norm in ("ln1", "ln2"):
            tensor(f"a.blk.{i}.{norm}.weight", _N_EMBD, ones=True)
            tensor(f"a.blk.{i}.{norm}.bias", _N_EMBD, scale=0.01)
        tensor(f"a.blk.{i}.ffn_up.weight", _N_FF, _N_EMBD)
        tensor(f"a.blk.{i}.ffn_up.bias", _N_FF)
        tensor(f"a.blk.{i}.ffn_down.weight", _N_EMBD, _N_FF)
        tensor(f"a.blk.{i}.ffn_down.bias", _N_EMBD)
    tensor("a.post_ln.weight", _N_EMBD, ones=True)
    tensor("a.post_ln.bias", _N_EMBD, scale=0.01)
    tensor("mm.a.fc.weight", n_embd_text, _N_EMBD)
    tensor("mm.a.fc.bias", n_embd_text)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="where to write the projector GGUF")
    parser.add_argument("--model", default="smollm2",
                        help="the text model: smollm2, gemma3 (the bundled ones) or a GGUF path")
    parser.add_argument("--kind", choices=KINDS, default="mlp")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.model in ("smollm2", "gemma3"):
        from .. import models

        model_path = models.smollm2_path() if args.model == "smollm2" else models.gemma3_path()
    else:
        model_path = Path(args.model)
    out = write_projector(args.out, embedding_width(model_path), args.kind, args.seed)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
