"""BFCL v4's questions, function docs and possible answers, read from the ``bfcl-eval`` wheel.

The wheel (Apache-2.0) is fetched once with ``pip download --no-deps bfcl-eval==VERSION`` into
``$LLAMACT_CACHE/bfcl``; its harness is not installed (it pulls in the whole leaderboard: API
clients, vLLM...). Only ``bfcl_eval/data/BFCL_v4_<category>.json`` and
``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json`` are read, straight from the zip.

Each entry is prepared as BFCL's own loader and OpenAI function-calling handler prepare it
(``utils.load_dataset_entry`` with its language hint, ``model_handler.utils.convert_to_tool`` in the
OpenAI style): the description gains " Note that the provided function is in Python 3 syntax.",
names lose their dots (OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``; BFCL scores such models with the same
``.`` -> ``_`` mapping), and BFCL's Python-flavoured types become JSON Schema (``GORILLA_TO_OPENAPI``:
dict -> object, float -> number with ``format: float`` and a sentence saying so, tuple -> array,
any -> string: BFCL's own mapping, and its checker expects a string for ``any``).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BFCL_VERSION = "2026.3.23"
CATEGORIES = ("simple_python", "multiple", "parallel")
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."

# bfcl_eval/constants/type_mappings.py
GORILLA_TO_OPENAPI = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
    "tuple": "array", "any": "string", "byte": "integer", "short": "integer", "long": "integer",
    "double": "number", "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object",
    "Hashtable": "object", "Queue": "array", "Stack": "array", "Any": "string", "String": "string",
    "Bigint": "integer",
}


@dataclass
class Entry:
    """One BFCL question, ready to send and to score (names already ``.`` -> ``_``)."""

    id: str
    category: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]       # BFCL's docs (its types), for the scorer
    tools: list[dict[str, Any]]           # OpenAI tools (JSON Schema), for the request
    possible_answer: list[dict[str, Any]]


def wheel_path(cache: Path | None = None) -> Path:
    """The bfcl-eval wheel, downloaded into the cache the first time (pip, the user's index)."""
    folder = cache or Path(os.environ.get("LLAMACT_CACHE") or Path.home() / ".cache" / "llamact") / "bfcl"
    found = sorted(folder.glob(f"bfcl_eval-{BFCL_VERSION}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                           "-d", str(folder), f"bfcl-eval=={BFCL_VERSION}"], capture_output=True, text=True)
    found = sorted(folder.glob(f"bfcl_eval-{BFCL_VERSION}-*.whl"))
    if proc.returncode != 0 or not found:
        raise SystemExit(f"could not download bfcl-eval=={BFCL_VERSION} with pip:\n{proc.stderr[-2000:]}\n"
                         f"download it by hand (pip download --no-deps -d DIR bfcl-eval=={BFCL_VERSION}) "
                         "and pass --bfcl-wheel DIR/bfcl_eval-...whl")
    return found[0]


def _read_jsonl(z: zipfile.ZipFile, member: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in z.read(member).decode("utf-8").splitlines() if line.strip()]


def load(wheel: Path, category: str) -> list[Entry]:
    with zipfile.ZipFile(wheel) as z:
        questions = _read_jsonl(z, f"bfcl_eval/data/BFCL_v4_{category}.json")
        answers = {a["id"]: a["ground_truth"] for a in
                   _read_jsonl(z, f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")}
    entries = []
    for q in questions:
        functions = [_underscored(f) for f in python_hinted(q["function"])]
        entries.append(Entry(id=q["id"], category=category, messages=q["question"][0], functions=functions,
                             tools=[{"type": "function", "function": f} for f in to_openai(functions)],
                             possible_answer=[{_dotless(k): v for k, v in call.items()} for call in answers[q["id"]]]))
    return entries


def python_hinted(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's ``_func_doc_language_specific_pre_processing`` for Python: the hint sentence only."""
    out = copy.deepcopy(functions)
    for f in out:
        f["description"] = f.get("description", "") + PYTHON_HINT
    return out


def _dotless(name: str) -> str:
    return re.sub(r"\.", "_", name)


def _underscored(function: dict[str, Any]) -> dict[str, Any]:
    return {**function, "name": _dotless(function["name"])}


def to_openai(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's ``convert_to_tool(functions, GORILLA_TO_OPENAPI, OPENAI_COMPLETIONS)``: the parameters
    become an object schema and every property's type is mapped (``_cast_to_openai_type``)."""
    out = copy.deepcopy(functions)
    for f in out:
        f["name"] = _dotless(f["name"])
        f["parameters"]["type"] = "object"
        f["parameters"]["properties"] = cast_properties(f["parameters"]["properties"])
    return out


def cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """``_cast_to_openai_type``: list of any, list of list of any, list of dict, dict of any."""
    for value in properties.values():
        kind = value.get("type")
        if kind is None:
            value["type"] = "string"
        else:
            if kind == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = GORILLA_TO_OPENAPI.get(kind, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = cast_properties(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = GORILLA_TO_OPENAPI[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = GORILLA_TO_OPENAPI[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = cast_properties(items["properties"])
    return properties
