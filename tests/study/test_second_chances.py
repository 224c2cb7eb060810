"""Second chances: re-evaluation with other evaluation settings (weights untouched), a run that
failed before its first step leaves nothing that blocks the corrected rerun, and a study whose
spec changed says what differs and, with --overwrite, resumes its unchanged runs."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError
from distillscope.store import checkpoint_dir, read_status
from distillscope.study.run_study import run_study

runner = CliRunner()
TINY = [
    "optim.steps=2",
    "optim.warmup_steps=0",
    "rollout.prompts_per_step=2",
    "task.max_new_tokens=6",
    "checkpoint_every=2",
    "eval.items=2",
    "eval.coverage_items=0",
    "eval.skill_items=0",
    "eval.harder_task=null",
]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_pair):
    """A tiny run trained for 2 steps and evaluated on 2 items."""
    out = tmp_path_factory.mktemp("second") / "run"
    pair = [f"model.teacher={tiny_pair[0]}", f"model.student={tiny_pair[1]}"]
    res = runner.invoke(app, ["train", "--out", str(out), *pair, *TINY])
    assert res.exit_code == 0, res.output
    return out


def test_eval_with_overrides_keeps_the_weights_and_the_old_evaluation(trained):
    weights = checkpoint_dir(trained) / "model.safetensors"
    before, first = _digest(weights), json.loads((trained / "eval.json").read_text())
    res = runner.invoke(app, ["eval", str(trained), "eval.items=3", "eval.temperature=1.0"])
    assert res.exit_code == 0, res.output
    latest = json.loads((trained / "eval.json").read_text())
    assert (first["split/eval_items"], latest["split/eval_items"]) == (2, 3)
    assert json.loads((trained / "eval-1.json").read_text()) == first  # kept beside
    assert (trained / "samples-1.jsonl").is_file() and (trained / "eval_items-1.parquet").is_file()
    history = [json.loads(line) for line in (trained / "evals.jsonl").read_text().splitlines()]
    assert history[-1]["overrides"] == ["eval.items=3", "eval.temperature=1.0"]
    assert history[-1]["replaced"] == "eval-1.json"
    assert _digest(weights) == before and read_status(trained)["status"] == "done"
    # the config the run was trained with is unchanged: its fingerprint still matches
    assert "items: 2" in (trained / "config.yaml").read_text()


def test_eval_refuses_training_fields_and_a_failing_evaluation_changes_nothing(trained):
    res = runner.invoke(app, ["eval", str(trained), "optim.lr=1.0"])
    assert res.exit_code == 2 and "only eval.* settings change after training" in res.output
    kept = (trained / "eval.json").read_bytes()
    res = runner.invoke(app, ["eval", str(trained), "eval.harder_task=tb-nope"])
    assert res.exit_code == 2 and "tb-nope" in res.output
    assert (trained / "eval.json").read_bytes() == kept
    assert read_status(trained)["status"] == "done"


def test_a_run_failed_before_its_first_step_does_not_block_the_fix(tmp_path, tiny_pair):
    out = tmp_path / "run"
    pair = [f"model.teacher={tiny_pair[0]}", f"model.student={tiny_pair[1]}"]
    # the testbed tokenizer has no chat template: the run fails while encoding its prompts
    res = runner.invoke(app, ["train", "--out", str(out), *pair, *TINY, "task.prompt_format=chat"])
    assert res.exit_code != 0 and read_status(out)["status"] == "failed"
    res = runner.invoke(app, ["train", "--out", str(out), *pair, *TINY])
    assert res.exit_code == 0, res.output
    assert read_status(out)["status"] == "done"


def test_a_changed_study_lists_what_differs_and_overwrite_resumes(tmp_path, tiny_study):
    out = tmp_path / "study"
    kinds = ["forward_kl"]
    first = tiny_study({"objective.kind": kinds}, steps=2, checkpoint_every=2, skill_items=0)
    run_study(first, out)
    (kept,) = [p for p in (out / "runs").iterdir() if p.name.startswith("main")]
    stamp = (kept / "metrics.jsonl").stat().st_mtime_ns
    second = tiny_study(
        {"objective.kind": [*kinds, "reverse_kl"]}, steps=2, checkpoint_every=2, skill_items=0
    )
    with pytest.raises(ConfigError) as err:
        run_study(second, out)
    assert "experiments.main.axes.objective.kind" in str(err.value)
    assert "1 runs unchanged (they resume), 1 new, 0 no longer planned" in str(err.value)
    spec = tmp_path / "second.yaml"
    spec.write_text(yaml.safe_dump(second.model_dump(mode="json")))
    args = ["study", str(spec), "--out", str(out), "--executor", "sequential", "--no-report"]
    res = runner.invoke(app, [*args, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert "runs unchanged (resume): 1" in res.output and "runs new: 1" in res.output
    assert (kept / "metrics.jsonl").stat().st_mtime_ns == stamp  # resumed, not retrained
    assert all(read_status(p)["status"] == "done" for p in (out / "runs").iterdir())
