"""Rows of a dataset, read through Hugging Face ``datasets`` (docs/tasks.md, "Dataset tasks").

``task.dataset.path`` is one of

- a hub id ``org/name``: ``datasets.load_dataset(path, name, split=..., revision=...)``. The HF
  cache is used as ``datasets`` uses it (``HF_HOME``, ``HF_DATASETS_CACHE``); under
  ``HF_DATASETS_OFFLINE=1`` only the cache is read, and a dataset missing from it is a one-line
  error naming it and how to fetch it;
- a directory written by ``save_to_disk`` (it holds ``state.json`` or ``dataset_dict.json``):
  ``datasets.load_from_disk``;
- another directory (data files, split by their names as ``datasets`` does: ``train.jsonl``,
  ``test.parquet``, …) or one ``.jsonl`` / ``.json`` / ``.parquet`` file: ``datasets.load_dataset``.

Splits. ``split`` takes ``datasets``' split syntax (``train``, ``test[:500]``, ``train+test``;
for a saved DatasetDict, split names joined by ``+``) and gives one set of rows, which the task
then divides by their ``split`` column or by the identity hash (``tasks.pools``). With
``split: null`` every split is read; when there are several, each row is labelled with its
split's side — ``train`` trains, ``test`` / ``validation`` / ``valid`` / ``val`` / ``dev`` /
``eval`` are held out — unless the rows carry a ``split`` column of their own. So a dataset
published with train and test splits keeps its own division, and no test row is trained on.

``datasets`` is imported here only, when a dataset is opened: other tasks never load it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distillscope.safeyaml import clip, quote

#: A hub id: ``org/name`` (a path that exists on disk is read as a local dataset first).
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: Local data files ``load_dataset`` reads, by suffix, and the builder that reads them.
DATA_FILE_BUILDERS = {
    ".jsonl": "json",
    ".json": "json",
    ".json-lines": "json",
    ".parquet": "parquet",
}
#: With ``split: null`` and several splits: which split names train and which are held out.
TRAIN_SPLITS = ("train",)
HELD_OUT_SPLITS = ("test", "validation", "valid", "val", "dev", "eval")
#: Rows converted at a time from Arrow to Python.
BATCH_ROWS = 4096


@dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset task's rows come from (``task.dataset`` of a run config).

    Attributes:
        path: hub id, local directory or local JSONL/Parquet file (module docstring).
        name: the dataset's configuration (subset), for hub ids and data directories.
        split: a split expression; None reads every split (module docstring).
        revision: a hub commit, tag or branch (pins the rows a study trains on).
    """

    path: str
    name: str | None = None
    split: str | None = None
    revision: str | None = None

    @property
    def label(self) -> str:
        """``dataset org/name (split test)``: how messages name the dataset."""
        split = f" (split {clip(self.split, 60)})" if self.split else ""
        return f"dataset {clip(self.path, 120)}{split}"


@dataclass(frozen=True)
class DatasetParts:
    """An opened dataset: one or several splits, each a ``datasets.Dataset``.

    Attributes:
        spec: what was opened.
        parts: ``(split name, Dataset)`` per split read; the name is None for a split
            expression's rows (``train+test``) or a saved single split.
    """

    spec: DatasetSpec
    parts: tuple[tuple[str | None, Any], ...]

    @property
    def columns(self) -> list[str]:
        """The columns every part has, in the first part's order."""
        first = list(self.parts[0][1].column_names)
        return [c for c in first if all(c in p.column_names for _, p in self.parts)]

    def rows(self, columns: list[str] | None, label_splits: bool) -> Iterator[tuple[str, dict]]:
        """``(where, row)`` for every row, parts in order; ``columns`` (None = all) are read.

        With ``label_splits`` each row gets ``split`` = ``train`` or ``test`` from its part's
        name (:data:`TRAIN_SPLITS`, :data:`HELD_OUT_SPLITS`); another name is an error.
        """
        for split, part in self.parts:
            side = _side(self.spec, split) if label_splits else None
            where = self.spec.label
            if split is not None:
                where = f"dataset {clip(self.spec.path, 120)} (split {clip(split, 60)})"
            chosen = part if columns is None else part.select_columns(columns)
            n = 0
            for batch in chosen.iter(batch_size=BATCH_ROWS):  # {column: values} per batch
                names = list(batch)
                for values in zip(*(batch[k] for k in names), strict=True):
                    n += 1
                    row = dict(zip(names, values, strict=True))
                    if side is not None:
                        row["split"] = side
                    yield f"{where} row {n}", row


def _side(spec: DatasetSpec, split: str | None) -> str:
    name = (split or "").strip().lower()
    if name in TRAIN_SPLITS:
        return "train"
    if name in HELD_OUT_SPLITS:
        return "test"
    raise ValueError(
        f"{spec.label}: split {quote(split, 60)} is neither training ({', '.join(TRAIN_SPLITS)}) "
        f"nor held out ({', '.join(HELD_OUT_SPLITS)}); choose rows with task.dataset.split"
    )


def open_dataset(spec: DatasetSpec) -> DatasetParts:
    """Open ``spec`` with ``datasets`` (module docstring); every failure is one ValueError line."""
    local = Path(spec.path).expanduser()
    if not local.exists() and not HUB_ID.fullmatch(spec.path):
        raise ValueError(f"{spec.label}: no such file or directory, and not a hub id (org/name)")
    import datasets  # imported here: only dataset tasks pay for it

    kind = "hub" if not local.exists() else _local_kind(local)
    for key in _UNREAD[kind]:
        if getattr(spec, key) is not None:
            raise ValueError(f"{spec.label}: task.dataset.{key} is not read for {kind}; remove it")
    try:
        loaded = _load(datasets, spec, local, kind)
    except ValueError as err:
        raise ValueError(f"{spec.label}: {clip(str(err), 200)}") from None
    except (ConnectionError, FileNotFoundError) as err:
        if kind == "hub" and _offline(datasets):
            raise ValueError(
                f"{spec.label}: not in the Hugging Face cache, and HF_DATASETS_OFFLINE=1; fetch it "
                f"once with network access (datasets.load_dataset({quote(spec.path, 120)})) or "
                "set task.dataset.path to a local copy"
            ) from None
        hint = "; offline, HF_DATASETS_OFFLINE=1 reads the cache" if kind == "hub" else ""
        raise ValueError(f"{spec.label}: cannot be read ({clip(str(err), 200)}){hint}") from None
    except Exception as err:  # datasets and pyarrow raise their own error types
        raise ValueError(
            f"{spec.label}: cannot be read ({type(err).__name__}: {clip(str(err), 200)})"
        ) from None
    return DatasetParts(spec, _parts(datasets, spec, loaded, saved=kind == _SAVED))


_SAVED = "a save_to_disk directory"
_UNREAD = {  # the spec fields each kind of path does not read
    "hub": (),
    _SAVED: ("name", "revision"),
    "a data directory": ("revision",),
    "a data file": ("name", "revision"),
}


def _local_kind(local: Path) -> str:
    if local.is_dir():
        saved = any((local / m).is_file() for m in ("state.json", "dataset_dict.json"))
        return _SAVED if saved else "a data directory"
    if local.suffix.lower() not in DATA_FILE_BUILDERS:
        known = ", ".join(DATA_FILE_BUILDERS)
        raise ValueError(f"dataset {clip(str(local), 120)}: unknown file type; use one of {known}")
    return "a data file"


def _load(datasets: Any, spec: DatasetSpec, local: Path, kind: str) -> Any:
    """What ``datasets`` returns for ``spec``: a Dataset (a split given) or a DatasetDict."""
    if kind == "hub":
        return datasets.load_dataset(spec.path, spec.name, split=spec.split, revision=spec.revision)
    if kind == _SAVED:
        return datasets.load_from_disk(str(local))
    if kind == "a data directory":
        return datasets.load_dataset(str(local), spec.name, split=spec.split)
    builder = DATA_FILE_BUILDERS[local.suffix.lower()]
    return datasets.load_dataset(builder, data_files=str(local), split=spec.split)


def _offline(datasets: Any) -> bool:
    config = datasets.config
    return bool(getattr(config, "HF_HUB_OFFLINE", False) or config.HF_DATASETS_OFFLINE)


def _parts(
    datasets: Any, spec: DatasetSpec, loaded: Any, saved: bool
) -> tuple[tuple[str | None, Any], ...]:
    """The splits read: one Dataset, or the splits of a DatasetDict (``split: null``, or split
    names joined by ``+`` for a saved one; ``load_dataset`` applies a given split itself)."""
    if isinstance(loaded, datasets.Dataset):
        if saved and spec.split is not None:
            raise ValueError(f"{spec.label}: a saved single split; remove task.dataset.split")
        return ((None, loaded),)
    names = list(loaded)
    if not names:
        raise ValueError(f"{spec.label}: the dataset has no splits")
    if spec.split is None:
        if len(names) == 1:
            return ((None, loaded[names[0]]),)
        return tuple((n, loaded[n]) for n in names)
    wanted = [s.strip() for s in spec.split.split("+")]
    missing = [s for s in wanted if s not in names]
    if missing:
        raise ValueError(
            f"{spec.label}: no split {quote(missing[0], 60)} (splits: {clip(', '.join(names))})"
        )
    return ((None, datasets.concatenate_datasets([loaded[s] for s in wanted])),)
