"""The CLI's output anywhere: tables whole at any width or piped, hints not eaten as markup,
plain progress lines when output is not a terminal, and `study status` listing every run with
its state and last step (a dead study's running runs are interrupted, not running)."""

import io
import json

from rich.console import Console
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.cli.output import print_table
from distillscope.cli.progress import ProgressLog, duration
from distillscope.store import METRICS_FILE, PROGRESS_FILE, write_status
from distillscope.study.lock import StudyLock
from distillscope.study.run_study import INTERRUPTED, prepare, study_runs
from distillscope.study.spec import load_spec

runner = CliRunner()
NUMBERS = [["forward_k3", "0.012345678", "-1.25e-07"], ["reverse_k1", "12.5", "3.0"]]


def _printed(**console) -> str:
    out = io.StringIO()
    print_table(
        Console(file=out, **console), "t [x]", ("name", "bias", "std"), NUMBERS, numeric=[1, 2]
    )
    return out.getvalue()


def test_a_table_keeps_every_cell_whole_piped_or_narrow():
    for console in ({"width": 20}, {"width": 20, "force_terminal": True}):  # piped; narrow tty
        text = _printed(**console)
        assert "0.012345678" in text and "-1.25e-07" in text and "…" not in text
        assert text.splitlines()[0] == "t [x]"  # plain text: no markup read, no border
    wide = _printed(width=120, force_terminal=True)
    assert "┃" in wide and "0.012345678" in wide and "t [x]" in wide


def test_the_presets_table_keeps_its_install_hint():
    res = runner.invoke(app, ["presets"])
    assert res.exit_code == 0 and "distillscope[lmeval,lang]" in res.output


def test_progress_lines_every_n_steps_into_the_run_directory(tmp_path):
    out = io.StringIO()
    console = Console(file=out, width=40)  # not a terminal
    log = ProgressLog.for_steps("train r", 100, console, tmp_path)
    for step in range(1, 101):
        log.update(step, f"loss {1 / step:.4f}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 21  # the first step, then every 5th: 100 / LINES_PER_RUN
    assert lines[0].startswith("train r: step 1/100 loss 1.0000, elapsed ")
    assert lines[-1].startswith("train r: step 100/100 loss 0.0100") and "ETA 0s" in lines[-1]
    logged = (tmp_path / PROGRESS_FILE).read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in logged] == lines  # after the date and time
    assert [duration(s) for s in (5, 65, 3725)] == ["5s", "1m05s", "1h02m"]


def test_study_status_lists_runs_with_last_step_and_interrupted_runs(tmp_path):
    spec = load_spec("smoke")
    runs = prepare(spec, tmp_path)
    first, second = (tmp_path / "runs" / r.run_id for r in runs[:2])
    for run in (first, second):
        run.mkdir(parents=True)
    write_status(first, "running", phase="train")
    rows = [json.dumps({"step": s, "train/loss": 1.0}) for s in range(4)]
    (first / METRICS_FILE).write_text("\n".join(rows) + '\n{"step": 4, "tra')  # torn line
    write_status(second, "done")
    states = {s.run_id: s for s in study_runs(tmp_path)}
    assert states[runs[0].run_id].state == INTERRUPTED and states[runs[0].run_id].step == 4
    assert states[runs[1].run_id].state == "done" and states["baseline"].steps == 0
    with StudyLock(tmp_path):  # a live study holds the directory: its run is running
        assert {s.run_id: s.state for s in study_runs(tmp_path)}[runs[0].run_id] == "running"
    res = runner.invoke(app, ["study", "status", str(tmp_path)])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith(runs[0].run_id))
    assert line.split()[1:3] == [INTERRUPTED, f"4/{runs[0].config.optim.steps}"]
    assert all(r.run_id in res.output for r in runs)  # every run, not two examples
    assert "1 done" in res.output and f"1 {INTERRUPTED}" in res.output


def test_train_prints_progress_lines_when_not_a_terminal(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    run = tmp_path / "r"
    args = ["train", "--out", str(run), "--skip-eval", f"model.teacher={teacher}",
            f"model.student={student}", "optim.steps=3", "optim.warmup_steps=1",
            "rollout.prompts_per_step=2", "task.max_new_tokens=4"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    steps = [x for x in res.output.splitlines() if x.startswith("train run: step ")]
    assert [x.split()[3] for x in steps] == ["1/3", "2/3", "3/3"] and "ETA" in steps[-1]
    assert len((run / PROGRESS_FILE).read_text().splitlines()) == 3
