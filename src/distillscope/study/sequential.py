"""Seeds until decided: run, score, add seeds where claims lack power, look again.

    distillscope study --preset quick --until-decided --max-seeds 6 --out DIR
    distillscope study status DIR        # the runs, then the looks made so far

or, in a study file, ``until_decided: {max_seeds: 6, block: 2}``
(:class:`~distillscope.study.spec.UntilDecided`).

A *look* runs the study (resuming whatever is finished) and scores its claims. While some claim
is inconclusive because it *lacks power* (``scorecard.verdicts``: the design cannot decide the
published value at 80% power), each experiment it reads — an RLVR stage stands for its source
experiment — gets ``block`` new seeds, the next integers after that experiment's largest seed
(the same study always adds the same seeds), up to ``max_seeds`` seeds, and the study looks
again. Only those experiments grow. It stops when no claim lacks power, when none of their
experiments can grow, or when the looks the budget allows are spent.

**α spent across the looks (Bonferroni over the planned maximum number of looks).** The budget
fixes, before the first look, K = 1 + ⌈(max_seeds − n_min) / block⌉ (n_min: the fewest seeds of
an experiment with two or more), and every look tests at α / K. A false support (or false
contradiction) of the whole sequence is a false verdict at some look, so its rate is at most
Σₖ α / K = α, whatever the dependence between the looks and whatever stops the sequence —
for every rule of the scorecard: intersection–union parts, equivalence bands, ranges, the
contradiction side's own split. Pocock or O'Brien–Fleming boundaries spend less, but they rest
on one Gaussian statistic with independent increments, which the composite rules (a range's
max over pairs, "every stratum", TOST) are not; the union bound needs no model. Its price is
conservatism, measured in tests/study/test_sequential.py on simulated seed-blocked paired
contrasts planted exactly at an ``above`` margin (3 looks of 2 seeds from 2 to 6, 20,000
sequences): false support 1.9% and false contradiction 1.9% (≤ α = 2.5%), where testing
every look at α gives 5.3% each.

The looks are recorded in ``DIR/sequential.json`` (:data:`~distillscope.store.SEQUENTIAL_FILE`)
and the seeds each later look added in ``study.yaml`` (``until_decided.looks``); a look's seeds
are written before its runs start, so a study killed mid-look resumes the same look.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from distillscope.config import ConfigError
from distillscope.store import (
    SEQUENTIAL_FILE,
    STUDY_SPEC_FILE,
    atomic_write_text,
    read_json_strict,
)
from distillscope.study.lock import StudyLock
from distillscope.study.run_study import prepare
from distillscope.study.spec import StudySpec, UntilDecided, expand
from distillscope.study.spec_diff import read_stored_spec

FLAG, MAX_SEEDS_FLAG = "--until-decided", "--max-seeds"


class ClaimState(NamedTuple):
    """One claim after a look: its verdict, whether it lacks power, the experiments it reads."""

    claim: int
    verdict: str
    lacks_power: bool
    experiments: tuple[str, ...]


#: ``judge(study_dir, alpha)``: every claim of the study scored at level ``alpha``, as
#: :class:`ClaimState` fields (``scorecard.decide.claim_states``).
Judge = Callable[[Path, float], Sequence[tuple[int, str, bool, tuple[str, ...]]]]


def policy_of(until_decided: bool, max_seeds: int | None) -> UntilDecided | None:
    """The policy ``--until-decided [--max-seeds N]`` asks for (None without the flag)."""
    if max_seeds is not None and max_seeds < 2:
        raise ConfigError(f"{MAX_SEEDS_FLAG} takes a whole number ≥ 2, got {max_seeds}")
    if max_seeds is not None and not until_decided:
        raise ConfigError(f"{MAX_SEEDS_FLAG} goes with {FLAG}")
    if not until_decided:
        return None
    return UntilDecided() if max_seeds is None else UntilDecided(max_seeds=max_seeds)


def with_policy(spec: StudySpec, policy: UntilDecided | None) -> StudySpec:
    """``spec`` with the command line's policy (the spec's own ``until_decided`` otherwise)."""
    if policy is None:
        return spec
    return spec.model_copy(update={"until_decided": policy})


def seeds_of(spec: StudySpec) -> dict[str, list[int]]:
    """Each experiment's distinct seeds, sorted, as ``spec`` (looks included) plans them."""
    out: dict[str, set[int]] = {e.name: set() for e in spec.experiments}
    for r in expand(spec):
        if r.parent is None:
            out[r.experiment].add(r.config.seed)
    return {name: sorted(s) for name, s in out.items()}


def max_looks(spec: StudySpec) -> int:
    """K = 1 + ⌈(max_seeds − n_min) / block⌉, n_min the fewest seeds of an experiment with ≥ 2
    (of any experiment when none has two): the looks the budget allows, fixed before the first."""
    policy = spec.until_decided or UntilDecided()
    counts = [len(s) for s in seeds_of(_without_looks(spec)).values()]
    n_min = min([n for n in counts if n >= 2] or counts)
    return 1 + math.ceil(max(0, policy.max_seeds - n_min) / policy.block)


def next_seeds(spec: StudySpec, experiments: Sequence[str]) -> dict[str, list[int]]:
    """The seeds the next look adds to each of ``experiments``: ``block`` integers after its
    largest seed, fewer where ``max_seeds`` caps it; an experiment at the cap is left out."""
    policy = spec.until_decided or UntilDecided()
    have = seeds_of(spec)
    out = {}
    for name in experiments:
        room = min(policy.block, policy.max_seeds - len(have[name]))
        if room > 0:
            top = max(have[name])
            out[name] = list(range(top + 1, top + 1 + room))
    return out


def wanting(spec: StudySpec, states: Sequence[ClaimState]) -> dict[int, list[str]]:
    """Claim id → the experiments of ``spec`` it reads, for each claim that lacks power (an
    RLVR stage's name maps to its source experiment; names the study lacks are dropped)."""
    stage_source = {s.name: s.source for s in spec.stages}
    names = [e.name for e in spec.experiments]
    out = {}
    for s in states:
        if not s.lacks_power:
            continue
        exps = [stage_source.get(e, e) for e in s.experiments]
        out[s.claim] = [n for n in names if n in exps]
    return out


def read_state(out: Path) -> dict[str, Any] | None:
    """The looks recorded in ``out`` (None when the study never ran until decided)."""
    path = Path(out) / SEQUENTIAL_FILE
    return read_json_strict(path) if path.is_file() else None


def _write_state(out: Path, state: dict[str, Any]) -> None:
    atomic_write_text(Path(out) / SEQUENTIAL_FILE, json.dumps(state, indent=1) + "\n")


def _without_looks(spec: StudySpec) -> StudySpec:
    policy = spec.until_decided
    if policy is None or not policy.looks:
        return spec
    return spec.model_copy(update={"until_decided": policy.model_copy(update={"looks": []})})


def _at_look(spec: StudySpec, state: dict[str, Any]) -> StudySpec:
    """``spec`` with the seeds the recorded looks added."""
    added = [look["added"] for look in state["looks"][1:]]
    policy = (spec.until_decided or UntilDecided()).model_copy(update={"looks": added})
    return spec.model_copy(update={"until_decided": policy})


def _adopt(out: Path, spec: StudySpec) -> None:
    """Rewrite ``out``'s study.yaml for this look when it differs from ``spec`` only in
    ``until_decided`` (a study run before, or the previous look); any other difference is left
    for the study to refuse, naming it."""
    path = Path(out) / STUDY_SPEC_FILE
    if not path.is_file():
        return
    stored = read_stored_spec(path)
    mine = spec.model_dump(mode="json")
    shown = ("until_decided", "typed_paths")  # typed_paths: how paths were typed, never run
    if isinstance(stored, dict) and stored != mine:
        if {k: v for k, v in stored.items() if k not in shown} == {
            k: v for k, v in mine.items() if k not in shown
        }:
            with StudyLock(out):
                prepare(spec, out, overwrite=True)


def run_until_decided(
    spec: StudySpec,
    out: Path,
    run: Callable[[StudySpec], object],
    judge: Judge,
    alpha: float,
    on_look: Callable[[str, int], None] | None = None,
) -> Path:
    """Look, add seeds where claims lack power, look again (the module docstring's rule).

    ``run(spec)`` executes ``spec``'s unfinished runs into ``out`` (``run_study``);
    ``judge(out, level)`` scores the claims at ``level`` = ``alpha`` / K; ``on_look(line,
    runs)`` hears each look as it starts (its one-line description, the study's run count).
    Resumes the looks recorded in ``out``. Returns the results table's path.
    """
    if spec.until_decided is None:
        raise ConfigError(f"study {spec.name} has no until_decided policy; pass {FLAG}")
    state = read_state(out) or {
        "max_looks": max_looks(spec),
        "nominal_alpha": alpha,
        "alpha": alpha / max_looks(spec),
        "max_seeds": spec.until_decided.max_seeds,
        "block": spec.until_decided.block,
        "looks": [{"added": {}, "done": False}],
        "stopped": "",
    }
    recorded = (state["max_seeds"], state["block"])
    if recorded != (spec.until_decided.max_seeds, spec.until_decided.block):
        raise ConfigError(
            f"{out} made its looks with max_seeds {recorded[0]}, block {recorded[1]}; resume "
            "with the same, or choose another --out"
        )
    while not state["stopped"]:
        look = state["looks"][-1]
        current = _at_look(spec, state)
        if not look["done"]:
            if on_look is not None:
                on_look(look_line(state, len(state["looks"])), len(expand(current)))
            _adopt(out, current)
            run(current)
            claims = [ClaimState(*c) for c in judge(Path(out), state["alpha"])]
            look.update(done=True, seeds={k: len(v) for k, v in seeds_of(current).items()})
            look["lacking"] = {str(k): v for k, v in wanting(current, claims).items()}
            look["verdicts"] = {str(c.claim): c.verdict for c in claims}
            _write_state(out, state)
        state["stopped"] = _next_look(current, state)
        _write_state(out, state)
    return Path(out) / "results.parquet"


def _next_look(spec: StudySpec, state: dict[str, Any]) -> str:
    """Append the next look's seeds to ``state`` and return ""; or why the looks stop."""
    lacking = state["looks"][-1]["lacking"]
    if not lacking:
        return "no claim lacks power"
    if len(state["looks"]) >= state["max_looks"]:
        return f"the {state['max_looks']} looks the budget allows are spent"
    experiments = [e for e in spec.experiments if any(e.name in v for v in lacking.values())]
    added = next_seeds(spec, [e.name for e in experiments])
    if not added:
        return f"the experiments of the claims lacking power have {state['max_seeds']} seeds"
    state["looks"].append({"added": added, "done": False})
    return ""


def look_line(state: dict[str, Any], k: int) -> str:
    """One look in a line: ``look 2 of ≤ 3 at α = 0.008333: added main: 44, 45 — seeds main 4;
    claims lacking power: 1`` (``— running`` until it is scored)."""
    look = state["looks"][k - 1]
    added = "; ".join(f"{e}: {', '.join(map(str, s))}" for e, s in look["added"].items())
    text = f"look {k} of ≤ {state['max_looks']} at α = {state['alpha']:.4g}"
    text += f": added {added}" if added else ": the study's own seeds"
    if look["done"]:
        seeds = ", ".join(f"{e} {n}" for e, n in look["seeds"].items())
        text += f" — seeds {seeds}; claims lacking power: {len(look['lacking'])}"
    else:
        text += " — running"
    return text


def look_lines(out: Path) -> list[str]:
    """Every look of the study in ``out``, one line each, then why the looks stopped."""
    state = read_state(out)
    if state is None:
        return []
    lines = [look_line(state, k) for k in range(1, len(state["looks"]) + 1)]
    if state["stopped"]:
        lines.append(f"looks stopped: {state['stopped']}")
    return lines
