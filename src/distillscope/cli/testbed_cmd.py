"""``distillscope testbed``: the built-in testbed models (docs/testbed.md).

distillscope testbed info                    # sizes, build times, accuracies at build time
distillscope testbed eval                    # measure the shipped weights again
distillscope testbed build --out DIR         # train them from scratch (hours on 2 cores)
distillscope testbed build --out DIR --recipe regime --only student   # the student's base phase
distillscope testbed build --like T --like S --out DIR   # tiny random copies of your models
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from distillscope.cli.errors import friendly_errors
from distillscope.cli.output import console


def testbed_app() -> typer.Typer:
    """The ``testbed`` sub-app, each command wrapped in ``friendly_errors``."""
    app = typer.Typer(no_args_is_help=True, help="The built-in testbed models.")
    app.command("info")(friendly_errors(testbed_info_cmd))
    app.command("eval")(friendly_errors(testbed_eval_cmd))
    app.command("build")(friendly_errors(testbed_build_cmd))
    return app


def _accuracy_table(title: str, measured: dict) -> Table:
    table = Table(title=title)
    table.add_column("measure")
    table.add_column("teacher", justify="right")
    table.add_column("student", justify="right")
    t, s = measured["teacher"], measured["student"]
    table.add_row(
        "Countdown-3 accuracy", f"{t['countdown3_accuracy']:.1%}", f"{s['countdown3_accuracy']:.1%}"
    )
    if "countdown3_accuracy_style_flag" in t:
        table.add_row("  with style flag", f"{t['countdown3_accuracy_style_flag']:.1%}", "")
        table.add_row("  answers in alt style", f"{t['alt_style_share_with_flag']:.1%}", "")
    for key, label in (
        ("harder_accuracy", "harder variant accuracy"),
        ("harder_pass@10", "  pass@10"),
    ):
        if key in t:
            table.add_row(label, f"{t[key]:.1%}", f"{s[key]:.1%}")
    for key, label in (
        ("countdown3_pass@32", "Countdown-3 pass@32 (T=1)"),
        ("alt_style_share_with_flag_t1", "  alt style with flag (T=1)"),
    ):
        if key in s:
            table.add_row(label, "", f"{s[key]:.1%}")
    table.add_row("skill-suite mean", f"{t['skill_mean']:.1%}", f"{s['skill_mean']:.1%}")
    for name in s["skills"]:
        table.add_row(f"  {name}", f"{t['skills'][name]:.1%}", f"{s['skills'][name]:.1%}")
    return table


def testbed_info_cmd(
    root: Path = typer.Option(None, help="testbed directory (default: the shipped one)"),
) -> None:
    """Print the testbed models' sizes and the accuracies measured when they were built."""
    from distillscope.testbed import WEIGHTS_DIR, testbed_info

    info = testbed_info(root or WEIGHTS_DIR)
    console.print(f"testbed at {root or WEIGHTS_DIR}")
    for role, n in info["parameters"].items():
        spec = info["recipe"][role]
        console.print(
            f"  {role}: {n:,} parameters (Llama, hidden {spec['hidden_size']}, "
            f"{spec['num_hidden_layers']} layers)"
        )
    rec = info["records"]
    console.print(
        f"  pretraining: teacher {rec['teacher']['train_seconds'] / 60:.0f} min, student "
        f"{rec['student']['train_seconds'] / 60:.0f} min (in parallel, one thread each); "
        f"teacher sharpening {rec['teacher'].get('sharpen_seconds', 0) / 60:.0f} min"
        + (
            f"; student base phase {rec['student']['base_seconds'] / 60:.0f} min"
            if "base_seconds" in rec["student"]
            else ""
        )
    )
    for role, extra in info.get("extra", {}).items():  # further teachers (build --only NAME)
        spec, m = extra["recipe"]["model"], extra["measured"]
        console.print(
            f"  {role}: {extra['parameters']:,} parameters (Llama, hidden {spec['hidden_size']}, "
            f"{spec['num_hidden_layers']} layers), built in "
            f"{_extra_seconds(extra['record']) / 60:.0f} min; Countdown-3 "
            f"{m['countdown3_accuracy']:.1%}, skill-suite mean {m['skill_mean']:.1%}"
        )
    console.print(_regime_table(info))
    ev = info["eval"]
    console.print(
        _accuracy_table(
            f"measured at build time ({ev['items']} held-out {ev['task']} items, "
            f"seed {ev['seed']}, "
            f"T={ev['temperature']})",
            info["measured"],
        )
    )


def _regime_table(info: dict) -> Table:
    """Every regime target (:data:`~distillscope.testbed.regime.TARGETS`) with its value."""
    from distillscope.testbed.regime import regime_rows

    table = Table(title="the papers' regime (docs/testbed.md): targets and measured values")
    for name, justify in (("target", "left"), ("wanted", "right"), ("measured", "right")):
        table.add_column(name, justify=justify)
    table.add_column("holds")
    table.add_column("where measured")
    for target, value, note in regime_rows(info, opd_answer_budget()):
        holds = {True: "yes", False: "NO", None: "—"}[target.holds(value)]
        shown = "—" if value is None else target.format(value)
        table.add_row(target.label, target.bounds(), shown, holds, note or "build evaluation")
    return table


def opd_answer_budget(preset: str = "paper", experiment: str = "opd") -> int:
    """``max_new_tokens`` of ``experiment`` in ``preset`` (its override, else the base task's):
    the answer budget the regime's ``opd_budget`` target compares with the mean answer."""
    from distillscope.safeyaml import load_yaml_file
    from distillscope.study.spec import PRESETS_DIR

    spec = load_yaml_file(PRESETS_DIR / f"{preset}.yaml", "preset")
    for exp in spec["experiments"]:
        overrides = exp.get("overrides", {})
        if exp["name"] == experiment and "task.max_new_tokens" in overrides:
            return int(overrides["task.max_new_tokens"])
    return int(spec["base"]["task"]["max_new_tokens"])


def _extra_seconds(record: dict) -> float:
    return record.get("train_seconds", 0.0) + record.get("sharpen_seconds", 0.0)


def testbed_eval_cmd(
    root: Path = typer.Option(None, help="testbed directory (default: the shipped one)"),
) -> None:
    """Measure the testbed again: load both directories with transformers, sample, verify."""
    from distillscope.models.load import load_model
    from distillscope.testbed import WEIGHTS_DIR
    from distillscope.testbed.build import measure_testbed

    base = root or WEIGHTS_DIR
    teacher, tok = load_model(base / "teacher")  # local files only: nothing is downloaded
    student, _ = load_model(base / "student")
    with console.status("sampling and verifying (a minute on 2 CPU cores)"):
        measured = measure_testbed(teacher, student, tok)
    console.print(_accuracy_table("measured now (200 held-out items, 1 sample at T=0.5)", measured))


def testbed_build_cmd(
    out: Path = typer.Option(..., help="directory to write teacher/, student/ and testbed.json"),
    steps_scale: float = typer.Option(1.0, help="scale every training length (0.002 = smoke)"),
    only: str = typer.Option(
        None, help="build just the student (into a built testbed) or this extra teacher"
    ),
    like: list[str] = typer.Option(
        None,
        help="instead: a tiny random copy of this model directory in DIR/<its name> "
        "(its tokenizer, chat template, stop ids, vocabulary); repeat for a pair",
    ),
    recipe: str = typer.Option(
        "shipped", help="the recipe: shipped, or regime (adds the student's base phase)"
    ),
    layers: int = typer.Option(2, help="with --like: decoder layers of each copy"),
    hidden: int = typer.Option(64, help="with --like: hidden size of each copy"),
) -> None:
    """Train the testbed teacher, student and extra teachers from scratch with fixed seeds;
    with --like, write tiny random-weight copies of your own checkpoints instead."""
    from distillscope.testbed.build import build, build_extra, build_student
    from distillscope.testbed.recipe import EXTRA_TEACHERS, RECIPES

    if like:
        _build_like(like, out, layers, hidden)
        return
    if recipe not in RECIPES:
        raise ValueError(f"--recipe {recipe!r}: choose one of {sorted(RECIPES)}")
    if only is not None and only not in {"student", *EXTRA_TEACHERS}:
        raise ValueError(f"--only {only!r}: choose student or one of {sorted(EXTRA_TEACHERS)}")
    out.mkdir(parents=True, exist_ok=True)
    log = lambda m: console.print(m, highlight=False)  # noqa: E731
    if only == "student":
        m = build_student(out, RECIPES[recipe], steps_scale=steps_scale, log=log)
        console.print(
            f"student: Countdown-3 {m['countdown3_accuracy']:.1%}, pass@32 "
            f"{m['countdown3_pass@32']:.1%}, skill-suite mean {m['skill_mean']:.1%}; "
            f"wrote {out}/student and {out}/testbed.json"
        )
        return
    if only is None:
        info = build(out, RECIPES[recipe], steps_scale=steps_scale, log=log)
        console.print(_accuracy_table("measured after the build", info["measured"]))
    for role in [only] if only else EXTRA_TEACHERS:
        entry = build_extra(out, role, steps_scale=steps_scale, log=log)
        m = entry["measured"]
        console.print(
            f"{role}: {entry['parameters']:,} parameters, Countdown-3 "
            f"{m['countdown3_accuracy']:.1%}, skill-suite mean {m['skill_mean']:.1%}"
        )
    built = [only] if only else ["teacher", "student", *EXTRA_TEACHERS]
    console.print(f"wrote {', '.join(f'{out}/{r}' for r in built)} and {out}/testbed.json")


def _build_like(sources: list[str], out: Path, layers: int, hidden: int) -> None:
    """``testbed build --like``: one tiny copy per source in ``out/<source's name>``."""
    from distillscope.models import resolve_model_path
    from distillscope.testbed.like import shrink_like

    names = [resolve_model_path(s).name for s in sources]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--like: two sources are named {twice[0]!r}; copy one under another name")
    for source, name, seed in zip(sources, names, range(len(sources)), strict=True):
        path = shrink_like(source, out / name, layers=layers, hidden=hidden, seed=seed)
        console.print(
            f"{source} → {path} ({layers} layers, hidden {hidden}, random weights)", soft_wrap=True
        )
