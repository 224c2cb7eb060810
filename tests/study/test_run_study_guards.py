"""Guards of the study runner's resume decision and its study.yaml (no run is executed).

``_unfinished`` decides which planned runs a (re-)run executes: every status but ``done`` and
``diverged``, a corrupt status.json included. ``prepare`` writes study.yaml on a first run, accepts
the same study again and refuses a different one in one line.
"""

from __future__ import annotations

import pytest
import yaml

from distillscope.config import ConfigError
from distillscope.store import STATUSES, write_status
from distillscope.study.run_study import (
    FINISHED,
    UNREADABLE,
    _unfinished,
    prepare,
    study_status,
)
from distillscope.study.spec import StudySpec, expand


def _spec(lrs=(1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3), name="guards") -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": name,
            "base": {
                "model": {"teacher": "/nonexistent/teacher", "student": "/nonexistent/student"},
                "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-3},
            },
            "experiments": [{"name": "main", "axes": {"optim.lr": list(lrs)}}],
        }
    )


def test_finished_means_done_or_diverged():
    assert set(FINISHED) == {"done", "diverged"}


def test_unfinished_is_every_run_not_done_nor_diverged(tmp_path):
    runs = expand(_spec())
    assert len(runs) == 6
    for run, status in zip(runs, STATUSES, strict=True):  # one run in each status
        write_status(tmp_path / "runs" / run.run_id, status, "")
    by_id = dict(zip((r.run_id for r in runs), STATUSES, strict=True))
    left = _unfinished(runs, tmp_path)
    assert sorted(by_id[r.run_id] for r in left) == ["failed", "pending", "running", "trained"]
    assert [r.run_id for r in left] == [r.run_id for r in runs if by_id[r.run_id] not in FINISHED]


def test_unfinished_counts_missing_and_corrupt_status_as_unfinished(tmp_path):
    runs = expand(_spec(lrs=(1e-3, 2e-3, 3e-3)))
    write_status(tmp_path / "runs" / runs[0].run_id, "done", "")
    (tmp_path / "runs" / runs[1].run_id).mkdir(parents=True)
    (tmp_path / "runs" / runs[1].run_id / "status.json").write_text("{not json")
    assert _unfinished(runs, tmp_path) == runs[1:]  # corrupt and absent: both run again
    # the status is read in the run's own directory under runs/, nowhere else
    write_status(tmp_path / runs[2].run_id, "done", "")
    assert _unfinished(runs, tmp_path) == runs[1:]
    assert _unfinished(runs, tmp_path / "elsewhere") == runs


def test_prepare_writes_study_yaml_in_a_new_nested_directory(tmp_path):
    spec = _spec()
    out = tmp_path / "a" / "b" / "study"
    runs = prepare(spec, out)
    assert [r.run_id for r in runs] == [r.run_id for r in expand(spec)]
    text = (out / "study.yaml").read_text()
    assert yaml.safe_load(text) == spec.model_dump(mode="json")
    assert list(yaml.safe_load(text)) == list(spec.model_dump(mode="json"))  # field order kept
    assert StudySpec.model_validate(yaml.safe_load(text)) == spec


def test_prepare_accepts_the_same_study_again_and_refuses_another(tmp_path):
    out = tmp_path / "study"
    prepare(_spec(), out)
    before = (out / "study.yaml").read_text()
    assert len(prepare(_spec(), out)) == 6  # resume: the same study
    assert (out / "study.yaml").read_text() == before
    message = rf"^{out} holds a different study \(changed .*; pass --overwrite .*--out$"
    with pytest.raises(ConfigError, match=message):
        prepare(_spec(lrs=(1e-3,)), out)
    assert (out / "study.yaml").read_text() == before  # the old study is left as it was


def test_prepare_refuses_an_unreadable_study_yaml_in_one_line(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    (out / "study.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="choose another --out to start anew") as err:
        prepare(_spec(), out)
    assert "\n" not in str(err.value)


def test_study_status_lists_a_corrupt_status_as_pending_and_unreadable(tmp_path):
    runs = prepare(_spec(lrs=(1e-3, 2e-3)), tmp_path)
    write_status(tmp_path / "runs" / runs[0].run_id, "done", "")
    (tmp_path / "runs" / runs[1].run_id).mkdir(parents=True)
    (tmp_path / "runs" / runs[1].run_id / "status.json").write_text("{not json")
    by = study_status(tmp_path)
    assert by["done"] == [runs[0].run_id]
    assert runs[1].run_id in by["pending"]
    assert by[UNREADABLE] == [runs[1].run_id]
    assert all(runs[0].run_id not in ids for status, ids in by.items() if status != "done")
