"""A study's results, read from its store only: the one-row-per-run table, its cells and seed
aggregation, matched cells, per-item outcomes and the statistics on them.

    study = load_study(study_dir)        # results.parquet, runs/*/, provenance.json
    table = aggregate(study.results)     # one row per cell: mean ± SEM over finished seeds

Nothing here imports the scorecard, the report, training or torch (tests/test_architecture.py).
"""

from __future__ import annotations

from distillscope.results.aggregate import aggregate
from distillscope.results.reader import Study, load_study

__all__ = ["Study", "aggregate", "load_study"]
