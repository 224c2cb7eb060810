"""What decides the claims: the looks of ``study --until-decided``, and what would decide the rest.

    from distillscope.report.decide import claim_states, level
    claim_states(study_dir, level(study_dir))   # each claim: verdict, lacks power, experiments

``level(study_dir)``: the one-sided level the report scores at — ``ALPHA``, or α / K when the
study ran until decided (``sequential.json``, written by ``distillscope.study.sequential``: K
looks planned, each at α / K, so that the whole sequence's false rates stay ≤ α).
``paragraphs(study, claims)``: the report's section "What decides the claims", stating that
procedure (the looks made, the seeds per experiment at each, the level of each).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from distillscope.report.claims import CLAIMS
from distillscope.report.load import Study, load_study
from distillscope.report.scorecard import INCONCLUSIVE, ClaimResult, score_claims
from distillscope.report.stats import ALPHA
from distillscope.report.verdicts import LACKS_POWER
from distillscope.store import SEQUENTIAL_FILE, read_json

TITLE = "What decides the claims"


def looks(study_dir: Path) -> dict[str, Any] | None:
    """The looks of ``study --until-decided`` recorded in ``study_dir`` (None: it never ran so)."""
    return read_json(Path(study_dir) / SEQUENTIAL_FILE) or None


def level(study_dir: Path) -> float:
    """The level each test of the report uses: α / K after K planned looks, else ``ALPHA``."""
    state = looks(study_dir)
    return float(state["alpha"]) if state else ALPHA


def lacks_power(r: ClaimResult) -> bool:
    """An inconclusive claim whose reason is lack of power (``report.verdicts``)."""
    return r.verdict == INCONCLUSIVE and LACKS_POWER in r.reason


def claim_states(study_dir: Path, alpha: float) -> list[tuple[int, str, bool, tuple[str, ...]]]:
    """Each claim of the study in ``study_dir`` scored at ``alpha``: (id, verdict, whether it
    lacks power, the experiments it reads — none for a legacy rule, which is never extended)."""
    study = load_study(Path(study_dir))
    experiments = {c.id: c.experiments for c in CLAIMS}
    results = score_claims(study.scored, study.root, alpha=alpha)
    return [(r.id, r.verdict, lacks_power(r), experiments.get(r.id, ())) for r in results]


def procedure(state: dict[str, Any]) -> list[str]:
    """The sequential procedure in words: rule, then one sentence per look."""
    k, a = state["max_looks"], state["alpha"]
    out = [
        f"Seeds added until decided: while a claim lacked power, the experiments it reads got "
        f"{state['block']} more seeds (up to {state['max_seeds']}); at most {k} looks, each "
        f"testing at α = {state['nominal_alpha']:g} / {k} = {a:.4g} one-sided (Bonferroni over "
        f"the planned looks), so the false rates of the whole sequence stay ≤ "
        f"{state['nominal_alpha']:g}. Looks made: {len(state['looks'])}."
    ]
    for i, look in enumerate(state["looks"], start=1):
        seeds = ", ".join(f"{e} {n}" for e, n in look.get("seeds", {}).items())
        added = "; ".join(f"{e} +{len(s)}" for e, s in look["added"].items()) or "none"
        lacking = ", ".join(look.get("lacking", {})) or "none"
        state_text = "" if look["done"] else " (not finished)"
        out.append(
            f"Look {i}{state_text} at α = {a:.4g}: seeds added {added}; seeds per experiment "
            f"{seeds or 'n/a'}; claims lacking power after it: {lacking}."
        )
    if state.get("stopped"):
        out.append(f"The looks stopped: {state['stopped']}.")
    return out


def paragraphs(study: Study, claims: list[ClaimResult]) -> list[str]:
    """The report's section: its title, then its paragraphs (none when there is nothing to say)."""
    state = looks(study.root)
    body = procedure(state) if state else []
    return [TITLE, *body] if body else []


def html(study: Study, claims: list[ClaimResult], esc: Callable[[object], str]) -> list[str]:
    """:func:`paragraphs` as HTML: an ``h2`` and one ``p`` each (``esc`` escapes text)."""
    head, *body = paragraphs(study, claims) or [""]
    return [f"<h2>{esc(head)}</h2>", *(f"<p>{esc(p)}</p>" for p in body)] if body else []


def markdown(study: Study, claims: list[ClaimResult], esc: Callable[[object], str]) -> list[str]:
    """:func:`paragraphs` as Markdown: a ``##`` heading and one paragraph each."""
    head, *body = paragraphs(study, claims) or [""]
    return [f"## {esc(head)}", "", *(f"{esc(p)}\n" for p in body)] if body else []
