"""Which models a server offers, each with its own settings: one model (``-m``), or router mode's
catalogue from ``--models-dir``, ``--models-preset`` (llama-server's INI) and a config file's ``models``.

    catalogue = read_catalogue(flags, config_file)   # .settings: the server's; .models: one ModelSpec each

Router mode is on when ``--models-dir``, ``--models-preset`` or a config file's ``models`` object is
given. The catalogue is then, by model name (a later source adds to an earlier one's entry):

* ``--models-dir DIR``: each ``*.gguf`` in DIR is a model named after the file without ``.gguf``; each
  sub-directory holding one is a model named after the directory (its first shard, ``-00001-of-``,
  when split). Files with ``mmproj`` in their name are companions, not models (llama-server's scan): in
  a model's folder, its multimodal projector.
* ``--models-preset FILE.ini``: llama-server's presets. A section ``[name]`` per model, its keys the
  long flags without dashes (``model = /m.gguf``, ``ctx-size = 8192``, ``n-gpu-layers = 99``, a
  negative flag ``no-slots = true`` too) or the settings' field names; ``[*]`` holds what every model
  gets; ``load-on-startup = true`` loads the model when the server starts.
* the config file's ``"models": {"name": {"model": ..., "ctx_size": ..., "load_on_startup": true}}``.

A model's settings are the command line over ``LLAMACT_*`` over its own entry over ``[*]`` over the
config file's top level (llama-server likewise applies the router's own arguments to every model);
its ``model`` file and its aliases come from its entry alone. Only per-model settings (``options.MODEL``)
may appear in an entry; a server setting there (``port``, ``api_key``, ...) is refused by name.
Raised: ``LlamaException`` naming the file, section and key that are wrong.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import LlamaRequestException
from ..config.options import rows, split_list
from ..config.settings import MODEL_FIELDS, ServerSettings, load_settings, read_config_file

__all__ = ["Catalogue", "ModelSpec", "is_router", "read_catalogue"]

LOAD_ON_STARTUP = "load_on_startup"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class ModelSpec:
    """One model the server offers: its name, its settings, the other names it answers to, where it
    was found, and whether it loads at start."""

    name: str
    settings: ServerSettings
    aliases: tuple[str, ...] = ()
    source: str = "cli"          # "cli", "models_dir", "preset" or "config"
    load_on_startup: bool = False


@dataclass(frozen=True)
class Catalogue:
    """The server's own settings (the network edge, the limits, the router's) and its models; ``router``
    False: the one model of ``-m`` (or the bundled one), always loaded."""

    settings: ServerSettings
    models: tuple[ModelSpec, ...]
    router: bool


def is_router(settings: ServerSettings, config: dict[str, Any]) -> bool:
    return settings.models_dir is not None or settings.models_preset is not None or "models" in config


def _ini_keys() -> dict[str, tuple[str, bool]]:
    """An INI key -> (field, whether the value is negated): every long flag without its dashes, every
    field name, the negative flags."""
    keys: dict[str, tuple[str, bool]] = {}
    for name, row in rows(ServerSettings).items():
        keys[name] = (name, False)
        keys[name.replace("_", "-")] = (name, False)
        for flag in row.flags:
            if flag.startswith("--"):
                keys[flag[2:]] = (name, False)
        for flag in row.negative:
            keys[flag.lstrip("-")] = (name, True)
    keys["load-on-startup"] = keys[LOAD_ON_STARTUP] = (LOAD_ON_STARTUP, False)
    return keys


def _check_keys(values: dict[str, Any], where: str) -> None:
    for key in values:
        if key not in MODEL_FIELDS and key != LOAD_ON_STARTUP:
            what = "is a server setting: give it once, outside the models" if key in rows(ServerSettings) \
                else "is not a setting"
            raise LlamaRequestException(f"{where}: {key!r} {what}")


def read_preset(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """llama-server's preset INI: (what ``[*]`` gives every model, each model's section), by field name."""
    parser = configparser.ConfigParser(interpolation=None, default_section="\x00", strict=True)
    try:
        with path.open(encoding="utf-8") as f:
            parser.read_file(f)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise LlamaRequestException(f"cannot read the models preset {path}: {exc}") from None
    keys = _ini_keys()
    global_values: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for section in parser.sections():
        values: dict[str, Any] = {}
        for key, text in parser.items(section):
            if key == "version":   # reserved by llama-server
                continue
            if key not in keys:
                raise LlamaRequestException(f"{path} [{section}]: option {key!r} is not recognized (the long flags "
                                     "without dashes, e.g. ctx-size, n-gpu-layers, chat-template-file)")
            field, negated = keys[key]
            values[field] = (text.strip().lower() not in _TRUE) if negated else text
        if section == "*":
            global_values = values
        else:
            sections[section] = values
    return global_values, sections


def scan_models_dir(directory: Path) -> dict[str, dict[str, Any]]:
    """``--models-dir``: {name: {"model": path}} (see the module docstring)."""
    if not directory.is_dir():
        raise LlamaRequestException(f"--models-dir: {directory} does not exist or is not a directory")

    def is_model(path: Path) -> bool:
        return path.suffix == ".gguf" and "mmproj" not in path.name and path.is_file()

    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.is_dir():
            files = sorted(p for p in entry.iterdir() if is_model(p))
            shards = [p for p in files if "-00001-of-" in p.name]
            chosen = shards or files
            if chosen:
                found[entry.name] = {"model": str(chosen[0])}
                # a projector beside it is its mmproj (llama-server's scan: the last one listed)
                projectors = sorted(p for p in entry.iterdir() if p.suffix == ".gguf" and "mmproj" in p.name)
                if projectors:
                    found[entry.name]["mmproj"] = str(projectors[-1])
        elif is_model(entry):
            found[entry.name[: -len(".gguf")]] = {"model": str(entry)}
    return found


def _served_name(settings: ServerSettings) -> str:
    return settings.model_name()


def read_catalogue(flags: dict[str, Any], config_file: Path | None = None) -> Catalogue:
    """The server's settings and the models it offers (see the module docstring)."""
    config = read_config_file(config_file) if config_file is not None else {}
    base = load_settings(flags, file_values=config)
    if not is_router(base, config):
        return Catalogue(base, (ModelSpec(_served_name(base), base, base.alias[1:], "cli", True),), router=False)
    for name in ("model", "alias"):
        if flags.get(name) or config.get(name):
            raise LlamaRequestException(f"--{name} names one model; in router mode (--models-dir, --models-preset, "
                                        f"or a config file's models) give each model's {name} in its own entry")
    entries: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    global_values: dict[str, Any] = {}
    if base.models_dir is not None:
        for name, values in scan_models_dir(base.models_dir).items():
            entries[name], sources[name] = values, "models_dir"
    if base.models_preset is not None:
        global_values, sections = read_preset(base.models_preset)
        _check_keys(global_values, f"{base.models_preset} [*]")
        for name, values in sections.items():
            _check_keys(values, f"{base.models_preset} [{name}]")
            entries[name] = {**entries.get(name, {}), **values}
            sources[name] = "preset"
    models = config.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise LlamaRequestException(f"the config file {config_file}: 'models' must be an object of model name -> "
                             "object of settings")
    for name, values in models.items():
        _check_keys(values, f"the config file {config_file}, model {name!r}")
        entries[name] = {**entries.get(name, {}), **values}
        sources[name] = "config"
    top = {k: v for k, v in config.items() if k != "models"}
    specs = []
    for name, entry in entries.items():
        if not entry.get("model"):
            raise LlamaRequestException(f"model {name!r} has no model file (give it 'model')")
        values = {k: v for k, v in {**global_values, **entry}.items() if k != LOAD_ON_STARTUP}
        settings = load_settings(flags, file_values={**top, **values})
        own = {"model": str(entry["model"]), "alias": tuple(str(a) for a in split_list(entry.get("alias", ())))}
        settings = settings.model_copy(update=own)   # the entry's own, whatever the environment says
        startup = str(entry.get(LOAD_ON_STARTUP, global_values.get(LOAD_ON_STARTUP, False))).lower() in _TRUE
        specs.append(ModelSpec(name, settings, settings.alias, sources[name], startup))
    _check_names(specs)
    return Catalogue(base, tuple(specs), router=True)


def _check_names(specs: list[ModelSpec]) -> None:
    seen: dict[str, str] = {}
    for spec in specs:
        for name in (spec.name, *spec.aliases):
            if name in seen and seen[name] != spec.name:
                raise LlamaRequestException(f"the name {name!r} is given to both {seen[name]!r} and {spec.name!r}")
            seen[name] = spec.name
