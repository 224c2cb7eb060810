"""A teacher cache built once (``teacher-cache build``) is read by runs as their teacher.

On the shipped testbed: a run reading the cache gives the live top-k teacher's run; a cache
built for another teacher, task, temperature, k, seed or fewer steps is refused in one line
before anything is written, as are a missing or corrupt shard or manifest; a build that fails
leaves nothing behind.
"""

from __future__ import annotations

import json
import shutil

import pytest
from tests.train.test_distill import strip_timings
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import load_run_config
from distillscope.rollout.cache import CacheMissError, RolloutCache
from distillscope.store import read_metrics, read_status
from distillscope.study.run_one import run_one
from distillscope.teacher.manifest import MANIFEST, TeacherCacheError, check_teacher_cache
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.cache_build import build_teacher_cache
from distillscope.train.loop import distill

RUN = [
    "rollout.policy=teacher",
    "objective.teacher_topk=4",
    "optim.steps=2",
    "optim.grad_accum=2",
    "rollout.prompts_per_step=4",
    "task.max_new_tokens=8",
    "checkpoint_every=0",
]


def _cfg(*extra: str):
    return load_run_config(None, [*RUN, *extra])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The cache of RUN's two steps, built through the command line."""
    out = tmp_path_factory.mktemp("teacher-cache") / "cache"
    result = CliRunner().invoke(app, ["teacher-cache", "build", *RUN, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out}: 12 files")  # 2 steps × (rollouts, scores)
    return out


def test_a_run_reading_the_cache_equals_the_live_top_k_run(built, tmp_path):
    distill(_cfg(), tmp_path / "live")
    distill(_cfg(f"model.teacher_cache={built}"), tmp_path / "cached")
    live, cached = read_metrics(tmp_path / "live"), read_metrics(tmp_path / "cached")
    assert [r["train/loss"] for r in cached] == pytest.approx(
        [r["train/loss"] for r in live], rel=1e-5, abs=0
    )
    assert strip_timings(cached) == strip_timings(live)  # the same bits replayed: exact
    assert all(r["time/teacher_saved"] > 0 for r in cached)
    assert {p.name for p in built.iterdir()} == {
        *json.loads((built / MANIFEST).read_text())["shards"],
        MANIFEST,
    }  # read only: nothing added


def test_the_manifest_records_what_the_cache_was_built_for(built):
    manifest = json.loads((built / MANIFEST).read_text())
    identity = manifest["identity"]
    assert (manifest["seeds"], manifest["steps"], manifest["k"]) == ([42], 2, 4)
    assert identity["model.teacher"] == "testbed:teacher"
    assert len(identity["teacher_fingerprint"]) == 64
    assert identity["rollout.teacher_temperature"] == 0.5
    assert identity["task.name"] == "tb-countdown3" and identity["task.max_new_tokens"] == 8


@pytest.mark.parametrize(
    "override,message",
    [
        ("task.name=tb-countdown4e", 'built for task.name="tb-countdown3", this run has'),
        ("rollout.teacher_temperature=0.7", "built for rollout.teacher_temperature=0.5, this run"),
        ("objective.teacher_topk=8", "built for objective.teacher_topk=4, this run has 8"),
        ("optim.grad_accum=1", "built for optim.grad_accum=2, this run has 1"),
        ("seed=7", "covers seeds [42], not seed 7"),
        ("optim.steps=3", "covers steps 0…1, this run has optim.steps=3"),
        ("rollout.policy=student", "serves off-policy runs of a top-k teacher"),
    ],
)
def test_a_mismatch_is_refused_in_one_line_before_anything_is_written(
    built, tmp_path, override, message
):
    cfg = _cfg(f"model.teacher_cache={built}", override)
    with pytest.raises(TeacherCacheError) as err:
        distill(cfg, tmp_path / "run")
    text = str(err.value)
    assert text.startswith(f"model.teacher_cache {built}: ") and message in text, text
    assert "\n" not in text
    assert not (tmp_path / "run").exists()


def test_another_teacher_is_refused(built, tiny_pair):
    cfg = _cfg(f"model.teacher_cache={built}", f"model.teacher={tiny_pair[0]}")
    with pytest.raises(TeacherCacheError, match='built for model.teacher="testbed:teacher"'):
        check_teacher_cache(cfg)


def _damaged(built, tmp_path, damage) -> str:
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    damage(copy)
    with pytest.raises(TeacherCacheError) as err:
        distill(_cfg(f"model.teacher_cache={copy}"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert "\n" not in str(err.value)
    return str(err.value)


def _shard(root):
    return sorted(root.glob("*.safetensors"))[0]


def _flip(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def test_a_corrupt_shard_is_one_line(built, tmp_path):
    text = _damaged(built, tmp_path, lambda root: _flip(_shard(root)))
    assert text.startswith("teacher cache shard ") and "is corrupt" in text


def test_a_missing_shard_is_one_line(built, tmp_path):
    text = _damaged(built, tmp_path, lambda root: _shard(root).unlink())
    assert text.startswith("teacher cache shard ") and "is missing" in text


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda root: (root / MANIFEST).unlink(), "has no manifest.json"),
        (lambda root: (root / MANIFEST).write_text("{"), "is not JSON; the cache is corrupt"),
        (lambda root: (root / MANIFEST).write_text("{}"), "lacks one of format"),
        (lambda root: shutil.rmtree(root), "does not exist"),
    ],
)
def test_a_missing_or_corrupt_manifest_is_one_line(built, tmp_path, damage, message):
    assert message in _damaged(built, tmp_path, damage)


def test_an_entry_the_cache_lacks_fails_the_run_in_one_line(built, tmp_path):
    # a cache whose manifest holds only step 0 (as if built for other prompts at step 1): the
    # preflight passes, the run stops at step 1 with one line and writes nothing to the cache
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    for key in copy.glob("*.key.json"):
        if json.loads(key.read_text())["step"] == 1:
            for path in copy.glob(key.name.removesuffix(".key.json") + ".*"):
                del manifest["shards"][path.name]
                path.unlink()
    (copy / MANIFEST).write_text(json.dumps(manifest))
    files = sorted(p.name for p in copy.iterdir())
    with pytest.raises(CacheMissError):
        run_one(_cfg(f"model.teacher_cache={copy}"), tmp_path / "run")
    reason = read_status(tmp_path / "run")["reason"]
    assert f"{copy} holds no entry for seed 42, step 1 of this run" in reason
    assert "\n" not in reason
    assert len(read_metrics(tmp_path / "run")) == 1  # step 0 was trained
    assert sorted(p.name for p in copy.iterdir()) == files


def test_a_frozen_cache_never_writes_a_missing_entry(tmp_path):
    cache = RolloutCache(tmp_path, frozen=True)
    with pytest.raises(CacheMissError, match=r"holds no entry for seed 1, step 3 of this run"):
        cache.fetch({"seed": 1, "step": 3}, lambda: pytest.fail("made"))
    assert list(tmp_path.iterdir()) == []


def test_a_build_that_fails_leaves_nothing(tmp_path, monkeypatch):
    def fail(self, step, prompts, batches):
        raise RuntimeError("killed")

    monkeypatch.setattr(TeacherScorer, "scores", fail)
    with pytest.raises(RuntimeError, match="killed"):
        build_teacher_cache([_cfg()], tmp_path / "cache", "cfg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "extra,message",
    [
        (["rollout.policy=student"], "cfg: no run writes teacher rollouts"),
        (["objective.teacher_topk=0"], "cfg: a teacher cache holds top-k scores"),
        (["model.teacher_cache=/x"], "cfg: model.teacher_cache is set"),
    ],
)
def test_what_a_build_cannot_do_is_refused_in_one_line(tmp_path, extra, message):
    with pytest.raises(TeacherCacheError, match=message):
        build_teacher_cache([_cfg(*extra)], tmp_path / "cache", "cfg")
    assert not (tmp_path / "cache").exists()


def test_a_build_into_an_existing_directory_is_refused(built):
    result = CliRunner().invoke(app, ["teacher-cache", "build", *RUN, "--out", str(built)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {built} exists; teacher-cache build writes a new directory"
    )


def test_runs_that_differ_in_the_cache_identity_are_refused(tmp_path):
    runs = [_cfg(), _cfg("rollout.teacher_temperature=0.7")]
    with pytest.raises(TeacherCacheError, match="its runs differ in rollout.teacher_temperature"):
        build_teacher_cache(runs, tmp_path / "cache", "study s")
