"""The RLVR stage's loop: schedule, training from a parent's student, resume, evaluation and
bad input — on the shipped testbed student, whose skill-sub accuracy (~78%) gives every step
groups with both outcomes."""

import json
import shutil

import pytest

from distillscope.config import RLVRConfig, load_run_config
from distillscope.models.locate import testbed_path as shipped_model
from distillscope.store import read_eval, read_metrics, read_status
from distillscope.study.run_one import run_one
from distillscope.train.grpo import cosine_lr, grpo

from .conftest import tensorboard_rows

PARENT = "main_parent"


@pytest.fixture
def runs(tmp_path):
    """A study's runs/ directory holding one parent run that exported the testbed student."""
    shutil.copytree(shipped_model("student"), tmp_path / "runs" / PARENT / "student")
    return tmp_path / "runs"


def rlvr_cfg(**over):
    items = [
        f"rlvr.parent={PARENT}",
        "rlvr.task=skill-sub",
        "rlvr.steps=4",
        "rlvr.prompts_per_step=2",
        "rlvr.group_size=4",
        "rlvr.lr=1e-3",
        "task.max_new_tokens=12",
        "checkpoint_every=2",
        "eval.items=8",
        "eval.harder_task=tb-countdown3-hard",
    ] + [f"{k}={v}" for k, v in over.items()]
    return load_run_config(None, items)


def strip_timings(rows):
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


def test_cosine_schedule_warms_up_then_decays_towards_zero():
    r = RLVRConfig(parent="p", steps=10, lr=1.0, warmup_fraction=0.2)
    lrs = [cosine_lr(r, k) for k in range(10)]
    assert lrs[:2] == [0.5, 1.0]  # two warm-up steps
    assert lrs[2] == 1.0  # the decay starts at the peak
    assert all(a > b for a, b in zip(lrs[2:-1], lrs[3:], strict=True))  # then falls every step
    assert 0.0 < lrs[-1] < 0.05  # towards 0, never 0 at a trained step


def test_rlvr_trains_from_the_parent_and_resumes_with_the_same_metrics(runs):
    cfg = rlvr_cfg()
    grpo(cfg, runs / "a")
    rows = read_metrics(runs / "a")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert all(r["rlvr/reward"] == pytest.approx(2.0 * r["rlvr/accuracy"]) for r in rows)
    mixed = [r for r in rows if r["rlvr/groups_mixed"] > 0]
    assert mixed and all(r["train/grad_norm"] > 0 for r in mixed)
    assert read_status(runs / "a")["status"] == "trained"
    assert (runs / "a" / "student" / "model.safetensors").is_file()

    def killed_at_step_2(step, row):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grpo(cfg, runs / "b", on_step=killed_at_step_2)
    grpo(cfg, runs / "b")
    assert strip_timings(read_metrics(runs / "b")) == strip_timings(rows)


def test_run_one_evaluates_before_and_after_on_the_same_items(runs):
    cfg = rlvr_cfg()
    run_one(cfg, runs / "child")
    out = read_eval(runs / "child")
    assert read_status(runs / "child")["status"] == "done"
    for key in ("rlvr/eval_accuracy", "rlvr/eval_accuracy_before", "rlvr/harder_accuracy"):
        assert 0.0 <= out[key] <= 1.0
    assert out["split/rlvr/eval_accuracy/eval_items"] == 8
    assert out["split/rlvr/eval_accuracy/overlap"] == 0
    assert out["rlvr/reward_final"] == pytest.approx(
        read_metrics(runs / "child")[-1]["rlvr/reward"]
    )
    # "before" is the parent's student on the same items and draws: an RLVR run with no update
    # scores the same before and after
    still = rlvr_cfg(**{"rlvr.lr": "1e-30"})
    run_one(still, runs / "still")
    e = read_eval(runs / "still")
    assert e["rlvr/eval_accuracy"] == e["rlvr/eval_accuracy_before"]
    assert e["rlvr/harder_accuracy"] == e["rlvr/harder_accuracy_before"]


def test_the_harder_variant_is_measured_once_when_it_is_the_rlvr_task(runs):
    cfg = rlvr_cfg(**{"rlvr.task": "tb-countdown3-hard", "rlvr.steps": 1})
    run_one(cfg, runs / "child")
    out = read_eval(runs / "child")
    assert "rlvr/eval_accuracy" in out and "rlvr/harder_accuracy" not in out


def test_a_missing_parent_is_one_line_and_writes_nothing(runs):
    cfg = rlvr_cfg(**{"rlvr.parent": "main_nobody"})
    with pytest.raises(FileNotFoundError, match="rlvr.parent main_nobody") as err:
        grpo(cfg, runs / "child")
    assert "\n" not in str(err.value)
    assert not (runs / "child").exists()


def test_the_config_records_the_parent_and_rlvr_settings(runs):
    cfg = rlvr_cfg()
    grpo(cfg, runs / "a")
    text = (runs / "a" / "config.yaml").read_text()
    assert f"parent: {PARENT}" in text and "task: skill-sub" in text
    assert json.loads((runs / "a" / "status.json").read_text())["status"] == "trained"


def test_before_repeats_the_parents_own_harder_variant_number(runs):
    """On the testbed the RLVR task is the harder variant: "before" is the parent's number."""
    from distillscope.eval.evaluate import evaluate
    from distillscope.models.load import load_model

    # skill-sub stands for the harder variant: the testbed student scores ~78% on it
    cfg = rlvr_cfg(**{"eval.harder_task": "skill-sub", "rlvr.steps": 1, "eval.items": 16})
    parent_cfg = cfg.model_copy(update={"rlvr": None})
    student, _ = load_model(runs / PARENT / "student")
    parent = evaluate(parent_cfg, runs / PARENT, student)
    run_one(cfg, runs / "child")
    before = read_eval(runs / "child")["rlvr/eval_accuracy_before"]
    assert 0.0 < before < 1.0 and before == parent["eval/harder_accuracy"]


def test_rlvr_logs_its_rows_to_the_trackers(runs):
    """The run machinery is distill's (train/machinery.py): TensorBoard gets every metrics row."""
    cfg = rlvr_cfg(**{"rlvr.steps": 2, "log.trackers": "[tensorboard]"})
    grpo(cfg, runs / "a")
    rows = read_metrics(runs / "a")
    logged = tensorboard_rows(runs / "a" / "tensorboard")
    assert sorted(logged) == [0, 1]
    for row in rows:  # TensorBoard keeps fp32 scalars
        assert logged[row["step"]]["train/loss"] == pytest.approx(row["train/loss"], rel=1e-6)
