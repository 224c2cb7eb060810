"""write_report end to end on synthetic study directories: files, embedding, escaping, contents."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from distillscope.report import write_report
from distillscope.report.render import md_escape

HOSTILE = "<script>alert(1)</script>"
HOSTILE_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"
IMG_HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def report(synth, tmp_path_factory) -> tuple[dict, str, str]:
    """One study with the paper picture, training curves, failures and hostile strings."""
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    metrics = {r["run_id"]: synth.curve(12, r["seed"]) for r in rows}
    rows += [
        synth.run_row(
            "main",
            "teacher",
            "reverse_kl",
            synth.HIGH,
            45,
            status="diverged",
            reason=f"NaN loss at step 37 {HOSTILE}",
        ),
        synth.run_row(
            "main",
            "student",
            "forward_kl",
            synth.LOW,
            46,
            status="failed",
            reason="bad | pipe\nsecond line",
            run_id=HOSTILE,
        ),
        synth.run_row(
            IMG_HOSTILE,
            "student",
            "forward_kl",
            synth.LOW,
            42,
            run_id="odd-exp-run",
            **{"eval/accuracy": 0.5},
        ),
    ]
    metrics["odd-exp-run"] = synth.curve(12, 42)
    root = synth.write_study(
        tmp_path_factory.mktemp("render") / "study",
        rows,
        metrics=metrics,
        spec={"name": f"paper {HOSTILE}", "description": "desc | with *stars*"},
        provenance={
            "command": f"distillscope study --out s {HOSTILE}",
            "version": "0.1.0",
            "started": "2026-10-01T10:00:00",
            "finished": "2026-10-01T10:42:30",
            "machine": "box",
        },
    )
    paths = write_report(root)
    return paths, paths["html"].read_text(), paths["markdown"].read_text()


def test_files_written(report):
    paths, _, _ = report
    assert paths["html"].name == "report.html" and paths["html"].is_file()
    assert paths["markdown"].name == "report.md" and paths["markdown"].is_file()
    pngs = sorted(p.name for p in paths["figures"].glob("*.png"))
    assert "main_bars.png" in pngs and "pass_at_k.png" in pngs
    assert any(p.startswith("training_") for p in pngs)
    for name in pngs:  # figure file names never carry study text
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", name)
    assert all(paths[f"figure:{p[:-4]}"].is_file() for p in pngs)


def test_html_is_self_contained(report):
    paths, html, _ = report
    n_png = len(list(paths["figures"].glob("*.png")))
    assert html.count('src="data:image/png;base64,') == n_png
    assert "<style>" in html
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing to fetch


def test_markdown_links_relative_pngs(report):
    paths, _, md = report
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links and all(link.startswith("figures/") for link in links)
    assert all((paths["markdown"].parent / link).is_file() for link in links)


def test_hostile_strings_are_escaped(report):
    _, html, md = report
    assert "<script" not in html.lower()
    assert "<img src=x" not in html
    assert HOSTILE_ESC in html  # reason, run id and study name shown, escaped
    assert html.count(HOSTILE_ESC) >= 4  # title, h1, command, failed run id, reason
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # an experiment name
    assert "<script" not in md.lower()
    assert "<img" not in md.replace("![", "")
    assert "&lt;script&gt;" in md


def test_markdown_table_cells_escape_pipes_and_newlines(report):
    _, _, md = report
    row = next(line for line in md.splitlines() if "second line" in line)
    assert "bad \\| pipe second line" in row
    assert row.startswith("| ") and row.endswith(" |")
    assert md_escape("a|b\nc_d*") == "a\\|b c\\_d\\*"


def test_failed_and_diverged_runs_listed_with_reasons(report):
    _, html, md = report
    assert "Failed and diverged runs" in html
    assert "NaN loss at step 37" in html and "bad | pipe" in html
    assert "diverged" in md and "failed" in md


def test_provenance_and_counts(report):
    _, html, _ = report
    assert "distillscope study --out s" in html
    assert "2026-10-01T10:00:00" in html and "42 min 30 s" in html
    assert re.search(r'<td class="label">done</td><td class="num">25</td>', html)  # 24 + 1
    assert re.search(r'<td class="label">total</td><td class="num">27</td>', html)


def test_main_table_numbers(report):
    _, html, md = report
    # OffPD reverse KL at the high LR: 35% ± SEM of (34, 35, 36) = 1/√3 ≈ 0.6 pp.
    main = html.split("<h2>Main grid")[1].split("</table>")[0]
    row = next(r for r in main.split("<tr") if "OffPD" in r and "reverse KL" in r and "high" in r)
    assert "35.0 ± 0.6" in row and "-12.0 ± 0.6" in row and "55.0 ± 0.6" in row
    assert "| OnPD | forward KL | 1e-05 (low) | 3 | 72.0 ± 0.6 |" in md


def test_scorecard_verdicts_in_both_formats(report):
    _, html, md = report
    assert html.count('class="verdict-supported"') >= 5
    assert 'class="verdict-not-tested"' in html
    assert "**✓ supported**" in md and "**– not tested**" in md


def test_minimal_store_without_figures(synth, tmp_path):
    rows = [
        synth.run_row(
            "main", "student", "forward_kl", synth.LOW, 42, status="failed", reason="boom"
        )
    ]
    root = tmp_path / "s"
    root.mkdir()
    pd.DataFrame(rows).to_parquet(root / "results.parquet")
    paths = write_report(root)
    html = paths["html"].read_text()
    assert "data:image/png" not in html and "boom" in html
    assert html.count('class="verdict-not-tested"') == 16  # 11 and 18: not implemented
    assert html.count('class="verdict-not-implemented"') == 2
    assert paths["figures"].is_dir() and not list(paths["figures"].glob("*.png"))


def test_missing_results_table_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="distillscope study"):
        write_report(tmp_path)


def test_status_from_run_dirs_completes_the_table(synth, tmp_path):
    rows = [synth.run_row("main", "student", "forward_kl", synth.LOW, 42)]
    root = synth.write_study(tmp_path / "s", rows)
    (root / "runs" / "late-run").mkdir()
    (root / "runs" / "late-run" / "status.json").write_text(json.dumps({"status": "running"}))
    html = write_report(root)["html"].read_text()
    assert '<td class="label">running</td>' in html


def test_baseline_rows_are_read_apart_and_never_a_cell(synth, tmp_path):
    from distillscope.report.load import load_study

    rows = [synth.run_row("main", "student", "forward_kl", synth.LOW, 42, **{"eval/accuracy": 0.5})]
    rows.append(
        {
            "run_id": "baseline",
            "experiment": "baseline",
            "status": "done",
            "reason": "",
            "seed": 42,
            "task.name": "countdown3",
            "eval/accuracy": 0.125,
        }
    )
    root = synth.write_study(tmp_path / "s", rows)
    study = load_study(root)
    assert list(study.results["run_id"]) == [rows[0]["run_id"]]
    assert list(study.baselines["eval/accuracy"]) == [0.125]
    assert "baseline" not in write_report(root)["markdown"].read_text()
