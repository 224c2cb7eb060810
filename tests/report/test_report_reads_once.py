"""A report reads its study once and hands it down (docs/architecture.md, results/).

``write_report`` loads the study once; the finished runs and their labels are computed once
(``Study.finished``), each run's ``metrics.jsonl`` is read once whoever needs it (training
curves, RLVR curves, the claims' trajectory features) and the per-item outcomes once (the
claims and the noise behind "What decides the claims").
"""

from __future__ import annotations

from collections import Counter

import distillscope.report.render as render
import distillscope.results.reader as reader
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
