"""What decides the claims: the looks of ``study --until-decided``, and what would decide the rest.

    from distillscope.scorecard.decide import claim_states, level
    claim_states(study_dir, level(load_study(study_dir).looks))   # each claim: verdict, …

``level(study.looks)``: the one-sided level the report scores at — ``ALPHA``, or α / K when the
study ran until decided (``sequential.json``, written by ``distillscope.study.sequential`` and
read with the rest of the study, ``Study.looks``: K
looks planned, each at α / K, so that the whole sequence's false rates stay ≤ α).
``paragraphs(study, claims)``: the report's section "What decides the claims", stating that
procedure (the looks made, the seeds per experiment at each, the level of each) and, for each
claim inconclusive for lack of power, the seeds × evaluation samples per item that would decide
it (80% power at the published value, ``scorecard.power`` on the study's own noise components)
and what an added seed costs in run time (``time/run_s`` of the claim's experiments).
``plan_rows(designs, source)``: ``study plan``'s table, each claim part's power under a
planned design with the noise of the study in ``source``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from distillscope.results.reader import Study, load_study
from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import Claim
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.noise import estimate_noise
from distillscope.scorecard.power import part_profiles, plan_part, seeds_to_decide
from distillscope.scorecard.runner import INCONCLUSIVE, ClaimResult, score_claims
from distillscope.scorecard.verdicts import LACKS_POWER

TITLE = "What decides the claims"
#: The shipped noise record ``study plan`` reads without ``--noise-from`` (a source checkout).
RECORD = Path(__file__).resolve().parents[3] / "bench" / "records" / "paper-2026-12-02"
#: Samples per item the "would decide" line also tries, where evaluation noise counts.
MORE_SAMPLES = 16


def level(looks: dict[str, Any] | None) -> float:
    """The level each test of the report uses: α / K after K planned looks (``looks``: the
    study's record of ``study --until-decided``, ``Study.looks``), else ``ALPHA``."""
    return float(looks["alpha"]) if looks else ALPHA


def lacks_power(r: ClaimResult) -> bool:
    """An inconclusive claim whose reason is lack of power (``scorecard.verdicts``)."""
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
        f"up to {state['block']} more seeds per look (at most {state['max_seeds']} in all); "
        f"at most {k} looks, each "
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
    body = procedure(study.looks) if study.looks else []
    body += would_decide(study, [r for r in claims if lacks_power(r)])
    return [TITLE, *body] if body else []


def would_decide(study: Study, lacking: list[ClaimResult]) -> list[str]:
    """Per claim lacking power: the fewest seeds at which every part it can plan reaches 80%
    power at its published value, at the study's samples per item and at ``MORE_SAMPLES``
    (the evaluation blocks' samples, when the study's differ; a part without evaluation noise
    ignores them), and what an added seed costs in run time. A claim none of whose parts the
    planner models (Fisher's exact test, a variance ratio, a replay of other claims) gets its
    own reason, which says what its design decides."""
    if not lacking:
        return []
    df = study.scored
    noise = estimate_noise(df, study.root, study.items)
    profiles = part_profiles(df, [r.id for r in lacking])
    by_id = {c.id: c for c in CLAIMS}
    out = []
    for r in (r for r in lacking if r.id in by_id):
        claim = by_id[r.id]
        planned = [
            (p, profiles[(claim.id, p.name)])
            for p in claim.parts
            if (claim.id, p.name) in profiles and profiles[(claim.id, p.name)].metric in noise
        ]
        if not planned:  # an exact test, a variance ratio, a replay: its own reason says it
            out.append(
                f"Claim {r.id}: {r.reason}. Its test (an exact count, a variance ratio or a "
                "replay of other claims) has no seed plan; the reason says what this design "
                "decides."
            )
            continue
        sampled = any(noise[prof.metric].items > 0 for _, prof in planned)
        own = {noise[prof.metric].samples for _, prof in planned if noise[prof.metric].items}
        options = [None] + ([MORE_SAMPLES] if sampled and own != {MORE_SAMPLES} else [])
        shown = []
        for samples in options:
            need = [seeds_to_decide(p, prof, noise[prof.metric], samples) for p, prof in planned]
            if all(n is not None for n in need):
                count = samples or (next(iter(own)) if len(own) == 1 else "the study's")
                plural = "" if count == 1 else "s"
                at = f" at {count} sample{plural} per item" if sampled else ""
                shown.append(f"{max(need)} seeds{at}")
        skipped = [p.name for p in claim.parts if p not in [q for q, _ in planned]]
        text = f"Claim {r.id} would be decided (80% power at the published values) with "
        text += " or ".join(shown) if shown else "no design up to 100 seeds"
        text += f" (not planned: {', '.join(skipped)})" if skipped else ""
        out.append(f"{text}. {_seed_cost(df, claim)}".rstrip())
    return out


def _seed_cost(df, claim: Claim) -> str:
    """What one more seed costs: the runs of one seed in the claim's experiments × their mean
    ``time/run_s`` (training time; the evaluation's is not in the table)."""
    rows = df[df["experiment"].map(str).isin(claim.experiments)]
    if rows.empty or "time/run_s" not in rows or "seed" not in rows:
        return ""
    per_seed = len(rows) / max(rows["seed"].nunique(), 1)
    secs = float(rows["time/run_s"].mean())
    return (
        f"An added seed is {per_seed:.0f} runs × {secs:.0f} s of training "
        f"(≈ {per_seed * secs / 60:.1f} min; time/run_s)."
    )


def plan_rows(designs: Mapping[str, Any], source: Path, alpha: float = ALPHA) -> list[list[object]]:
    """``study plan``'s rows: per part of each claim whose experiments the design has, its kind,
    metric, seeds, samples per item, SE, power at the published value and the smallest effect
    it decides at 80% power, with the noise components and part profiles of the study in
    ``source``. ``designs``: experiment → an object with ``seeds`` and ``counts`` (block →
    (items or None, samples)), as ``study.planner.designs`` gives."""
    study = load_study(Path(source))
    noise = estimate_noise(study.scored, study.root, study.items)
    tested = [c for c in CLAIMS if all(e in designs for e in c.experiments)]
    profiles = part_profiles(study.scored, [c.id for c in tested])
    rows: list[list[object]] = []
    for claim in tested:
        d = designs[claim.experiments[0]]
        for part in claim.parts:
            prof = profiles.get((claim.id, part.name))
            if prof is None or prof.metric not in noise:
                rows.append([claim.id, part.name, "n/a", "", d.seeds, "", "", "", ""])
                continue
            c = noise[prof.metric]
            items, samples = d.counts.get(c.block, (None, None))
            pl = plan_part(part, prof, c, d.seeds, items, samples, alpha)
            shown = samples if c.items else ""
            power = "n/a" if math.isnan(pl.power) else f"{pl.power:.0%}"
            rows.append(
                [claim.id, part.name, prof.kind, prof.metric, d.seeds, shown, f"{pl.se:.2f}",
                 power, pl.smallest]
            )  # fmt: skip
    return rows


def html(paragraphs: list[str], esc: Callable[[object], str]) -> list[str]:
    """:func:`paragraphs`' lines as HTML: an ``h2`` and one ``p`` each (``esc`` escapes text)."""
    head, *body = paragraphs or [""]
    return [f"<h2>{esc(head)}</h2>", *(f"<p>{esc(p)}</p>" for p in body)] if body else []


def markdown(paragraphs: list[str], esc: Callable[[object], str]) -> list[str]:
    """:func:`paragraphs`' lines as Markdown: a ``##`` heading and one paragraph each."""
    head, *body = paragraphs or [""]
    return [f"## {esc(head)}", "", *(f"{esc(p)}\n" for p in body)] if body else []
