"""One test per hostile or careless input: one line on stderr, exit 2 (user) or 1 (internal).

Training here is tiny (2 steps of a 16-wide student, no evaluation unless asked).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from distillscope import __version__
from distillscope.cli import app
from distillscope.config import ConfigError, load_run_config
from distillscope.rollout.policies import NonFiniteSamplingError, sample_token
from distillscope.store import config_fingerprint, read_status, write_status
from distillscope.study.lock import StudyLock

runner = CliRunner()


def cli(*args: str):
    """(exit code, stderr when it failed — the error line — else all output)."""
    res = runner.invoke(app, list(args))
    return res.exit_code, (res.stderr if res.exit_code else res.output).strip()


def one_line(code: int, out: str, expected_code: int = 2) -> str:
    assert code == expected_code, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    return out


def tiny(tiny_pair, *more: str) -> list[str]:
    teacher, student = tiny_pair
    return [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "optim.steps=2",
        "optim.warmup_steps=1",
        "rollout.prompts_per_step=2",
        "task.max_new_tokens=4",
        "checkpoint_every=1",
        "eval.items=2",
        "eval.coverage_items=0",
        "eval.skill_items=0",
        "eval.harder_task=null",
        *more,
    ]


# --- a run belongs to one config ---------------------------------------------------------------


def test_second_config_in_one_run_dir_is_refused_naming_fields(tiny_pair, tmp_path):
    out = str(tmp_path / "r")
    code, text = cli("train", "--out", out, "--skip-eval", "--", *tiny(tiny_pair, "optim.lr=1e-4"))
    assert code == 0, text
    assert read_status(Path(out))["status"] == "trained"  # not "running" after --skip-eval
    code, text = cli("train", "--out", out, "--skip-eval", "--", *tiny(tiny_pair, "optim.lr=3e-4"))
    assert "optim.lr: 0.0001 → 0.0003" in one_line(code, text) and "--overwrite" in text
    # a label is not part of the fingerprint; --overwrite starts the run anew
    code, text = cli(
        "train", "--out", out, "--skip-eval", "--overwrite", "--", *tiny(tiny_pair, "optim.lr=3e-4")
    )
    assert code == 0, text
    rows = (Path(out) / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["train/lr"] for r in rows] == pytest.approx([3e-4, 3e-4])
    # eval of the trained run ends "done"
    code, text = cli("eval", out)
    assert code == 0, text
    assert read_status(Path(out))["status"] == "done"


def test_fingerprint_ignores_labels_only():
    cfg = load_run_config(None).model_dump(mode="json")
    fp, fields = config_fingerprint(cfg)
    assert fp == config_fingerprint({**cfg, "name": "other", "checkpoint_every": 7})[0]
    assert fp != config_fingerprint({**cfg, "seed": 7})[0]
    assert "name" not in fields and "optim.lr" in fields


@pytest.fixture
def trained(tiny_pair, tmp_path) -> Path:
    out = tmp_path / "run"
    code, text = cli("train", "--out", str(out), "--skip-eval", "--", *tiny(tiny_pair))
    assert code == 0, text
    return out


def test_truncated_checkpoint_on_eval_and_resume_names_the_file(trained, tiny_pair):
    weights = trained / "checkpoint" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    code, text = cli("eval", str(trained))
    assert "model.safetensors" in one_line(code, text) and "corrupt" in text
    (trained / "checkpoint" / "meta.json").write_text('{"step": 2, "optimizer": {}, "fing')
    code, text = cli("train", "--out", str(trained), "--", *tiny(tiny_pair))
    assert "meta.json" in one_line(code, text)


def test_checkpoint_with_other_tensors_is_refused(trained):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(3)}, trained / "checkpoint" / "model.safetensors")
    code, text = cli("eval", str(trained))
    assert "not a checkpoint of this model" in one_line(code, text)


def test_edited_config_yaml_is_refused_by_eval(trained):
    path = trained / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["optim"]["lr"] = 0.5
    path.write_text(yaml.safe_dump(cfg))
    code, text = cli("eval", str(trained))
    assert "optim.lr" in one_line(code, text)


# --- validation at load ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override,expected",
    [
        ("optim.steps=true", "optim.steps"),
        ("optim.lr=.inf", "finite"),
        ("optim.lr=true", "not a boolean"),
        ("optim.grad_clip=-1", "optim.grad_clip"),
        ("optim.grad_clip=.nan", "optim.grad_clip"),
        ("optim.betas=[0.9,1.0]", "[0, 1)"),
        ("optim.eps=0", "optim.eps"),
        ("rollout.student_temperature=0", "rollout.student_temperature"),
        ("eval.temperature=.inf", "eval.temperature"),
        ("optim.lrr=1", "did you mean 'optim.lr'"),
        ("optm.lr=1", "did you mean 'optim'"),
        ("task.file=x.jsonl", "task.file"),
        ("rollout.lam=0.5", "rollout.lam=0.5 is ignored under rollout.policy=student"),
        ("objective.beta=0.3", "objective.beta=0.3 is ignored under objective.kind=forward_kl"),
        ("optim.lr=[1,2", "not valid YAML"),
    ],
)
def test_bad_value_is_one_line_naming_the_field(tmp_path, override, expected):
    code, text = cli("train", "--out", str(tmp_path / "r"), "--", override)
    assert expected in one_line(code, text)
    assert not (tmp_path / "r").exists()


def test_setting_read_by_the_chosen_policy_is_accepted():
    cfg = load_run_config(None, ["rollout.policy=spectrum", "rollout.lam=0.5"])
    assert cfg.rollout.lam == 0.5
    cfg = load_run_config(None, ["rollout.lam=1.0"])  # the default is never an error
    with pytest.raises(ConfigError, match="teacher_temperature"):
        load_run_config(None, ["rollout.policy=spectrum", "rollout.teacher_temperature=0.9"])


@pytest.mark.parametrize(
    "override,expected",
    [
        ("model.device=banana", "'banana' is not a device"),
        ("model.dtype=float16", "float16 does not train on the CPU"),
    ],
)
def test_device_and_dtype_must_exist_here(tmp_path, override, expected):
    # low-precision weights are an explicit choice; this checks the machine, not that choice
    code, text = cli(
        "train", "--out", str(tmp_path / "r"), "--", override, "model.low_precision_weights=true"
    )
    assert expected in one_line(code, text)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line(tmp_path):
    code, text = cli("train", "--out", str(tmp_path / "r"), "--", "model.device=cuda")
    assert "no CUDA device" in one_line(code, text)


def test_empty_yaml_is_an_error(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    code, text = cli("train", str(tmp_path / "empty.yaml"))
    assert "is empty" in one_line(code, text)


def test_workers_zero_and_empty_axis(tmp_path):
    code, text = cli("study", "--preset", "smoke", "--workers", "0", "--out", str(tmp_path / "s"))
    assert "--workers must be at least 1" in one_line(code, text)
    spec = {"name": "e", "experiments": [{"name": "m", "axes": {"rollout.policy": []}}]}
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(spec))
    code, text = cli("study", str(tmp_path / "e.yaml"), "--out", str(tmp_path / "s"))
    assert "has no values" in one_line(code, text)


# --- study directories -------------------------------------------------------------------------


def test_locked_study_directory_names_its_holder(tmp_path):
    out = tmp_path / "s"
    with StudyLock(out):
        code, text = cli(
            "study", "--preset", "smoke", "--out", str(out), "--executor", "sequential"
        )
        assert f"PID {__import__('os').getpid()}" in one_line(code, text) and "in use" in text
    assert json.loads((out / ".lock").read_text() or "{}") == {}  # released and emptied


def test_stale_lock_file_of_a_dead_process_is_taken_over(tmp_path):
    (tmp_path / ".lock").write_text(json.dumps({"pid": 999999, "host": "x", "started": "then"}))
    with StudyLock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == __import__("os").getpid()


def test_corrupt_study_yaml_under_status(tmp_path):
    (tmp_path / "study.yaml").write_text("name: [unclosed\n")
    code, text = cli("study", "status", str(tmp_path))
    assert "study.yaml" in one_line(code, text)


def test_corrupt_status_json_counts_as_unfinished_and_is_named(tmp_path):
    from distillscope.study.run_study import prepare
    from distillscope.study.spec import load_spec

    runs = prepare(load_spec("smoke"), tmp_path)
    write_status(tmp_path / "runs" / runs[0].run_id, "done")
    write_status(tmp_path / "runs" / runs[1].run_id, "running")
    bad = tmp_path / "runs" / runs[1].run_id / "status.json"
    bad.write_text('{"status": "do')
    st = read_status(bad.parent)
    assert st["status"] == "pending" and str(bad) in st["reason"]
    code, text = cli("study", "status", str(tmp_path))
    assert code == 0 and "unreadable" in text and "pending" in text


def test_replaced_study_yaml_warns_in_the_report(tmp_path, capsys):
    import pandas as pd

    from distillscope.cli.report_cmd import warn_if_spec_replaced
    from distillscope.study.run_study import prepare
    from distillscope.study.spec import load_spec

    prepare(load_spec("smoke"), tmp_path)
    pd.DataFrame({"run_id": ["some_other_run"]}).to_parquet(tmp_path / "results.parquet")
    warn_if_spec_replaced(tmp_path)
    assert "was replaced" in capsys.readouterr().err


# --- the command line --------------------------------------------------------------------------


def test_version_exits_zero():
    code, text = cli("--version")
    assert code == 0 and __version__ in text


def test_missing_testbed_root_is_one_line_without_network(tmp_path, monkeypatch):
    import socket

    def no_network(*a, **k):
        raise AssertionError("distillscope tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    code, text = cli("testbed", "eval", "--root", str(tmp_path / "nonexist"))
    assert "nonexist" in one_line(code, text) and "does not exist" in text


def test_internal_error_exits_1_and_debug_shows_the_traceback(monkeypatch, tmp_path):
    import distillscope.study.run_study as runner_mod

    def broken(out):
        raise RuntimeError("boom")

    monkeypatch.setattr(runner_mod, "study_runs", broken)
    code, text = cli("study", "status", str(tmp_path))
    assert "internal error (RuntimeError): boom" in one_line(code, text, 1) and "--debug" in text
    res = runner.invoke(app, ["--debug", "study", "status", str(tmp_path)])
    assert isinstance(res.exception, RuntimeError)


# --- non-finite means diverged -----------------------------------------------------------------


def test_nan_sampling_distribution_is_caught_before_multinomial():
    logp = torch.full((2, 5), math.log(0.2))
    logp[1, 3] = math.nan
    with pytest.raises(NonFiniteSamplingError):
        sample_token(logp, torch.Generator().manual_seed(0))


def test_nan_student_marks_the_run_diverged_at_step_0(tiny_pair, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    student = AutoModelForCausalLM.from_pretrained(tiny_pair[1])
    with torch.no_grad():
        for p in student.parameters():
            p.fill_(math.nan)
    student.save_pretrained(tmp_path / "nan")
    AutoTokenizer.from_pretrained(tiny_pair[1]).save_pretrained(tmp_path / "nan")
    out = tmp_path / "r"
    code, text = cli(
        "train", "--out", str(out), "--", *tiny(tiny_pair, f"model.student={tmp_path / 'nan'}")
    )
    assert code == 0, text
    st = read_status(out)
    assert st["status"] == "diverged"
    assert st["reason"].startswith("step 0:") and "sampling distribution" in st["reason"]
