"""The metric registry: every key the code writes is registered; docs/metrics.md shows the table."""

from __future__ import annotations

import re
from pathlib import Path

from distillscope import metric_keys

METRICS_DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def test_docs_metric_table_is_the_rendered_registry():
    text = METRICS_DOC.read_text()
    found = re.search(r"<!-- metric-table:begin -->\n(.*?)<!-- metric-table:end -->", text, re.S)
    assert found, "docs/metrics.md lost its metric-table markers"
    assert found.group(1) == metric_keys.markdown_table(), (
        "docs/metrics.md table is stale: regenerate it with `python -m distillscope.metric_keys`"
    )


def test_families_and_units():
    assert metric_keys.is_fraction("eval/pass@10")
    assert metric_keys.is_fraction("eval/harder/avg@10")
    assert metric_keys.is_fraction("eval/sparsity_bf16_tau1e-06")
    assert metric_keys.unit("eval/forgetting_pp") == "pp"
    assert metric_keys.unit("time/rollout") == "seconds"
    assert metric_keys.metric_info("nonsense/key") is None


def test_a_run_writes_only_registered_keys(tmp_path):
    import json

    from distillscope.study.table import train_summary

    rows = [{"step": 0, "train/loss": 1.0, "train/grad_norm": 1.0, "rollout/len_mean": 3.0}]
    keys = set(train_summary(rows))
    unregistered = [k for k in keys if metric_keys.metric_info(k) is None]
    assert not unregistered, unregistered
    json.dumps(sorted(keys))
