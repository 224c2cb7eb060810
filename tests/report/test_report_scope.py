"""A report readable alone (docs/method.md §9 "Scope"; issue 44 class 5): the summary opens with
what was studied — models with parameter counts, tasks, steps, seeds, runs — before any verdict,
and names it in the verdict words; the main table carries the untrained student's row; the run
count agrees with ``study status``; an assumed noise is not labelled as measured; a percentage
axis stays inside [0, 100]."""

from __future__ import annotations

import pytest

from distillscope.report import write_report
from distillscope.report.figures import y_range
from distillscope.report.scope import params_text, study_scope
from distillscope.report.summary import noise_source
from distillscope.results import load_study

MODELS = {
    "model/student_params": 860032.0,
    "model/teacher_params": 1929024.0,
    "model.teacher": "testbed:teacher",
    "task.dataset": "tb-countdown3",
    "train/steps_done": 150,
}


def _study(synth, root, models=MODELS):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), **models)
    base = {k: v for k, v in models.items() if k == "model/student_params"}
    rows += [
        {**synth.baseline_row(**base), "seed": s, "run_id": f"baseline-{k}"}
        for k, s in enumerate((42, 43, 44), start=1)
    ]
    return synth.write_study(root, rows, spec={"name": "scope"})


@pytest.fixture(scope="module")
def written(synth, tmp_path_factory):
    root = _study(synth, tmp_path_factory.mktemp("scope") / "study")
    paths = write_report(root)
    return root, paths["html"].read_text(), paths["markdown"].read_text()


def test_the_summary_names_the_models_before_any_verdict(written):
    _, html, md = written
    for text in (html, md):
        summary = text.split("Summary of findings")[1]
        first_verdict = min(summary.find(w) for w in ("Supported", "Contradicted") if w in summary)
        scope = summary[:first_verdict]
        assert "testbed:student (0.86M)" in scope and "testbed:teacher (1.93M)" in scope
        assert "tb-countdown3" in scope and "150 optimisation steps per run" in scope
        assert "24 runs (24 finished) and 3 evaluations of the untrained student" in scope


def test_verdict_words_name_what_was_tested(written):
    _, html, md = written
    scope = "with testbed:student (0.86M) on tb-countdown3"
    assert f"Supported {scope}" in md and f"Supported {scope}" in html
    assert f"this study ({scope}) supports" in md


def test_a_record_without_parameter_counts_says_so(synth, tmp_path):
    models = {k: v for k, v in MODELS.items() if "params" not in k}
    s = study_scope(load_study(_study(synth, tmp_path / "old", models)))
    assert s.lines()[0] == ("Student", "testbed:student (parameters not recorded)")
    assert s.phrase() == "with testbed:student on tb-countdown3"


def test_parameter_counts_read_as_a_reviewer_writes_them():
    assert [params_text(n) for n in (860032, 1.5e9, 35_000, 1929024)] == [
        "0.86M",
        "1.5B",
        "35K",
        "1.93M",
    ]
    assert params_text(float("nan")) == ""


def test_the_main_table_names_its_models_and_has_the_untrained_student_row(written):
    _, _, md = written
    main = md.split("## Main grid")[1].split("\n\n#")[0]
    row = next(line for line in main.splitlines() if line.startswith("| untrained student"))
    assert row.startswith("| untrained student | — | — | 3 | 30.0 ± ")
    # the table names its models and task, so that it reads alone
    lead = "testbed:student (0.86M) distilled from testbed:teacher (1.93M) on tb-countdown3"
    assert f"{lead}; the last row is the untrained student" in main


def test_the_run_count_agrees_with_study_status(written):
    root, html, md = written
    # ``study status`` lists every run directory, the baselines' included
    total = len(list((root / "runs").glob("*/status.json")))
    assert total == 27  # 24 runs and 3 baselines
    assert f"| total | {total} |" in md
    assert "| of them, untrained-student evaluations | 3 |" in md


def test_an_assumed_noise_is_not_labelled_as_measured():
    measured = {"per_item": True, "assumed": False, "k": 1}
    assumed = {"per_item": True, "assumed": True, "k": 1}
    assert noise_source(measured) == "per-item outcomes"
    assert noise_source(assumed).startswith("assumed default SDs (nothing to estimate from)")


@pytest.mark.parametrize(
    ("lo", "hi", "percent", "want"),
    [
        (-0.05, 0.05, True, (0.0, 5.0)),  # an all-zero accuracy
        (-2.5, 2.5, True, (0.0, 5.0)),
        (98.0, 100.5, True, (95.0, 100.0)),  # an all-100% accuracy
        (-2.0, 1.0, False, (-3.0, 2.0)),  # forgetting (pp) may be negative
        (30.0, 80.0, True, (30.0, 80.0)),
    ],
)
def test_a_percentage_axis_stays_inside_its_range(lo, hi, percent, want):
    assert y_range(lo, hi, percent) == pytest.approx(want)
