"""A report reads its study once and hands it down (docs/architecture.md, results/).

``write_report`` loads the study once; the finished runs and their labels are computed once
(``Study.finished``), each run's ``metrics.jsonl`` is read once whoever needs it (training
curves, RLVR curves, the claims' trajectory features) and the per-item outcomes once (the
claims and the noise behind "What decides the claims"). The claims are split into published
ones and instrument checks once, and the summary built once, for both pages.
"""

from __future__ import annotations

import sys
from collections import Counter

import distillscope.report.render as render
import distillscope.results.reader as reader
import distillscope.scorecard.runner as runner
from distillscope.report import write_report


def test_writing_a_report_reads_the_study_once(synth, tmp_path, monkeypatch):
    rows, metrics = synth.full_rows()
    root = synth.write_study(tmp_path / "study", rows, metrics=metrics)
    calls: Counter[str] = Counter()
    read_runs: Counter[str] = Counter()

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    def read_metrics(run):
        read_runs[run.name if run is not None else None] += 1
        return original_read_metrics(run)

    original_read_metrics = reader.read_metrics
    monkeypatch.setattr(render, "load_study", counted("load_study", reader.load_study))
    monkeypatch.setattr(reader, "finished_runs", counted("finished_runs", reader.finished_runs))
    monkeypatch.setattr(reader, "load_items", counted("load_items", reader.load_items))
    monkeypatch.setattr(reader, "read_metrics", read_metrics)

    paths = write_report(root)

    assert paths["html"].is_file() and any(k.startswith("figure:training") for k in paths)
    assert calls == {"load_study": 1, "finished_runs": 1, "load_items": 1}
    with_metrics = {rid for rid in metrics if metrics[rid]}
    assert with_metrics and with_metrics <= set(read_runs)  # the curves read them …
    assert max(read_runs.values()) == 1  # … and nothing read one twice


#: The summary's builders and the claims' split, each looked up wherever a report module (or the
#: scorecard's runner) imported it: a page that called one itself would be counted too.
SUMMARY_BUILDERS = (
    "published",
    "instrument_checks",
    "verdict_counts",
    "summary_sentence",
    "checks_sentence",
    "summary_groups",
    "calibration_sentence",
    "noise_table",
)


def _which(args: tuple) -> str:
    """Which claims a builder was given: the published ones, the checks, or all of them."""
    claims = args[0] if args else None
    if not isinstance(claims, list) or not claims or not hasattr(claims[0], "instrument"):
        return ""
    kinds = {r.instrument for r in claims}
    return "all" if len(kinds) == 2 else ("checks" if kinds == {True} else "published")


def test_a_report_builds_its_summary_once(synth, tmp_path, monkeypatch):
    """The claims are split once and each summary builder runs once per claim set
    (``contents.gather``), however many pages lay the summary out."""
    rows, metrics = synth.full_rows()
    root = synth.write_study(tmp_path / "study", rows, metrics=metrics)
    calls: Counter[tuple[str, str]] = Counter()

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name, _which(args)] += 1
            return fn(*args, **kwargs)

        return wrapper

    modules = [m for n, m in sys.modules.items() if n.startswith("distillscope.report.")]
    for module in [*modules, runner]:
        for name in SUMMARY_BUILDERS:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counted(name, getattr(module, name)))

    paths = write_report(root)

    md = paths["markdown"].read_text(encoding="utf-8")
    assert "### Checks of the instrument" in md and "### Calibration" in md  # both laid out
    per_set = ("verdict_counts", "summary_groups")
    assert calls == {
        ("published", "all"): 1,
        ("instrument_checks", "all"): 1,
        **{(name, which): 1 for name in per_set for which in ("published", "checks")},
        ("summary_sentence", "published"): 1,
        ("checks_sentence", "checks"): 1,
        ("calibration_sentence", ""): 1,
        ("noise_table", ""): 1,
    }


def test_a_report_builds_its_scope_and_shown_tables_once(synth, tmp_path, monkeypatch):
    """The scope and the tables' shown frames (finished runs, baselines) are built once in
    ``contents.gather`` and handed to every section that lays them out."""
    rows, metrics = synth.full_rows()
    root = synth.write_study(tmp_path / "study", rows, metrics=metrics)
    calls: Counter[str] = Counter()
    modules = [m for n, m in sys.modules.items() if n.startswith("distillscope.report.")]
    for module in modules:
        for name in ("shown_frames", "study_scope"):
            if hasattr(module, name):
                fn = getattr(module, name)

                def wrapper(*args, fn=fn, name=name, **kwargs):
                    calls[name] += 1
                    return fn(*args, **kwargs)

                monkeypatch.setattr(module, name, wrapper)
    write_report(root)
    assert calls == {"shown_frames": 1, "study_scope": 1}
