#!/usr/bin/env python3
"""A GGUF cut to its first N layers (the bundled SmolLM2 by default): a real tokenizer, embeddings and
a few real layers in ~40 MB, for a GPU check where the whole model cannot travel. Its text is
nonsense; what a backend check compares is the same tokens from two builds.

    python scripts/device/cut_model.py out.gguf --layers 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def cut(source: Path, out: Path, layers: int) -> Path:
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    writer = gguf.GGUFWriter(str(out), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind = field.types[0]
        if name == f"{arch}.block_count":
            writer.add_uint32(name, layers)
        elif kind == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            values = ([bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
                      if sub == gguf.GGUFValueType.STRING else [field.parts[i].tolist()[0] for i in field.data])
            writer.add_key_value(name, values, kind, sub_type=sub)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_key_value(name, bytes(field.parts[field.data[0]]).decode("utf-8", errors="surrogateescape"),
                                 kind)
        else:
            writer.add_key_value(name, field.parts[field.data[0]].tolist()[0], kind)
    for tensor in reader.tensors:
        if tensor.name.startswith("blk.") and int(tensor.name.split(".")[1]) >= layers:
            continue
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--model", type=Path, help="the GGUF to cut (default: the bundled SmolLM2)")
    args = parser.parse_args()
    if args.model is None:
        from llamact.models import smollm2_path

        args.model = smollm2_path()
    print(cut(args.model, args.out, args.layers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
