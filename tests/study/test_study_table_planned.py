"""``planned_row``: a planned run's row with placeholders for what its config measures."""

import math

from distillscope.scorecard.calibrate import planned_table
from distillscope.study.spec import expand, load_spec
from distillscope.study.table import PLANNED, planned_row


def test_planned_rows_carry_what_each_config_measures():
    runs = expand(load_spec("paper"))
    rows = {r.run_id: (r, planned_row(r)) for r in runs}
    for run, row in rows.values():
        rlvr = run.config.rlvr is not None
        assert ("rlvr/eval_accuracy" in row) == rlvr and (
            "rlvr/eval_accuracy_before" in row
        ) == rlvr
        # the harder variant is measured apart only when it is not the RLVR task itself (the
        # `grpo` baseline trains on the distillation task; the `rlvr` stage on the variant)
        other = rlvr and run.config.rlvr.task != run.config.eval.harder_task
        assert ("rlvr/harder_accuracy" in row) == other
        n = run.config.eval.coverage_samples
        assert ("eval/pass@32" in row) == (n >= 32) and ("eval/pass@20" in row) == (n >= 20)
        assert row["model/teacher_params"] > 0  # the shipped teachers' safetensors headers
    opd = [row for run, row in rows.values() if run.experiment == "opd"]
    assert opd and all(row["eval/pass@32"] == PLANNED for row in opd)
    sizes = {row["model/teacher_params"] for run, row in rows.values()
             if run.experiment == "teacher_scale"}  # fmt: skip
    assert len(sizes) == 2
    table = planned_table([row for _, row in rows.values()])
    base = table[table["experiment"] == "baseline"].iloc[0]
    assert base["eval/pass@32"] > 0 and math.isnan(base["model/teacher_params"])


def test_an_rlvr_run_on_another_task_plans_the_harder_variant_too():
    spec = load_spec("paper-qwen")
    run = next(r for r in expand(spec) if r.experiment == "rlvr")
    row = planned_row(run)
    assert run.config.rlvr.task == "countdown4" and run.config.eval.harder_task == "countdown4e"
    assert {k for k in row if k.startswith("rlvr/")} == {
        "rlvr/eval_accuracy", "rlvr/eval_accuracy_before",
        "rlvr/harder_accuracy", "rlvr/harder_accuracy_before",
    }  # fmt: skip
    assert math.isnan(row["model/teacher_params"])  # /models/… does not exist here
