"""write_report end to end on synthetic study directories: files, embedding, escaping, contents."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from distillscope.report import write_report
from distillscope.report.contents import MAIN_FIGURE, MAIN_FIGURE_LEAD, gather
from distillscope.report.html_page import esc, render_html
from distillscope.report.markdown_page import md_escape, render_markdown
from distillscope.report.summary import short_claim
from distillscope.report.tables import HEADLINE_CHARS, headline_text
from distillscope.results import load_study
from distillscope.scorecard import ClaimResult
from distillscope.scorecard.runner import CLAIM_IDS, UNMEASURED

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
    assert "35.0 ± 0.6" in row and "-12.0 ± 0.6" in row and "55.0 ± " in row  # sparsity
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
    unmeasured = sum(bool(u) for u in UNMEASURED.values())
    assert html.count('class="verdict-not-tested"') == len(CLAIM_IDS) - unmeasured
    assert html.count('class="verdict-not-implemented"') == unmeasured
    assert "no main figure" not in html.lower() and "Main figure:" not in html  # no main grid
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
    from distillscope.results.reader import load_study

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
    md = write_report(root)["markdown"].read_text()
    cells = md.split("## Scorecard of the published claims")[1].split("\n## ", 1)[1]
    assert "## Main grid" in md and "baseline" not in cells  # claim evidence may name it


# ---------------------------------------------------------------------------------------------
# The summary in words, the main figure and the folded scorecard


LONG_EVIDENCE = (
    "best OnPD cell 60.6% (forward KL, 1e-04 (low)) vs best OffPD cell 58.4% (forward KL, "
    "3e-04 (high)): Δ +2.2 pp [-1.7, +6.1]. forward KL, 1e-04 (low): 60.6 vs 56.2; more"
)
CLAIMS = [
    ClaimResult(
        1,
        "Rollout policy gives no consistent in-distribution gain (best mean 72% OnPD vs 73%).",
        "supported",
        LONG_EVIDENCE,
        "Δ within ±5 pp (TOST)",
        "",  # no headline yet: the summary shows an excerpt of the evidence
    ),
    ClaimResult(
        2,
        "KL direction matters more: forward KL 71–73% in every rollout × LR cell.",
        "supported",
        f"pooled Δ_KL +18.3 pp; evidence with {HOSTILE} & more",
        f"rule text {HOSTILE}",
        "Δ +18.3 pp [+16.3, +20.2]",
    ),
    ClaimResult(
        3,
        "LR governs forgetting: ≤ 1.3 pp change at the low LR.",
        "contradicted",
        "the low LR forgets 6 pp",
        "low-LR change within ±2 pp",
        "low-LR change −6.0 pp [−8.1, −3.9]",
    ),
    ClaimResult(
        9,
        "Forward KL gives more coverage (higher pass@10 at similar pass@1).",
        "inconclusive",
        "pooled Δg +1.1 pp [-2.0, +4.2]; more",
        "Δg > 2 pp",
        "Δg +1.1 pp [−2.0, +4.2]",
    ),
    ClaimResult(
        16,
        "[D] Regulated OPD removes length exploitation; more.",
        "not tested",
        "needs OPD runs",
        "—",
    ),
    ClaimResult(
        11,
        "That advantage does not reliably survive a later RLVR stage.",
        "not implemented",
        "no code writes rlvr/reward_final yet",
        "—",
    ),
]


@pytest.fixture(scope="module")
def rendered(synth, tmp_path_factory) -> tuple[str, str]:
    """HTML and Markdown of a small study rendered with the hand-made CLAIMS (no figures)."""
    rows = [synth.run_row("main", "student", "forward_kl", synth.LOW, 42, **{"eval/accuracy": 0.5})]
    root = synth.write_study(tmp_path_factory.mktemp("summary") / "s", rows)
    study = load_study(root)
    out = root / "report"
    contents = gather(study, CLAIMS, [])
    return render_html(contents), render_markdown(contents, out)


def _html_summary(html: str) -> str:
    return html.split("<h2>Summary of findings</h2>")[1].split("<h2>")[0]


def test_summary_lists_decided_claims_with_their_headlines(rendered):
    html, _ = rendered
    summary = _html_summary(html)
    assert "supports 2, contradicts 1 and cannot decide 1; it does not test 2" in summary
    for r in CLAIMS[1:4]:  # supported, contradicted, inconclusive: short name and headline
        assert esc(short_claim(r.claim)) in summary and esc(r.headline) in summary
    assert "KL direction matters more</span>" in summary  # trimmed at ":"
    assert "71–73%" not in summary and "best mean 72%" not in summary  # numbers stay in table
    # each verdict group names what was tested (docs/method.md §9 "Scope")
    scope = "with testbed:student on countdown3"
    assert f"✓ Supported {scope} (2)" in summary
    assert f"✗ Contradicted — not reproduced {scope} (1)" in summary
    assert f"? Inconclusive {scope} (1)" in summary
    # untested claims: counted and named on one line each, without a headline
    assert "Not tested (1)</span>" in summary and "16 [D] Regulated OPD removes length" in summary
    assert "Not implemented (1)</span>" in summary and "needs OPD runs" not in summary
    assert summary.index("Supported") < summary.index("Contradicted") < summary.index("Not tested")


def test_summary_comes_before_the_scorecard_table(rendered):
    html, md = rendered
    assert html.index("<h2>Summary of findings</h2>") < html.index("<h2>How to read")
    assert html.index("<h2>Summary of findings</h2>") < html.index('<table class="scorecard">')
    assert md.index("## Summary of findings") < md.index("## Scorecard of the published claims")


def test_empty_headline_falls_back_to_an_evidence_excerpt(rendered):
    html, md = rendered
    excerpt = "best OnPD cell 60.6% vs best OffPD cell 58.4%: Δ +2.2 pp [-1.7, +6.1]"
    assert headline_text(CLAIMS[0]) == excerpt  # first clause, asides dropped
    assert esc(excerpt) in _html_summary(html) and md_escape(excerpt) in md
    long = ClaimResult(5, "c", "supported", "Δ " + "x<y & z " * 40 + "(a) [b]. tail", "r")
    text = headline_text(long)
    assert len(text) <= HEADLINE_CHARS and text.endswith("…") and "tail" not in text
    shown = esc(text)  # escaped after the cut: every entity whole
    assert not re.search(r"&(?!(lt|gt|amp|quot|#x27);)", shown)
    unclosed = ClaimResult(6, "c", "supported", "gain +3 pp [+1, +5] [OnPD: 1 vs 2; OffPD", "r")
    assert headline_text(unclosed) == "gain +3 pp [+1, +5]"  # no bracket left open


def test_short_claim_drops_the_published_numbers():
    assert short_claim("KL direction matters more: forward KL 71–73% in every cell.") == (
        "KL direction matters more"
    )
    assert short_claim(
        "On-policy (λ > 0) helps on the harder variant (+10–15% pass@k) under both KL directions."
    ) == ("On-policy helps on the harder variant under both KL directions")
    assert len(short_claim("word " * 40)) <= 80


def test_scorecard_folds_evidence_and_rule_into_details(rendered):
    html, _ = rendered
    table = html.split('<table class="scorecard">')[1].split("</table>")[0]
    head = table.split("</thead>")[0]
    assert "<th>Headline</th>" in head and "<th>Quote, evidence and rule</th>" in head
    assert "<th>Evidence</th>" not in head and "<th>Rule</th>" not in head
    rows = table.split("<tr")[2:]
    assert len(rows) == len(CLAIMS) and all(r.count("<details>") == 1 for r in rows)
    for row, r in zip(rows, CLAIMS, strict=True):
        fold = row.split("<details>")[1].split("</details>")[0]
        visible = row.replace(fold, "")
        assert esc(r.evidence) in fold
        if headline_text(r) != r.evidence:  # a short "needs …" is its own excerpt
            assert esc(r.evidence) not in visible
        if r.rule != "—":
            assert f"<b>Rule:</b> {esc(r.rule)}" in fold
        assert f'<td class="headline">{esc(headline_text(r))}</td>' in visible
    assert '<span class="verdict">✓ supported</span>' in rows[0]


def test_summary_and_scorecard_escape_claim_text(rendered):
    html, md = rendered
    assert "<script" not in html.lower() and "<script" not in md.lower()
    assert esc(f"pooled Δ_KL +18.3 pp; evidence with {HOSTILE} & more") in html
    assert f"<b>Rule:</b> rule text {HOSTILE_ESC}" in html
    assert "evidence with " + md_escape(HOSTILE) in md


def test_markdown_has_the_summary_and_a_plain_scorecard_with_headlines(rendered):
    _, md = rendered
    summary = md.split("## Summary of findings")[1].split("## ")[0]
    assert "- **✓ Supported with testbed:student on countdown3 (2):**" in summary
    assert f"  - 2 KL direction matters more — {md_escape(CLAIMS[1].headline)}" in summary
    assert "  - 3 LR governs forgetting — low-LR change −6.0 pp \\[−8.1, −3.9\\]" in summary
    assert "- **– Not tested (1):** 16 \\[D\\] Regulated OPD removes length exploitation" in summary
    header = next(line for line in md.splitlines() if line.startswith("| \\# | Claim"))
    assert header.endswith("| Headline | Quote | Evidence | Rule |")
    assert "<details" not in md


def test_main_figure_is_shown_with_the_summary(report):
    paths, html, md = report
    summary = _html_summary(html)
    main_png = paths[f"figure:{MAIN_FIGURE}"]
    assert esc(MAIN_FIGURE_LEAD) in summary
    assert summary.count('src="data:image/png;base64,') == 1
    assert html.count("Main grid: rollout × KL direction × learning rate.</b>") == 1  # once
    md_summary = md.split("## Summary of findings")[1].split("## How to read")[0]
    assert f"](figures/{main_png.name})" in md_summary
    assert md.count(f"](figures/{main_png.name})") == 1


# ---------------------------------------------------------------------------------------------
# Instrument checks apart, quotes beside the verdicts (docs/method.md §9 "Provenance")


def test_instrument_checks_are_reported_apart_and_never_counted(report):
    from distillscope.report.contents import CHECKS_TITLE
    from distillscope.scorecard.claims import CLAIMS as SPECS

    paths, html, md = report
    checks = {c.id for c in SPECS if c.instrument}
    n_published = len(SPECS) - len(checks)
    assert checks == {7, 8, 13} and n_published == len(CLAIM_IDS) - 3
    summary = _html_summary(html)
    assert f"Of {n_published} published claims" in summary
    assert f"Of {len(checks)} checks of the instrument (claims 7, 8, 13" in summary
    # the published scorecard: no instrument check's row; its counts sum to the published ones
    published = html.split("<h2>Scorecard of the published claims</h2>")[1].split("<h2>")[0]
    counts = re.findall(r"<b>(\d+)</b>", published.split("</p>")[0])
    assert sum(map(int, counts)) == n_published
    ids = re.findall(r'<tr class="verdict-[a-z-]+"><td>(\d+)</td>', published)
    assert len(ids) == n_published and not checks & set(map(int, ids))
    section = html.split(f"<h2>{CHECKS_TITLE}</h2>")[1].split("<h2>")[0]
    ids = re.findall(r'<tr class="verdict-[a-z-]+"><td>(\d+)</td>', section)
    assert sorted(map(int, ids)) == sorted(checks)
    md_scorecard = md.split("## Scorecard of the published claims")[1].split("\n## ")[0]
    assert sum(int(n) for n in re.findall(r": (\d+)", md_scorecard.split("\n\n")[1])) == (
        n_published
    )
    assert not checks & {int(m) for m in re.findall(r"^\| (\d+) \|", md_scorecard, re.M)}
    assert f"## {CHECKS_TITLE}" in md and f"### {CHECKS_TITLE}" in md


def test_each_verdict_shows_its_quotes(report):
    from distillscope.scorecard.claims import CLAIMS as SPECS

    _, html, md = report
    for c in SPECS:
        for q in c.quotes:
            assert esc(q.text()) in html, c.id  # in the folded cell and the summary's hover
            assert md_escape(q.text()) in md, c.id
    hover = f'<span title="{esc(SPECS[0].quotes[0].text())}'
    assert hover in _html_summary(html)
