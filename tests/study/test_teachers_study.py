"""Issue 37 end to end: one study whose teacher axis holds two routed teachers, a teacher with
another tokenizer and a teacher cache built once, trained and evaluated on CPU with tiny models;
its report shows each teacher (report/teachers.py) and names the cross-tokenizer objective."""

from __future__ import annotations

import math

import pandas as pd
from tests.conftest import save_tiny_llama
from tests.objectives.test_token_alignment import arithmetic_bpe

from distillscope.report.render import write_report
from distillscope.report.teachers import teacher_table
from distillscope.results.aggregate import cell_columns
from distillscope.results.reader import finished_runs
from distillscope.store import read_metrics, run_dir
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec, expand
from distillscope.teacher.manifest import MANIFEST
from distillscope.train.cache_build import build_teacher_cache


def _spec(teacher, other, bpe_teacher, student, cache) -> StudySpec:
    """A study of one student and one experiment whose ``teacher`` axis (a bundle) is two
    routed teachers (OnPD), the BPE teacher under ULD (OnPD) and the cache (OffPD, top-4).

    Each cell names its teachers: under ``model.teachers`` a ``model.teacher`` is refused, so the
    base names none."""
    return StudySpec.model_validate(
        {
            "name": "teachers-37",
            "base": {
                "model": {"student": str(student)},
                "task": {"max_new_tokens": 6},
                "rollout": {"policy": "student", "prompts_per_step": 4, "rollouts_per_prompt": 2},
                "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-3},
                "checkpoint_every": 0,
                "eval": {"items": 4, "coverage_items": 0, "skill_items": 0, "harder_task": None},
            },
            "experiments": [
                {
                    "name": "teachers",
                    "axes": {
                        "teacher": {
                            "routed": {
                                "model.teachers": {"big": str(teacher), "other": str(other)},
                                "model.route": {
                                    "by": "mixture",
                                    "weights": {"big": 1, "other": 1},
                                },
                            },
                            "bpe": {"model.teacher": str(bpe_teacher), "objective.kind": "uld"},
                            "cached": {
                                "model.teacher": str(teacher),
                                "model.teacher_cache": str(cache),
                                "rollout.policy": "teacher",
                                "objective.teacher_topk": 4,
                            },
                        }
                    },
                }
            ],
        }
    )


def test_routed_cross_tokenizer_and_cached_teachers_in_one_study(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    other = save_tiny_llama(tmp_path / "other", hidden=24, layers=1, seed=3)
    bpe = save_tiny_llama(tmp_path / "bpe", hidden=32, layers=2, seed=1, tok=arithmetic_bpe())
    cache = tmp_path / "cache"
    spec = _spec(teacher, other, bpe, student, cache)
    # the cache is built once from the cached cell's own config, as `teacher-cache build` would
    (cell,) = [r for r in expand(spec) if r.axes["teacher"] == "cached"]
    build = cell.config.model_copy(
        update={"model": cell.config.model.model_copy(update={"teacher_cache": None})}
    )
    manifest = build_teacher_cache([build], cache, "test")
    shards = sorted(manifest["shards"])

    study = tmp_path / "study"
    df = pd.read_parquet(run_study(spec, study))
    runs = df[df["experiment"] == "teachers"].set_index("teacher")
    assert sorted(runs.index) == ["bpe", "cached", "routed"]
    assert set(df["status"]) == {"done"}, df.set_index("run_id")["status"].to_dict()  # baselines
    assert len(runs.groupby(cell_columns(runs), dropna=False)) == 3  # three cells

    def metrics(label):
        return read_metrics(run_dir(study, runs.loc[label, "run_id"]))

    # the routed run: per-teacher keys in metrics.jsonl, both teachers read over the run
    routed = metrics("routed")
    assert len(routed) == 2
    for name in ("big", "other"):
        assert any(f"teacher/{name}/loss" in r for r in routed), name
        assert runs.loc["routed", f"teacher/{name}/seconds_s"] > 0
    assert sum(r.get("teacher/big/share", 0) + r.get("teacher/other/share", 0) for r in routed) == 2
    # the cross-tokenizer run: its objective's diagnostics
    for r in metrics("bpe"):
        assert 0 < r["objective/uld_distance"] <= 2
        assert 0 < r["objective/aligned_exact_share"] < 1
    # the cached run read the cache (saved teacher time) and wrote nothing to it
    assert all(r["time/teacher_saved"] > 0 for r in metrics("cached"))
    saved = runs["time/teacher_saved_s"]
    assert saved["cached"] > 0 and saved["bpe"] == saved["routed"] == 0
    assert sorted(p.name for p in cache.iterdir()) == sorted([*shards, MANIFEST])

    # the report: a row per teacher, routed teachers by name, the objective labelled
    table = teacher_table(finished_runs(df))
    labels = [row[0] for row in table.rows]
    assert labels == sorted([str(teacher), str(bpe)]) + ["big (routed)", "other (routed)"]
    for row in table.rows:
        assert row[1] != "0" and row[4] != "—", row  # runs, the teacher's seconds
    write_report(study)
    md = (study / "report" / "report.md").read_text()
    html = (study / "report" / "report.html").read_text()
    for text in (md, html):
        assert "Teachers" in text and "big (routed)" in text and "other (routed)" in text
        assert "ULD (cross-tokenizer)" in text
    assert "| OnPD | ULD (cross-tokenizer) |" in md  # the cell table's Objective column
    # the summary's scope names every teacher that ran — the routed ones by name, each with
    # its size — and never a routed run's unused default model.teacher (issue 44 class 5)
    assert runs.loc["routed", "teacher/big/params"] > 0 < runs.loc["routed", "teacher/other/params"]
    scope = html.split("<dt>Teachers</dt><dd>")[1].split("</dd>")[0]
    for name in (str(teacher), str(bpe), f"big={teacher}", f"other={other}"):
        assert name in scope, (name, scope)
    assert "parameters not recorded" not in scope and "testbed:teacher" not in md + html
    assert math.isfinite(runs.loc["bpe", "eval/accuracy"])
