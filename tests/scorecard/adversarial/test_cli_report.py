"""The adversarial tables through `distillscope report` (the CLI, black box): four copies of
the `opd` experiment's nine rows do not make claim 21 supported (issue 33)."""

from __future__ import annotations

from typer.testing import CliRunner

from distillscope.cli import app

from . import published as P
from .tables import Table, duplicate, score

SMALL_GAIN = {"none": 50.0, "hard_clip": 53.5, "log_compress": 53.5}


def test_copied_rows_do_not_decide_claim_21_in_the_written_report(tmp_path):
    t = Table(seed=0, noise=1.5)
    P.opd(t, SMALL_GAIN)
    P.untrained(t)
    df = t.frame()
    copied = duplicate(df, df["experiment"] == "opd", 3, same_id=True)
    verdict = score(copied, 21, tmp_path / "study").verdict
    assert verdict == "inconclusive"
    result = CliRunner().invoke(app, ["report", str(tmp_path / "study"), "--no-calibrate"])
    assert result.exit_code == 0, result.output
    rows = (tmp_path / "study" / "report" / "report.md").read_text().splitlines()
    line = next(r for r in rows if r.startswith("|") and "Regulated OPD beats naive OPD" in r)
    assert "inconclusive" in line and "supported" not in line
