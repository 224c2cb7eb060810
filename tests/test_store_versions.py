"""Older run directories and studies still resume (distillscope.store_versions).

``tests/data/store_versions/`` keeps a study of every schema version, run from ``study.yaml``
there (two 2-step runs, student- and teacher-written, with the teacher's rollouts cached, and the
untrained student's baseline) by ``write_study.py`` with the code of the version:

- ``v1-*``: commit ee21ac4, before run directories recorded their schema version;
- ``v2-*``: commit 3a1d9e1, the first to record version 2 (before the fields of version 3);
- ``v3-*``: commit c2f9a97, the last of version 3 (paths kept as typed);
- ``v4-*``: this version (paths resolved, stored absolute).

``vN-done`` is a finished study; ``vN-killed`` one whose process was killed in its last run's
last step (that run ``running``, with metrics and no checkpoint); ``vN-relative`` (from version
3) a finished study of ``study-relative.yaml``, whose ``task.file`` is relative. The weights
were left out: a finished run is never reloaded to resume or report a study. Raising
``SCHEMA_VERSION`` means writing ``vN-done`` and ``vN-killed`` of the new version
(``write_study.py`` says how).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import evaluation_key, load_run_config
from distillscope.rollout.cache import key_digest
from distillscope.rollout.scoring import LogitScores
from distillscope.store import (
    CONFIG_FILE,
    FINGERPRINT_FILE,
    RESULTS_FILE,
    StoreError,
    check_run_config,
    claim_run,
    read_fingerprint,
)
from distillscope.store_versions import (
    ADDED_FIELDS,
    SCHEMA_VERSION,
    TEACHER_KEY_ADDED,
    skipped_fields,
)
from distillscope.study.run_study import run_study
from distillscope.study.spec import load_spec
from distillscope.teacher.scorer import _rollout_key, _score_key

STORE = Path(__file__).parent / "data" / "store_versions"
STUDY_V1 = STORE / "v1-done"
RUNS = sorted(p for p in (STUDY_V1 / "runs").iterdir())
VERSIONS = range(1, SCHEMA_VERSION + 1)
#: the studies with a relative task.file, one of each version since 3 (when a version changes
#: how paths are stored, it adds one)
RELATIVE = ("v3-relative", "v4-relative")


@pytest.fixture
def study(tmp_path: Path) -> Path:
    out = tmp_path / "study"
    shutil.copytree(STUDY_V1, out)
    return out


def _dump(run: Path) -> dict:
    return load_run_config(run / CONFIG_FILE, stored=True).model_dump(mode="json")


def test_the_fixture_is_a_version_1_study_with_every_added_field_at_its_default():
    assert [p.name for p in RUNS] == [
        "baseline",
        "main_policy-student_49c26c9c",
        "main_policy-teacher_1d3e0eb1",
    ]
    for run in RUNS:
        assert "schema_version" not in read_fingerprint(run)
        assert skipped_fields(_dump(run), 1) == set(ADDED_FIELDS)
        assert skipped_fields(_dump(run), SCHEMA_VERSION) == set()


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_a_version_1_run_directory_matches_its_config(run: Path, tmp_path: Path):
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    recorded = (copy / FINGERPRINT_FILE).read_text()
    fingerprint = check_run_config(copy, _dump(copy))
    assert fingerprint == json.loads(recorded)["fingerprint"]
    assert claim_run(copy, _dump(copy)) == fingerprint
    assert (copy / FINGERPRINT_FILE).read_text() == recorded  # read, never rewritten
    if (copy / "checkpoint" / "meta.json").is_file():  # what a resumed run compares with
        assert json.loads((copy / "checkpoint" / "meta.json").read_text())["step"] == 2
        assert json.loads((copy / "checkpoint" / "meta.json").read_text())["fingerprint"] == (
            fingerprint
        )
    changed = _dump(copy)
    changed["optim"]["lr"] = 0.5
    with pytest.raises(StoreError, match=r"optim.lr: 0.001 → 0.5"):
        check_run_config(copy, changed)


def test_a_version_1_study_resumes_without_rerunning_anything(study: Path):
    before = pd.read_parquet(study / "results.parquet")
    metrics = {p: (p / "metrics.jsonl").read_text() for p in (study / "runs").glob("main_*")}
    spec = load_spec(STUDY_V1 / "study.yaml")
    steps: list[str] = []
    after = pd.read_parquet(run_study(spec, study, on_step=lambda r, s, row: steps.append(r)))
    assert steps == []  # nothing trained again
    assert {p: (p / "metrics.jsonl").read_text() for p in metrics} == metrics
    assert sorted(after["run_id"]) == sorted(before["run_id"])
    keep = [c for c in before.columns if not c.startswith("time/")]
    pd.testing.assert_frame_equal(
        after[keep].sort_values("run_id").reset_index(drop=True),
        before[keep].sort_values("run_id").reset_index(drop=True),
    )


def test_a_new_run_directory_records_its_schema_version(tmp_path: Path):
    config = _dump(RUNS[1])
    fingerprint = claim_run(tmp_path / "run", config)
    recorded = read_fingerprint(tmp_path / "run")
    assert recorded["schema_version"] == SCHEMA_VERSION and recorded["fingerprint"] == fingerprint
    assert recorded["fields"]["rollout.engine"] == "builtin"  # every field, at any value
    assert check_run_config(tmp_path / "run", config) == fingerprint


def test_a_directory_of_a_newer_version_is_refused_in_one_line(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(RUNS[1], run)
    recorded = read_fingerprint(run)
    (run / FINGERPRINT_FILE).write_text(json.dumps({**recorded, "schema_version": 99}))
    with pytest.raises(StoreError, match=r"schema version 99; this distillscope reads versions 1"):
        check_run_config(run, _dump(run))
    with pytest.raises(StoreError, match="schema version 99"):
        claim_run(run, _dump(run))


def _cached_keys() -> list[tuple[str, dict]]:
    return [
        (p.name.removesuffix(".key.json"), json.loads(p.read_text()))
        for p in sorted((STUDY_V1 / "rollout-cache").glob("*.key.json"))
    ]


def test_the_rollout_cache_of_a_version_1_study_is_still_found():
    """This version's keys for the fixture's runs are the ones the study wrote: the teacher's
    rollouts and scores (teacher/scorer.py) and the untrained student's skills (evaluation_key)."""
    teacher = load_run_config(RUNS[2] / CONFIG_FILE, stored=True)
    student = load_run_config(RUNS[1] / CONFIG_FILE, stored=True)
    found = set()
    for digest, key in _cached_keys():
        if "skills_before" in key:
            ours = {"skills_before": evaluation_key(student)}
        else:
            ours = _rollout_key(teacher, key["step"], key["prompts"])
            if "scores" in key:
                ours |= _score_key(teacher, LogitScores, key["vocab_size"])
        assert ours == key and key_digest(ours) == digest
        found.add(digest)
    assert len(found) == 5
    assert set(TEACHER_KEY_ADDED) == {"instruction", "engine"}
    told = teacher.model_copy(
        update={"rollout": teacher.rollout.model_copy(update={"engine": "vllm"})}
    )
    assert _rollout_key(told, 0, "p")["engine"] == "vllm"  # set: it changes the rollouts


# ---------------------------------------------------------------------------------------------
# A study of every schema version: read, resumed and reported by the command line
# ---------------------------------------------------------------------------------------------


def _version(study: Path) -> set[int]:
    return {read_fingerprint(run).get("schema_version", 1) for run in (study / "runs").iterdir()}


def _run_files(study: Path) -> dict[str, bytes]:
    """Every file of the study's runs, by path: what a resume must leave alone."""
    return {
        str(p.relative_to(study)): p.read_bytes()
        for p in sorted((study / "runs").rglob("*"))
        if p.is_file()
    }


def _cli(*args: str | Path) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args], terminal_width=200)
    assert res.exit_code == 0, res.output
    return res.output


def _resume(study: Path, *args: str) -> str:
    """``distillscope study`` again, with the study's own file: how a user resumes."""
    return _cli("study", study / "study.yaml", "--out", study, "--executor", "sequential",
                "--no-calibrate", *args)  # fmt: skip


def _copy(name: str, tmp_path: Path) -> Path:
    shutil.copytree(STORE / name, tmp_path / name)
    return tmp_path / name


def test_a_study_of_every_schema_version_is_kept():
    """Raising SCHEMA_VERSION without a fixture of the new version fails here."""
    for version in VERSIONS:
        for state in ("done", "killed"):
            assert _version(STORE / f"v{version}-{state}") == {version}
    assert {p.name for p in STORE.iterdir() if p.is_dir()} == {
        f"v{v}-{s}" for v in VERSIONS for s in ("done", "killed")
    } | set(RELATIVE)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_finished_study_of_every_version_resumes_with_nothing_to_do_and_reports(
    version: int, tmp_path: Path
):
    study = _copy(f"v{version}-done", tmp_path)
    before, table = _run_files(study), pd.read_parquet(study / RESULTS_FILE)
    assert "report:" in _cli("report", study, "--no-calibrate")  # reported as it was written
    assert (study / "report" / "report.html").is_file()
    _resume(study, "--no-report")
    assert _run_files(study) == before  # nothing trained, evaluated or re-fingerprinted again
    after = pd.read_parquet(study / RESULTS_FILE)
    keep = [c for c in table.columns if not c.startswith("time/")]
    pd.testing.assert_frame_equal(
        after[keep].sort_values("run_id").reset_index(drop=True),
        table[keep].sort_values("run_id").reset_index(drop=True),
    )


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_killed_study_of_every_version_finishes_its_unfinished_run(version: int, tmp_path: Path):
    study = _copy(f"v{version}-killed", tmp_path)
    killed = next((study / "runs").glob("main_policy-teacher_*"))
    status = _cli("study", "status", study)
    assert killed.name in status and "interrupted" in status  # its process is gone
    before = _run_files(study)
    assert "report:" in _resume(study)  # the report of the finished study
    after = _run_files(study)
    for path, data in before.items():  # the finished runs and the killed run's fingerprint
        if not path.startswith(f"runs/{killed.name}/") or path.endswith(FINGERPRINT_FILE):
            assert after[path] == data, path
    assert json.loads((killed / "status.json").read_text())["status"] == "done"
    assert len((killed / "metrics.jsonl").read_text().splitlines()) == 2  # trained again, once
    assert _version(study) == {version}  # its directories keep the version that wrote them
    table = pd.read_parquet(study / RESULTS_FILE)
    assert sorted(table["run_id"]) == sorted(p.name for p in (study / "runs").iterdir())


def test_a_version_2_directory_matches_with_or_without_the_fields_added_while_2_was_current(
    tmp_path: Path,
):
    """Version 2 was current while the fields of version 3 were added: a directory written
    before them records none (v2-done), one written after records them at their default."""
    added = {k for k, a in ADDED_FIELDS.items() if a.version == 3}
    assert added == {
        "eval.samples_per_item", "eval.harder_samples_per_item", "eval.skill_samples_per_item",
        "model.teacher_cache", "model.teachers", "model.route",
    }  # fmt: skip
    early = STORE / "v2-done" / "runs" / RUNS[1].name
    assert not added & set(read_fingerprint(early)["fields"])
    check_run_config(early, _dump(early))
    late = tmp_path / "late"
    shutil.copytree(STORE / "v3-done" / "runs" / RUNS[1].name, late)
    recorded = read_fingerprint(late)
    assert added <= set(recorded["fields"])
    (late / FINGERPRINT_FILE).write_text(json.dumps({**recorded, "schema_version": 2}))
    assert check_run_config(late, _dump(late)) == recorded["fingerprint"]
    changed = _dump(late)
    changed["eval"]["samples_per_item"] = 4
    with pytest.raises(StoreError, match=r"eval.samples_per_item: 1 → 4"):
        check_run_config(late, changed)


# ---------------------------------------------------------------------------------------------
# Relative paths: kept as typed before version 4, resolved since
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RELATIVE)
def test_a_moved_study_with_a_relative_path_reports_and_resumes_from_elsewhere(
    name: str, tmp_path: Path, monkeypatch
):
    """The study directory copied elsewhere (its task file with it), the commands run from a
    third directory: the report reads the store, the resume finds every run finished."""
    study = _copy(name, tmp_path)
    _names_nothing_here(study)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    before, table = _run_files(study), pd.read_parquet(study / RESULTS_FILE)
    assert "report:" in _cli("report", study, "--no-calibrate")
    assert "done" in _cli("study", "status", study)
    _resume(study, "--no-report")
    assert _run_files(study) == before  # nothing trained, evaluated or re-fingerprinted again
    after = pd.read_parquet(study / RESULTS_FILE).sort_values("run_id").reset_index(drop=True)
    table = table.sort_values("run_id").reset_index(drop=True)
    # its rows named the file as typed (v3) or where the study was written (v4, absolute: a
    # directory of another machine); resumed, where the file is now
    (written,) = {v.removeprefix("mcq:") for v in table["task.dataset"]}
    assert written.endswith("tasks/colors.jsonl")
    assert Path(written).is_absolute() == (name == "v4-relative")
    assert set(after["task.dataset"]) == {f"mcq:{study / 'tasks' / 'colors.jsonl'}"}
    keep = [c for c in table.columns if not c.startswith("time/") and c != "task.dataset"]
    pd.testing.assert_frame_equal(after[keep], table[keep])


def _names_nothing_here(study: Path) -> None:
    """The directory the fixture ``study`` was written in names nothing on this machine (it
    moved here): else its stored paths still name the files there, and nothing moves."""
    cwd = read_fingerprint(next((study / "runs").iterdir())).get("cwd")
    if cwd and Path(cwd).exists():
        pytest.skip(f"{cwd}, where the fixture was written, exists on this machine")


@pytest.mark.slow
def test_a_moved_study_of_this_version_trains_its_unfinished_run_on_the_moved_file(
    tmp_path: Path, monkeypatch
):
    """``v4-relative`` moved here with one of its runs killed before its first step's
    checkpoint: the resume finds the task file where it moved to, keeps the run's id and
    fingerprint, trains it again (its cached rollouts name the old file: computed again) and
    leaves the finished runs alone."""
    study = _copy("v4-relative", tmp_path)
    _names_nothing_here(study)
    killed = next((study / "runs").glob("main_policy-teacher_*"))
    for name in ("eval.json", "eval_items.parquet", "samples.jsonl", "metrics.jsonl"):
        (killed / name).unlink(missing_ok=True)
    shutil.rmtree(killed / "checkpoint")  # kept without its weights: as if never written
    (killed / "status.json").write_text(json.dumps({"status": "running", "phase": "train"}))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    before = _run_files(study)
    _resume(study, "--no-report")
    after = _run_files(study)
    for path, data in before.items():
        if not path.startswith(f"runs/{killed.name}/") or path.endswith(FINGERPRINT_FILE):
            assert after[path] == data, path
    assert json.loads((killed / "status.json").read_text())["status"] == "done"
    assert len((killed / "metrics.jsonl").read_text().splitlines()) == 2
    table = pd.read_parquet(study / RESULTS_FILE)
    assert sorted(table["run_id"]) == sorted(p.name for p in (study / "runs").iterdir())


def test_a_version_3_run_matches_its_config_with_the_path_resolved(tmp_path: Path):
    """A version-3 directory holds ``task.file: tasks/colors.jsonl``; this version's config of
    the same run holds it absolute, wherever the study now sits: the fingerprint matches, and
    another file does not."""
    run = tmp_path / "run"
    shutil.copytree(STORE / "v3-relative" / "runs" / RUNS[1].name.replace("49c26c9c", "40950bb4"),
                    run)  # fmt: skip
    assert read_fingerprint(run)["fields"]["task.file"] == "tasks/colors.jsonl"
    config = _dump(run)
    config["task"]["file"] = str(tmp_path / "moved" / "tasks" / "colors.jsonl")
    assert check_run_config(run, config) == read_fingerprint(run)["fingerprint"]
    config["task"]["file"] = str(tmp_path / "moved" / "other" / "colors.jsonl")
    with pytest.raises(StoreError, match="task.file"):
        check_run_config(run, config)


def test_a_version_4_study_stores_its_paths_resolved_and_as_typed():
    spec = load_spec(STORE / "v4-relative" / "study.yaml", stored=True)
    (resolved,) = spec.typed_paths
    assert spec.base["task"]["file"] == resolved and Path(resolved).is_absolute()
    assert spec.typed_paths[resolved] == "tasks/colors.jsonl"
    for run in (STORE / "v4-relative" / "runs").iterdir():
        assert _dump(run)["task"]["file"] == resolved
