"""The report names a spectrum's sampling temperatures (docs/method.md §3 "The spectrum's ends").

``rollout.spectrum_temperatures`` is ``paper`` (both models at T = 1.0, [P]) or ``policies``
(each at its pure policy's temperature); a table written before the option existed has no such
column and means ``paper``. The OffPD runs of a spectrum experiment count at λ = −1 only when
the spectrum's λ = −1 is OffPD (``policies``); otherwise they are left out, and the evidence
says so.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.report.figures import likelihood_figure, spectrum_figure
from distillscope.report.grids import spectrum_grid
from distillscope.report.tables import experiment_tables, main_table
from distillscope.results.aggregate import (
    SPECTRUM_TEMPERATURES,
    comparable_spectrum,
    spectrum_temperature_label,
    spectrum_temperatures,
    spectrum_temperatures_text,
)
from distillscope.results.reader import finished_runs
from distillscope.scorecard.runner import score_claims

PAPER = "paper (both at T = 1.0)"
POLICIES = "policies (each at its sampling temperature)"
LAMS = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)


def _spectrum_rows(synth, temperatures: str | None, offpd: bool = False) -> list[dict]:
    """A published-looking spectrum under both KL directions (as ``full_rows``), optionally
    with OffPD runs in the spectrum experiment; ``temperatures`` None: an old table."""
    rows = []
    for kind in ("forward_kl", "reverse_kl"):
        for i, lam in enumerate(LAMS):
            wiggle = 0.01 * (i % 3 - 1)
            acc = (0.72 if kind == "forward_kl" else 0.55 + 0.08 * lam) + wiggle
            for seed, k in synth.SEEDS.items():
                jitter = 0.002 * k * (i % 2)  # seed × cell noise: a table not exactly additive
                values = {
                    "lam": lam,
                    "eval/accuracy": acc + 0.01 * k + jitter,
                    "rollout/student_token_prob_mean": 0.5 + 0.1 * lam + jitter,
                    "rollout/teacher_token_prob_mean": 0.6 - 0.08 * lam + jitter,
                }
                rows.append(synth.run_row("spectrum", "spectrum", kind, synth.LOW, seed, **values))
        if offpd:
            for seed, k in synth.SEEDS.items():
                acc = {"eval/accuracy": 0.60 + 0.01 * k, "tag": "-offpd"}
                rows.append(synth.run_row("spectrum", "teacher", kind, synth.LOW, seed, **acc))
    if temperatures is not None:
        for row in rows:
            spectrum = row["rollout.policy"] == "spectrum"
            row[SPECTRUM_TEMPERATURES] = temperatures if spectrum else "paper"
    return rows


def test_temperatures_are_read_from_the_config_column_old_tables_are_paper(synth):
    old = pd.DataFrame(_spectrum_rows(synth, None))
    assert SPECTRUM_TEMPERATURES not in old.columns
    assert spectrum_temperatures(old) == ["paper"]
    assert spectrum_temperatures_text(old) == PAPER
    new = pd.DataFrame(_spectrum_rows(synth, "policies"))
    assert spectrum_temperatures(new) == ["policies"]
    assert spectrum_temperatures_text(new) == POLICIES
    unrecorded = new.assign(**{SPECTRUM_TEMPERATURES: math.nan})
    assert spectrum_temperatures(unrecorded) == ["paper"]
    both = pd.concat([old, new])
    assert spectrum_temperatures_text(both) == f"{PAPER} and {POLICIES}"
    main = pd.DataFrame(synth.grid("main", synth.main_cells(synth.PAPER_ACC)))
    assert spectrum_temperatures(main) == [] and spectrum_temperatures_text(main) == ""
    assert spectrum_temperature_label("teacher", "paper") == "—"
    assert spectrum_temperature_label("spectrum", None) == PAPER


@pytest.mark.parametrize("temperatures", [None, "paper"])
def test_paper_spectrum_leaves_its_offpd_cells_out(synth, temperatures):
    rows = _spectrum_rows(synth, temperatures, offpd=True)
    grid = spectrum_grid(finished_runs(pd.DataFrame(rows)))
    kept, note = comparable_spectrum(grid)
    assert set(kept["rollout.policy"]) == {"spectrum"}
    assert len(kept) == len(grid) - 6
    assert note.startswith("6 OffPD run(s) left out of the λ-spectrum")
    assert PAPER in note and "not OffPD" in note


def test_policies_spectrum_keeps_its_offpd_cells(synth):
    grid = spectrum_grid(finished_runs(pd.DataFrame(_spectrum_rows(synth, "policies", offpd=True))))
    kept, note = comparable_spectrum(grid)
    assert kept.equals(grid) and note == ""
    plain = spectrum_grid(finished_runs(pd.DataFrame(_spectrum_rows(synth, None))))
    kept, note = comparable_spectrum(plain)  # no OffPD runs: nothing to leave out
    assert kept.equals(plain) and note == ""


def _claims(df: pd.DataFrame) -> dict[int, object]:
    return {r.id: r for r in score_claims(df, strict=True, claims=(6, 7, 8))}


def test_spectrum_claims_say_which_cells_they_left_out(synth):
    base = [synth.baseline_row()]
    plain = _claims(pd.DataFrame(_spectrum_rows(synth, None) + base))
    paper = _claims(pd.DataFrame(_spectrum_rows(synth, "paper", offpd=True) + base))
    policies = _claims(pd.DataFrame(_spectrum_rows(synth, "policies", offpd=True) + base))
    for claim in (6, 8):
        # Under paper temperatures the OffPD runs are left out: the verdict is the one without
        # them, and the evidence names what was left out.
        assert paper[claim].verdict == plain[claim].verdict
        assert "6 OffPD run(s) left out" in paper[claim].evidence
        assert "left out" not in plain[claim].evidence
        assert "left out" not in policies[claim].evidence
    assert plain[6].verdict == "supported"


def test_tables_and_figures_name_the_temperatures(synth, tmp_path):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    for temperatures, words in ((None, PAPER), ("policies", POLICIES)):
        df = finished_runs(pd.DataFrame(rows + _spectrum_rows(synth, temperatures, offpd=True)))
        table = experiment_tables(df)["spectrum"]
        column = table.columns.index("Spectrum temperatures")
        assert table.columns[0] == "Rollout" and column == 1
        assert {r[column] for r in table.rows if r[0] == "OffPD"} == {"—"}
        assert {r[column] for r in table.rows if r[0] != "OffPD"} == {words}
        assert "Spectrum temperatures" not in main_table(df).columns
        out = tmp_path / (temperatures or "old")
        out.mkdir()
        spectrum = spectrum_figure(df, out)
        assert spectrum.title == f"λ-spectrum of rollout policies — {words}"
        ends = "λ = −1 is OffPD" if temperatures == "policies" else "the teacher at T = 1.0"
        assert ends in spectrum.caption
        assert ("OffPD run(s) left out" in spectrum.caption) == (temperatures is None)
        assert likelihood_figure(df, out).title == f"Trajectory likelihood against λ — {words}"
