"""config.json of a hub model that is not in the catalog: from the local hub caches, or the hub.

ms-swift downloads models from ModelScope by default (``--use_hf false``) or from the Hugging Face
hub, and both leave ``config.json`` in a local cache; a model someone has trained or served on
this machine is found there offline. Fetching from the Hugging Face hub is opt-in
(``JUPYTER_QUOTA_HUB_LOOKUP=1``): the estimator answers REST requests and must not wait on a
network it may not have. ``HF_HUB_OFFLINE`` is honoured by ``huggingface_hub`` itself.
"""

from __future__ import annotations

import glob
import os
import re

from ..errors import InvalidRequest

#: ``org/name`` as both hubs spell repository ids; anything else is never turned into a path
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
LOOKUP_ENV = "JUPYTER_QUOTA_HUB_LOOKUP"


def is_repo_id(name: str) -> bool:
    return bool(_REPO_ID.fullmatch(name)) and ".." not in name


def cached_config(repo_id: str) -> str | None:
    """Path of ``config.json`` for ``repo_id`` in the Hugging Face or ModelScope cache, if any."""
    if not is_repo_id(repo_id):
        return None
    return _hf_cached(repo_id) or _modelscope_cached(repo_id)


def _hf_cached(repo_id: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # not installed without the [swift] extra: read the cache layout directly
        root = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
        )
        snapshots = os.path.join(root, "models--" + repo_id.replace("/", "--"), "snapshots")
        found = sorted(glob.glob(os.path.join(glob.escape(snapshots), "*", "config.json")), key=os.path.getmtime)
        return found[-1] if found else None
    path = try_to_load_from_cache(repo_id, "config.json", cache_dir=os.environ.get("HF_HUB_CACHE"))
    return path if isinstance(path, str) else None


def _modelscope_cached(repo_id: str) -> str | None:
    root = os.environ.get("MODELSCOPE_CACHE") or os.path.expanduser("~/.cache/modelscope/hub")
    for folder in (os.path.join(root, "models", repo_id), os.path.join(root, repo_id)):
        path = os.path.join(folder, "config.json")
        if os.path.isfile(path):
            return path
    return None


def lookup_enabled() -> bool:
    return os.environ.get(LOOKUP_ENV, "").strip().lower() in ("1", "true", "yes")


def fetch_config(repo_id: str) -> str:
    """Download ``config.json`` (only that file) from the Hugging Face hub; its local path."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise InvalidRequest(
            f"{repo_id}: fetching its config.json needs the huggingface_hub package "
            "(pip install huggingface_hub), or give a local folder holding it"
        ) from None
    try:
        return hf_hub_download(repo_id, "config.json")
    except Exception as exc:  # noqa: BLE001 - offline, unknown repo, gated repo, network: all the user's to fix
        raise InvalidRequest(
            f"{repo_id}: could not fetch its config.json from the hub "
            f"({type(exc).__name__}); give a local folder holding the model's "
            "config.json instead"
        ) from None
