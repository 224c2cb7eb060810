"""What decides the claims (scorecard.decide): the level of a study run until decided, its words."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from distillscope.results.reader import load_study
from distillscope.results.stats import ALPHA
from distillscope.scorecard.decide import claim_states, level, procedure, would_decide
from distillscope.scorecard.power import CONTRAST, LEVEL, part_profiles
from distillscope.scorecard.runner import ClaimResult
from distillscope.scorecard.verdicts import ci_label
from distillscope.store import SEQUENTIAL_FILE


def _clipping_table(gap: float) -> pd.DataFrame:
    """Claim 13's main grid: 2 KLs × 2 rollouts × 3 seeds, reverse − forward norm ``gap``
    (a rollout × seed interaction gives the fit a residual: ν = 12 − 4 − 2 = 6)."""
    rows = []
    for seed, shift in zip((42, 43, 44), (0.0, 0.5, -0.5), strict=True):
        for kind in ("forward_kl", "reverse_kl"):
            for policy in ("student", "teacher"):
                norm = 3.0 + shift + (gap if kind == "reverse_kl" else 0.0)
                norm += 0.3 if (policy == "student") == (seed == 43) else 0.0
                rows.append(
                    {"run_id": f"{kind}-{policy}-{seed}", "experiment": "main", "status": "done",
                     "reason": "", "rollout.policy": policy,
                     "rollout.lam": 1.0 if policy == "student" else -1.0, "objective.kind": kind,
                     "objective.regulation": "none", "optim.lr": 1e-4, "optim.grad_clip": 1.0,
                     "seed": seed, "task.name": "tb",
                     "train/grad_clipped_frac": 0.95 + 0.01 * shift,
                     "train/grad_norm_mean": norm}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _state(k: int = 3) -> dict:
    return {
        "max_looks": k, "nominal_alpha": ALPHA, "alpha": ALPHA / k, "max_seeds": 6, "block": 2,
        "looks": [{"added": {}, "done": True, "seeds": {"main": 3}, "lacking": {"13": ["main"]}},
                  {"added": {"main": [45, 46]}, "done": False}],
        "stopped": "",
    }  # fmt: skip


def test_a_study_run_until_decided_is_scored_at_alpha_over_its_looks(tmp_path):
    # Δ norm +0.35: its t-bound clears 0 at α (t₀.₉₇₅(6) = 2.45) but not at α / 3 (3.29)
    _clipping_table(0.35).to_parquet(tmp_path / "results.parquet")
    assert level(load_study(tmp_path).looks) == ALPHA
    states = {s[0]: s for s in claim_states(tmp_path, level(load_study(tmp_path).looks))}
    assert states[13] == (13, "supported", False, ("main",))
    (tmp_path / SEQUENTIAL_FILE).write_text(json.dumps(_state()))
    assert level(load_study(tmp_path).looks) == ALPHA / 3
    states = {s[0]: s for s in claim_states(tmp_path, level(load_study(tmp_path).looks))}
    assert states[13][1] == "inconclusive" and not states[13][2]  # near its margin, not power


def test_the_procedure_in_words():
    lines = procedure(_state())
    assert "at most 3 looks, each testing at α = 0.025 / 3 = 0.008333" in lines[0]
    assert "Looks made: 2." in lines[0]
    assert lines[1] == (
        "Look 1 at α = 0.008333: seeds added none; seeds per experiment main 3; claims lacking "
        "power after it: 13."
    )
    assert lines[2].startswith("Look 2 (not finished) at α = 0.008333: seeds added main +2")
    assert ci_label(ALPHA) == "95% CI" and ci_label(ALPHA / 3) == "98.33% CI"


def test_a_part_profile_reads_kind_and_metric_off_the_estimator():
    profiles = part_profiles(_clipping_table(0.35), [13])
    share, gap = profiles[(13, "clipped share")], profiles[(13, "Δ norm")]
    assert (share.kind, share.metric, share.dof(3)) == (LEVEL, "train/grad_clipped_frac", 2)
    # the reverse − forward contrast of a cell + seed fit over 4 cells: ν = 12 − 4 − 2 = 6
    assert (gap.kind, gap.metric, gap.dof(3)) == (CONTRAST, "train/grad_norm_mean", 6)


def test_an_underpowered_claim_says_what_would_decide_it(tmp_path):
    table = _clipping_table(0.35)
    table["time/run_s"] = 20.0
    table.to_parquet(tmp_path / "results.parquet")
    study = load_study(tmp_path)
    result = ClaimResult(13, "clipping", "inconclusive", "", "", reason="Δ norm: lacks power")
    (line,) = would_decide(study, [result])
    # both parts read training metrics (no evaluation samples): seeds only
    assert line == (
        "Claim 13 would be decided (80% power at the published values) with 2 seeds. "
        "An added seed is 4 runs × 20 s of training (≈ 1.3 min; time/run_s)."
    )


def test_every_claim_lacking_power_is_named_once(tmp_path):
    # a claim the planner cannot model (claim 24: Fisher's exact test) still gets its line,
    # and a study already at MORE_SAMPLES per item is not offered the same design twice
    from distillscope.scorecard.decide import MORE_SAMPLES

    table = _clipping_table(0.35)
    table.to_parquet(tmp_path / "results.parquet")
    study = load_study(tmp_path)
    why = "Δ collapse: lacks power (smallest effect the design decides: Δ collapse beyond +18.2 pp)"
    exact = ClaimResult(24, "collapse", "inconclusive", "", "", reason=why)
    (line,) = would_decide(study, [exact])
    assert line.startswith(f"Claim 24: {why}. Its test (an exact count") and "no seed plan" in line
    # the paper record evaluates accuracy at MORE_SAMPLES per item: claim 21's line offers
    # that design once ("75 seeds at 16 … or 75 seeds at 16 …" before)
    record = load_study(Path(__file__).parents[2] / "bench" / "records" / "paper-2026-12-03")
    lacking = ClaimResult(21, "regulation", "inconclusive", "", "", reason="lacks power")
    (line,) = would_decide(record, [lacking])
    assert line.count(f"at {MORE_SAMPLES} samples per item") == 1 and " or " not in line, line


def test_the_looks_are_read_with_the_study_and_stated_from_it(tmp_path):
    """sequential.json is read once, with the rest of the study (``Study.looks``): the level and
    the section's procedure both come from it; a study without it has neither."""
    from distillscope.scorecard.decide import TITLE, paragraphs

    _clipping_table(0.35).to_parquet(tmp_path / "results.parquet")
    assert load_study(tmp_path).looks is None and paragraphs(load_study(tmp_path), []) == []
    (tmp_path / SEQUENTIAL_FILE).write_text(json.dumps(_state()))
    study = load_study(tmp_path)
    assert study.looks == _state() and level(study.looks) == ALPHA / 3
    section = paragraphs(study, [])
    assert section[0] == TITLE and section[1].startswith("Seeds added until decided")
