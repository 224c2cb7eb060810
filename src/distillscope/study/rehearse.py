"""A dress rehearsal of a study: every distinct run configuration, end to end, in seconds.

``distillscope study plan --rehearse`` (and ``train --rehearse``) runs, for each distinct
configuration of the plan, the static preflight on the real inputs
(:func:`~distillscope.study.preflight.preflight_runs`) and then the whole run — training,
checkpoint, export, evaluation, the style detector, the forgetting harness, a served teacher,
vLLM — on tiny random-weight copies of the configured teacher and student (their tokenizers,
chat templates, stop ids and vocabularies; :func:`~distillscope.testbed.like.shrink_like`, built
by the caller) with every size cut (:data:`SHRUNK`): 2 steps of 2 prompts, completions of at most
8 tokens, 2 evaluation items, 1 item per forgetting task. An error that a real run would meet
after hours — a missing dataset, a chat template that fails, an extra not installed, a server's
limit — is met here, one line per configuration. A W&B tracker logs offline (``WANDB_MODE``).

Configurations are distinct when they differ in anything but the seed, the name and the
learning rates (numbers that change no code path); an RLVR configuration rehearses from the
student its parent's rehearsal exported. The forgetting harness runs in the first successful
rehearsal of each distinct suite (1 item per task) and is left out of the others: it costs the
most and its datasets do not change with the rest of the configuration. ``paper-qwen``'s 344
runs are 59 distinct configurations; ``quick``'s 16 are 4.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distillscope.config import RunConfig, run_config_from_dict, served_url
from distillscope.study.preflight import preflight_runs
from distillscope.study.run_one import run_one
from distillscope.study.spec import PlannedRun
from distillscope.teacher.manifest import MANIFEST

#: What a rehearsal cuts: steps, prompts, completion length, evaluation items.
SHRUNK = {"steps": 2, "prompts": 2, "max_new_tokens": 8, "items": 2, "forgetting_limit": 1}


@dataclass
class Rehearsal:
    """One distinct configuration: its representative run, how many runs share it, and the
    error it met (None: it trained and evaluated)."""

    run: PlannedRun
    runs: int
    error: BaseException | None


def distinct(runs: list[PlannedRun]) -> list[tuple[PlannedRun, int]]:
    """``(representative, runs sharing it)`` per distinct configuration, distillation runs
    first (an RLVR run starts from its parent's student)."""
    groups: dict[str, list[PlannedRun]] = {}
    for r in sorted(runs, key=lambda r: r.parent is not None):
        groups.setdefault(_identity(r.config), []).append(r)
    return [(members[0], len(members)) for members in groups.values()]


def rehearse(
    runs: list[PlannedRun],
    tiny: Callable[[str], str],
    root: Path,
    on_result: Callable[[Rehearsal], None] | None = None,
) -> list[Rehearsal]:
    """Rehearse each distinct configuration of ``runs`` under ``root`` (module doc).

    ``tiny(path)``: the directory of the tiny copy of model directory ``path`` (built on first
    request). Returns one :class:`Rehearsal` per configuration, in order.
    """
    with _wandb_offline():
        return _rehearse(runs, tiny, root, on_result)


@contextmanager
def _wandb_offline() -> Iterator[None]:
    """A rehearsal checks a W&B tracker without creating runs in the user's project."""
    previous = os.environ.get("WANDB_MODE")
    os.environ["WANDB_MODE"] = "offline"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("WANDB_MODE", None)
        else:
            os.environ["WANDB_MODE"] = previous


def _rehearse(
    runs: list[PlannedRun],
    tiny: Callable[[str], str],
    root: Path,
    on_result: Callable[[Rehearsal], None] | None,
) -> list[Rehearsal]:
    identity = {r.run_id: _identity(r.config) for r in runs}
    rehearsed: dict[str, Path] = {}  # identity → the directory of its rehearsal
    suites: set[str] = set()  # forgetting suites rehearsed already
    results = []
    for run, count in distinct(runs):
        run_dir = root / "runs" / run.run_id
        error = None
        f = run.config.eval.forgetting
        suite = None if f is None else f.model_dump_json()
        try:
            preflight_runs([run.config])
            if run.parent is not None:
                _link_parent(root / "runs" / run.parent, rehearsed.get(identity.get(run.parent)))
            run_one(shrink(run.config, tiny, harness=suite not in suites), run_dir)
            suites.add(suite)
        except Exception as err:  # every configuration gets its line
            error = err
        rehearsed[identity[run.run_id]] = run_dir
        results.append(Rehearsal(run, count, error))
        if on_result is not None:
            on_result(results[-1])
    return results


def shrink(cfg: RunConfig, tiny: Callable[[str], str], harness: bool = True) -> RunConfig:
    """``cfg`` on tiny model copies with every size cut to :data:`SHRUNK` (module doc);
    without ``harness``, no forgetting suite (one rehearsal per distinct suite runs it)."""
    d = cfg.model_dump(mode="json")
    s = SHRUNK
    m = d["model"]
    if m.get("teachers"):  # routed: each teacher of model.teachers, the unused default left
        m["teachers"] = {name: _tiny_teacher(spec, tiny) for name, spec in m["teachers"].items()}
    else:
        m["teacher"] = _tiny_teacher(m["teacher"], tiny)
    m["student"] = tiny(m["student"])
    d["optim"].update(steps=s["steps"], warmup_steps=min(d["optim"]["warmup_steps"], 1))
    d["rollout"]["prompts_per_step"] = max(s["prompts"], d["optim"]["grad_accum"])
    d["task"]["max_new_tokens"] = min(d["task"]["max_new_tokens"], s["max_new_tokens"])
    d["checkpoint_every"] = min(d["checkpoint_every"], s["steps"])
    e = d["eval"]
    e["items"] = s["items"]
    e["coverage_items"] = min(e["coverage_items"], s["items"])
    e["coverage_samples"] = min(e["coverage_samples"], s["items"])
    e["skill_items"] = min(e["skill_items"], 1)
    e["profile_steps"] = sorted({min(p, s["steps"]) for p in e["profile_steps"]})
    if e.get("forgetting") is not None:
        e["forgetting"] = dict(e["forgetting"], limit=s["forgetting_limit"]) if harness else None
    if d.get("rlvr") is not None:
        d["rlvr"].update(steps=s["steps"], prompts_per_step=s["prompts"], group_size=2)
        if d["rlvr"].get("max_new_tokens"):
            d["rlvr"]["max_new_tokens"] = min(d["rlvr"]["max_new_tokens"], s["max_new_tokens"])
    return run_config_from_dict(d, f"rehearsal of {cfg.name}")


def _tiny_teacher(spec: str, tiny: Callable[[str], str]) -> str:
    """A teacher's rehearsal stand-in: the tiny copy of a model directory; a served teacher or
    a teacher cache (a directory holding its manifest) as it is."""
    if served_url(spec) or (Path(spec) / MANIFEST).is_file():
        return spec
    return tiny(spec)


def _identity(cfg: RunConfig) -> str:
    """The configuration without what changes no code path: seed, name, learning rates."""
    d: dict[str, Any] = cfg.model_dump(mode="json", exclude={"seed", "name"})
    d["optim"].pop("lr", None)
    if d.get("rlvr") is not None:
        d["rlvr"].pop("lr", None)
        d["rlvr"].pop("parent", None)
    return json.dumps(d, sort_keys=True)


def _link_parent(link: Path, target: Path | None) -> None:
    """Make ``link`` (``runs/<parent>``) the rehearsal directory of the parent's configuration
    (``target``), which another run of that configuration may have rehearsed."""
    if target is not None and target != link and not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link, target_is_directory=True)
