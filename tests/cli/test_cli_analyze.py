"""``distillscope analyze`` end to end on a tiny run directory, its bad inputs, and the report."""

from __future__ import annotations

import json
import shutil

import pandas as pd
from tests.eval.test_analysis import tiny_run
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.report import write_report

runner = CliRunner()
FAST = ["--prompts", "2", "--bins", "2"]


def test_gradients_and_estimators_end_to_end_then_the_report(tiny_pair, tmp_path):
    run = tiny_run(tmp_path / "study" / "runs" / "r0", tiny_pair)
    res = runner.invoke(app, ["analyze", "gradients", str(run), "--lams", "-1,1", *FAST])
    assert res.exit_code == 0, res.output
    assert "bounds hold" in res.output and "empirical B" in res.output
    data = json.loads((run / "analysis" / "gradients.json").read_text())
    assert all(c["holds"] for c in data["checks"]) and len(data["pairs"]) == 1
    res = runner.invoke(app, ["analyze", "estimators", str(run), "--lams", "0", "--samples", "4"])
    assert res.exit_code == 0, res.output
    assert "forward_k3" in res.output and "topk_tail" in res.output
    names = sorted(p.name for p in (run / "analysis").iterdir())
    assert names == [
        "estimators.json",
        "estimators.png",
        "gradient_difference.png",
        "gradients.json",
        "gradients.png",
    ]
    # a study whose run has analysis output gets the report section
    study = tmp_path / "study"
    row = {"run_id": "r0", "experiment": "main", "status": "done", "reason": ""}
    pd.DataFrame([row]).to_parquet(study / "results.parquet")
    paths = write_report(study)
    md = paths["markdown"].read_text()
    assert "## Gradient and estimator analysis" in md and "r0: gradient bounds" in md
    assert "Gradient and estimator analysis" in paths["html"].read_text()
    assert sorted(p.name for p in paths["figures"].glob("analysis_*")) == [
        "analysis_r0_estimators.png",
        "analysis_r0_gradient_difference.png",
        "analysis_r0_gradients.png",
    ]


def test_a_config_file_analyses_its_untrained_student(tiny_pair, tmp_path):
    run = tiny_run(tmp_path / "cfg", tiny_pair, trained=False)
    config = tmp_path / "run.yaml"
    shutil.copy(run / "config.yaml", config)
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["analyze", "estimators", str(config), "--lams", "1", "--out", str(out), *FAST]
    )
    assert res.exit_code == 0, res.output
    data = json.loads((out / "estimators.json").read_text())
    assert data["student"] == str(tiny_pair[1]) and data["lams"] == [1.0]


def test_bad_inputs_are_one_line_and_write_nothing(tiny_pair, tmp_path):
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    res = runner.invoke(app, ["analyze", "gradients", str(not_a_run)])
    assert res.exit_code == 2 and "not a run directory" in res.output
    assert str(not_a_run) in res.output.replace("\n", "") and "Traceback" not in res.output
    run = tiny_run(tmp_path / "run", tiny_pair)
    for lams, words in (("-1,x", "--lams"), ("5", "outside"), ("1,1", "twice")):
        res = runner.invoke(app, ["analyze", "gradients", str(run), "--lams", lams])
        assert res.exit_code == 2 and words in res.output, res.output
    res = runner.invoke(app, ["analyze", "estimators", str(run), "--topk", "-1"])
    assert res.exit_code == 2 and "--topk" in res.output
    res = runner.invoke(app, ["analyze", "estimators", str(run), "--samples", "0"])
    assert res.exit_code == 2 and "--samples" in res.output
    assert not (run / "analysis").exists() and list(not_a_run.iterdir()) == []


def test_a_served_teacher_is_refused_in_one_line_naming_the_field(tmp_path):
    from distillscope.config import dump_run_config, load_run_config

    served = ["model.teacher=http://127.0.0.1:9/v1", "objective.teacher_topk=4"]
    served += ["objective.teacher_temperature=1.0"]
    config = tmp_path / "served.yaml"
    config.write_text(dump_run_config(load_run_config(None, served)))
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(config, run / "config.yaml")
    for target in (config, run):
        res = runner.invoke(
            app, ["analyze", "gradients", str(target), "--out", str(tmp_path / "o")]
        )
        assert res.exit_code == 2, res.output
        line = res.output.replace("\n", "")
        assert "model.teacher is served (http://127.0.0.1:9/v1)" in line, res.output
        assert "Traceback" not in res.output and not (tmp_path / "o").exists()
