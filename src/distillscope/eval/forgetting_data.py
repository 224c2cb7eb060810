"""Whether the forgetting suite's datasets can be read, asked before any run trains.

lm-evaluation-harness fetches each task's dataset (``dataset_path`` in its YAML) from the
Hugging Face hub on first use. A run's process is offline by default (:mod:`distillscope.models`
sets ``HF_HUB_OFFLINE=1`` unless the environment says otherwise), so a dataset that is not in
the local cache fails — after training, when the trained student is scored. The preflight
(:func:`check_harness_data`) reads the task index, collects the hub datasets of
``eval.forgetting.tasks`` (a group's tasks included) and refuses, in one line naming the
dataset, one that is neither cached nor reachable. Torch-free; the index of lm-eval's own tasks
takes a few seconds to read, once per distinct suite.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any

from distillscope.config import HARNESS_MISSING, ConfigError, ForgettingConfig

#: ``dataset_path`` values that name a datasets builder over local files, not a hub dataset.
LOCAL_BUILDERS = {"json", "csv", "parquet", "text", "arrow", "imagefolder", "audiofolder"}
_TRUE = {"1", "true", "yes", "on"}


#: Suites (with the environment that located their data) this process found readable: a
#: rehearsal's configurations share a suite, and reading lm-eval's index takes seconds.
_READABLE: set[str] = set()
_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def check_harness_data(f: ForgettingConfig) -> None:
    """ConfigError naming the first hub dataset of ``f.tasks`` that is neither in the local
    cache nor reachable (module doc); a task name the index lacks is refused too. A suite found
    readable is not asked again in this process (under the same environment)."""
    key = f.model_dump_json() + repr([os.environ.get(v) for v in _ENV])
    if key in _READABLE:
        return
    _check(f)
    _READABLE.add(key)


def _check(f: ForgettingConfig) -> None:
    try:
        from lm_eval.tasks import TaskManager
    except ImportError as err:
        raise ConfigError(HARNESS_MISSING) from err
    index = task_manager(TaskManager, f).task_index
    for task in f.tasks:
        if task not in index:
            raise ConfigError(
                f"eval.forgetting.tasks: lm-eval knows no task or group {task!r}"
                + ("" if f.include_path is None else f" (nor {f.include_path})")
            )
        for dataset in sorted(hub_datasets(index, task)):
            if not dataset_cached(dataset) and not hub_reachable():
                raise ConfigError(
                    f"eval.forgetting: task {task} reads dataset {dataset!r}, which is not "
                    f"cached and the hub is unreachable ({_why_offline()}); cache it where the "
                    f'hub is reachable (python -c "import datasets; '
                    f"datasets.load_dataset('{dataset}')\"), point HF_DATASETS_CACHE at a filled "
                    "cache, or choose other eval.forgetting.tasks"
                )


def task_manager(manager: Any, f: ForgettingConfig) -> Any:
    """lm-eval's task index: ``include_path`` alone when it holds every task asked for (lm-eval's
    own index reads ~15,000 YAML files), else lm-eval's tasks and ``include_path``'s."""
    if f.include_path is None:
        return manager()
    local = manager(include_path=str(f.include_path), include_defaults=False)
    index = local.task_index

    def local_only(name: Any) -> bool:
        if not isinstance(name, str):  # an inline task config of a group
            return True
        entry = index.get(name)
        children = (entry.cfg or {}).get("task", []) if entry is not None else []
        is_group = entry is not None and "group" in (entry.cfg or {})
        return entry is not None and (not is_group or all(map(local_only, children)))

    if all(local_only(t) for t in f.tasks):
        return local
    return manager(include_path=str(f.include_path))


def hub_datasets(index: dict[str, Any], name: Any) -> set[str]:
    """The hub ``dataset_path`` values task or group ``name`` reads (an inline config's own)."""
    cfg = name if isinstance(name, dict) else (getattr(index.get(name), "cfg", None) or {})
    children = cfg.get("task") if "group" in cfg else None
    if isinstance(children, list):
        return set().union(*(hub_datasets(index, c) for c in children))
    path = cfg.get("dataset_path")
    if not isinstance(path, str) or path in LOCAL_BUILDERS or Path(path).exists():
        return set()
    return {path}


def dataset_cached(dataset: str) -> bool:
    """Whether ``dataset`` (``owner/name``) is in the datasets cache (``HF_DATASETS_CACHE``,
    as ``owner___name``, the name as datasets writes it) or the hub cache (``datasets--owner--
    name``)."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub")).expanduser()
    if (hub / f"datasets--{dataset.replace('/', '--')}").is_dir():
        return True
    prepared = Path(os.environ.get("HF_DATASETS_CACHE", home / "datasets")).expanduser()
    wanted = _folded(dataset.replace("/", "___"))
    return prepared.is_dir() and any(_folded(p.name) == wanted for p in prepared.iterdir())


def hub_reachable(timeout_s: float = 5.0) -> bool:
    """False in offline mode (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``), else whether a TCP
    connection to the hub's host (``HF_ENDPOINT``) opens within ``timeout_s``."""
    if _why_offline() != "no connection":
        return False
    url = urllib.parse.urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _why_offline() -> str:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in _TRUE:
            return f"{var}={os.environ[var]}"
    return "no connection"


def _folded(name: str) -> str:
    """A cache directory name compared case- and separator-blind (datasets snake-cases names)."""
    return "/".join("".join(c for c in part if c.isalnum()) for part in name.lower().split("___"))
