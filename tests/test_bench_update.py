"""bench/update_benchmarks.py: marked blocks of BENCHMARKS.md replaced, JSON rendered as a table."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "bench" / "update_benchmarks.py"
_SPEC = importlib.util.spec_from_file_location("update_benchmarks", _PATH)
update = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(update)


def test_a_marked_block_is_replaced_and_a_missing_one_appended():
    doc = "intro\n<!-- bench:a -->\nold\n<!-- /bench:a -->\noutro\n"
    doc = update.replace_block(doc, "a", "| new |")
    assert doc == "intro\n<!-- bench:a -->\n| new |\n<!-- /bench:a -->\noutro\n"
    doc = update.replace_block(doc, "b", "| b |")
    assert doc.endswith(
        "## Latest `make bench`\n\n### b\n\n<!-- bench:b -->\n| b |\n<!-- /bench:b -->\n"
    )
    assert update.replace_block(doc, "b", "| b |") == doc  # idempotent


def test_script_output_becomes_markdown():
    printed = "loss check ok\n\n| mode | time |\n|---|---|\n| plain | 1.0 s |\n"
    assert update.markdown_of(printed) == "| mode | time |\n|---|---|\n| plain | 1.0 s |"
    as_json = 'log line\n{\n "study_s": 12.5,\n "phase_s": {"a": 1}\n}\n'
    assert update.markdown_of(as_json).splitlines() == [
        "| quantity | value |",
        "|---|---|",
        "| study_s | 12.5 |",
        '| phase_s | {"a": 1} |',
    ]


def test_a_missing_script_is_skipped(monkeypatch, capsys):
    monkeypatch.setitem(update.BENCHMARKS, "absent", ["bench_not_written_yet.py"])
    assert update.run("absent") is None
    assert "bench/bench_not_written_yet.py is not in this checkout" in capsys.readouterr().err
