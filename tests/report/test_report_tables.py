"""Cell tables show every labelled axis with its label, not only the learning rate."""

from __future__ import annotations

import pandas as pd

from distillscope.report.tables import cell_table
from distillscope.results.matching import cell_key, match_columns


def _rows(synth) -> pd.DataFrame:
    rows = []
    for temp, label, acc in ((0.7, "cool", 0.5), (1.3, "hot", 0.3)):
        for seed in synth.SEEDS:
            row = synth.run_row("main", "student", "forward_kl", synth.LOW, seed)
            row.update(
                {
                    "rollout.student_temperature": temp,
                    "student_temperature_label": label,
                    "eval/accuracy": acc,
                }
            )
            rows.append(row)
    return pd.DataFrame(rows)


def test_a_labelled_axis_other_than_lr_is_shown_with_its_label(synth):
    table = cell_table(_rows(synth), [("eval/accuracy", "Accuracy (%)")])
    assert "student_temperature" in table.columns
    assert not any(h.endswith("_label") for h in table.columns)
    col = table.columns.index("student_temperature")
    assert [r[col] for r in table.rows] == ["0.7 (cool)", "1.3 (hot)"]
    assert table.rows[0][table.columns.index("LR")] == "1e-05 (low)"


def test_comparing_along_a_labelled_axis_ignores_its_label_column(synth):
    df = _rows(synth)
    cols = match_columns(df, "rollout.student_temperature")
    assert "student_temperature_label" not in cols and "rollout.student_temperature" not in cols
    key = cell_key(df.iloc[0], ["rollout.student_temperature", "student_temperature_label"])
    assert key == "student_temperature=0.7 (cool)"
