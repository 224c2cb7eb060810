"""Numbers in README.md and docs/ that come from a run are rebuilt here from their record, so
that a page cannot drift from it: BENCHMARKS.md's ``make bench`` blocks and tables, the shipped
testbed's ``testbed.json``, the per-run record ``tests/testbed/data/quick_study.json``, the
recorded quick study ``bench/records/quick-2026-12-02`` (the README's worked example) and the
scorecard's own rules and margins. Each check formats the text a page must contain from the
record and looks for it in the page (whitespace folded, ``−`` read as ``-``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from statistics import mean

import pandas as pd

from distillscope import testbed
from distillscope.scorecard.runner import instrument_checks, published, score_claims

ROOT = Path(__file__).resolve().parents[1]
QUICK_RECORD = ROOT / "tests" / "testbed" / "data" / "quick_study.json"
QUICK_STUDY = ROOT / "bench" / "records" / "quick-2026-12-02"
PAPER_RECORD = ROOT / "bench" / "records" / "paper-2026-12-03"
DEFAULT_KERNELS = ROOT / "bench" / "records" / "quick-2026-12-06-default"  # another CPU


def page(name: str) -> str:
    """A page's text with whitespace folded to single spaces and minus signs as hyphens."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").replace("−", "-").split())


def bench_block(name: str) -> dict[str, str]:
    """``quantity → value`` of BENCHMARKS.md's ``<!-- bench:NAME -->`` block."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = text.split(f"<!-- bench:{name} -->")[1].split(f"<!-- /bench:{name} -->")[0]
    return dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", block, re.M))


def table_after(name: str, header: str) -> list[list[str]]:
    """The cells of the first Markdown table of page ``name`` whose header row starts with
    ``header`` (minus signs as hyphens)."""
    lines = (ROOT / name).read_text(encoding="utf-8").replace("−", "-").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def quick_cells() -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """BENCHMARKS.md's quick-study table: (rollout, KL, LR) → (accuracy, pass@10, forgetting)."""
    rows = table_after("BENCHMARKS.md", "| rollout | KL | LR | Countdown-3 acc.")
    return {
        (r[0], r[1], r[2]): (r[3], r[4], r[6]) for r in rows if r[0] != "untrained (baseline rows)"
    }


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def quick_study_record() -> tuple[pd.DataFrame, dict[int, object]]:
    """The README's worked example: the recorded quick study's rows and its scorecard (read from
    the record as from any study directory: trajectory features from runs/*/metrics.jsonl)."""
    df = pd.read_parquet(QUICK_STUDY / "results.parquet")
    return df, {r.id: r for r in score_claims(df, study_dir=QUICK_STUDY)}


def test_the_quick_record_is_todays_quick_preset():
    from distillscope.study.spec import expand, load_spec

    df, _ = quick_study_record()
    planned = {r.run_id for r in expand(load_spec("quick"))}
    assert planned == set(df.loc[df["experiment"] == "main", "run_id"])  # same configs, same ids


def test_readme_worked_example_is_the_quick_record():
    readme = page("README.md")
    assert f"({round(float(bench_block('study')['wall_s']))} s wall clock" in readme
    df, results = quick_study_record()
    main = df[df["experiment"] == "main"]
    cells = main.groupby(["rollout.policy", "objective.kind", "optim.lr"])[
        ["eval/accuracy", "eval/pass@10", "eval/forgetting_pp"]
    ].mean()
    shown = {tuple(r[:3]): tuple(r[3:]) for r in table_after("README.md", "| rollout | objective")}
    rollout = {"student": "on-policy", "teacher": "off-policy"}
    lr_label = {1e-4: "1e-4 (low)", 3e-4: "3e-4 (high)"}
    for (policy, kind, lr), (acc, p10, forget) in cells.iterrows():
        key = (rollout[policy], kind.replace("_kl", " KL"), lr_label[lr])
        assert shown[key] == (pct(acc), pct(p10), f"{forget:.1f}"), key
    high = [-f for (_, _, lr), (_, _, f) in cells.iterrows() if lr == 3e-4]
    low = [-f for (_, _, lr), (_, _, f) in cells.iterrows() if lr == 1e-4]
    assert f"costs {min(high):.1f}–{max(high):.1f} points" in readme
    assert f"the low one at most {max(low):.1f}." in readme
    teacher = testbed.testbed_info()["measured"]["teacher"]["countdown3_accuracy"]
    assert f"(the teacher scores {100 * teacher:g}%)" in readme
    verdicts: dict[str, list[int]] = {}
    for i, r in sorted(results.items()):
        if not r.instrument:  # published claims only: the instrument checks are apart
            verdicts.setdefault(r.verdict, []).append(i)
    checks = {i: r.verdict for i, r in results.items() if r.instrument}
    assert checks == {7: "not tested", 8: "not tested", 13: "inconclusive"}
    assert "claims 7, 8 and 13 — are *checks of the instrument*" in readme
    assert "clipping active throughout (13) is inconclusive" in " ".join(readme.split())
    part = readme.split("- *supported*")[1]
    for verdict, label in [("supported", "*supported*"), ("contradicted", "*contradicted*")]:
        block = ("- " + label + readme.split("- " + label)[1]).split("- *", 2)[1]
        named = [int(n) for n in re.findall(r"\(claim (\d+)|\((\d+)[:)]", block) for n in n if n]
        assert sorted(named) == verdicts[verdict], (verdict, named)
    assert f"the other {len(verdicts['not tested'])} claims, which need" in part
    pairs = [  # (claim, text in its evidence and in the README)
        (1, "Δ_best +1.7 pp [-4.1, +7.6]"),
        (1, "best of 16 contrasts"),
        (1, "a band of ±8.5 pp"),
        (2, "Δ_KL -2.8 pp [-4.9, -0.7]"),
        (3, "Δ_LR +6.9 pp [+4.7, +9.1]"),
        (3, "low-LR change -0.4 pp [-2.2, +1.5]"),
        (3, "a band of ±4.0 pp"),
        (19, "gain +29.7 pp [+24.2, +35.0]"),
        (19, "4 of 4 runs"),
    ]
    for claim, text in pairs:
        assert text in results[claim].evidence, (claim, text)
        assert text.split(" ", 1)[1] in readme, (claim, text)
    assert results[4].verdict == "not applicable"  # its regime premise, measured, is absent
    assert "sparsity of `main`: 5.4% [5.4, 5.5]" in results[4].reason
    assert "sparsity is 5.4% [5.4, 5.5], on its floor" in readme


def test_testbed_page_numbers_are_the_shipped_record():
    measured = testbed.testbed_info()["measured"]
    t, s = measured["teacher"], measured["student"]
    text = page("docs/testbed.md")
    expected = [
        f"| Countdown-3 accuracy | **{pct(t['countdown3_accuracy'])}** | "
        f"**{pct(s['countdown3_accuracy'])}** |",
        f"| … with the style flag | {pct(t['countdown3_accuracy_style_flag'])}, "
        f"{100 * t['alt_style_share_with_flag']:g}% of answers in the second style |",
        f"| {pct(t['skill_mean'])} | **{pct(s['skill_mean'])}** |",
        f"accuracy | {pct(t['harder_accuracy'])} | {pct(s['harder_accuracy'])} |",
        f"| **{pct(t['harder_pass@10'])}** | **{pct(s['harder_pass@10'])}** |",
        f"teacher {pct(t['harder_accuracy'])} accuracy ({pct(t['countdown3_accuracy'])} on "
        f"`tb-countdown3`) and {pct(t['harder_pass@10'])} pass@10, untrained student "
        f"{pct(s['harder_pass@10'])} pass@10",
    ]
    missing = [e for e in expected if e not in text]
    assert not missing, missing
    runs = [r for r in json.loads(QUICK_RECORD.read_text())["runs"] if r["experiment"] == "main"]
    reach = [100 * r["eval/harder/pass@10"] for r in runs]
    assert f"the {len(runs)} students of a `quick` study {min(reach):.0f}–{max(reach):.0f}%" in text


def test_testbed_page_quotes_the_quick_study_of_benchmarks():
    low = [v for (_, _, lr), v in quick_cells().items() if lr == "1e-04"]
    accs = [float(a.rstrip("%")) for a, _, _ in low]
    teacher = 100 * testbed.testbed_info()["measured"]["teacher"]["countdown3_accuracy"]
    skills = max(abs(float(f)) for _, _, f in low)
    assert (
        f"the four low-LR cells reach {min(accs):.1f}–{max(accs):.1f}% (mean {mean(accs):.1f}%, "
        f"{100 * mean(accs) / teacher:.0f}% of the teacher–student gap closed) at ≤ {skills:.1f} "
        "pp of skills"
    ) in page("docs/testbed.md")


def test_benchmarks_scorecard_is_todays_rules_on_the_record():
    runs = pd.DataFrame(json.loads(QUICK_RECORD.read_text())["runs"]).assign(status="done")
    results = {r.id: r for r in score_claims(runs)}
    by: dict[str, list[int]] = {}
    for i, r in sorted(results.items()):
        if r.verdict != "not tested":
            by.setdefault(r.verdict, []).append(i)
    assert "supported" not in by
    text = page("BENCHMARKS.md")
    names = re.sub(r" \([^()]*(?:\([^()]*\)[^()]*)*\)", "", text.split("The scorecard's rules")[1])
    listed = ", ".join(map(str, by["inconclusive"][:-1])) + f" and {by['inconclusive'][-1]}"
    assert f"claims {listed} are inconclusive" in names  # parenthesised evidence left out
    assert f"claim {' and '.join(map(str, by['contradicted']))} is contradicted" in names
    pairs = [  # (claim, in its evidence, in BENCHMARKS.md)
        (1, "Δ_best -3.3 pp [-7.9, +1.4]", "Δ_best -3.3 pp [-7.9, +1.4]"),
        (1, "a band of ±6.6 pp", "a band of ±6.6 pp would decide it"),
        (2, "Δ_KL +1.4 pp [+0.2, +2.7] (95% CI) over seeds only", "+1.4 pp [+0.2, +2.7]"),
        (2, "(no per-item outcomes) → contradicts Δ_KL > 5 pp", "+1.4 pp [+0.2, +2.7]"),
        (3, "Δ_LR +9.3 pp [+7.4, +11.2]", "+9.3 pp [+7.4, +11.2]"),
        (3, "low-LR change -1.1 pp [-6.2, +3.9]", "-1.1 pp [-6.2, +3.9]"),
        (3, "a band of ±6.9 pp", "a band of ±6.9 pp"),
    ]
    for claim, evidence, shown in pairs:
        assert evidence in results[claim].evidence, (claim, evidence)
        assert shown in text, (claim, shown)


def test_preset_run_counts_are_the_expanded_presets():
    from distillscope.study.rehearse import distinct
    from distillscope.study.spec import expand, load_spec

    runs = {name: expand(load_spec(name)) for name in ("quick", "paper", "paper-qwen")}
    assert len(expand(load_spec("paper-llama"))) == len(runs["paper-qwen"])
    gpu = len(runs["paper-qwen"])
    steps = {r.config.optim.steps for r in runs["quick"]}
    assert f"× 2 seeds: {len(runs['quick'])} runs of {steps.pop()} steps" in page("README.md")
    studies = page("docs/studies.md")
    assert f"2 seeds, {len(runs['quick'])} runs, full evaluation" in studies
    assert f"`paper`: {len(runs['paper'])} runs, every experiment" in studies
    assert f"the whole study of [P] for GPUs, {gpu} runs" in studies
    assert f"the whole published study for GPUs ({gpu} runs" in page("docs/real-models.md")
    walkthrough = page("docs/walkthrough-real.md")
    configurations = len(distinct(runs["paper-qwen"]))
    assert f"the preset's {gpu} runs are {configurations}:" in walkthrough
    assert f"The whole preset holds {gpu} runs:" in walkthrough


def test_scaling_fsdp_numbers_are_the_bench_record():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = text.split("<!-- bench:fsdp -->")[1].split("<!-- /bench:fsdp -->")[0]
    rows = {r[0]: r for r in table_after("BENCHMARKS.md", "| setting | ranks | peak RSS")}
    dp, fsdp = rows["2 processes, data parallel"], rows["2 processes, --fsdp"]

    def span(after: str) -> str:
        """``A–B MB`` of the record's ``A / B MB`` (rank 0 / rank 1) followed by ``after``."""
        a, b = sorted(int(x) for x in re.search(r"(\d+) / (\d+) MB " + after, block).groups())
        return f"{a}–{b} MB"

    predicted = re.search(r"4 × L / 2 − L = (\d+) MB", block).group(1)
    expected = [
        f"peak anonymous memory by {span('of peak anonymous RSS')}",
        f"predicts {predicted} MB",
        f"the peak RSS fell by {span('of peak RSS')}",
        f"ranks peak {span('of anonymous RSS above')}",
        f"losses matched the single process's to {float(fsdp[6]):.0e}".replace("e-0", "e-"),
        f"its steps took {float(fsdp[5]):.1f} s, data parallel's {float(dp[5]):.1f} s",
    ]
    text = page("docs/scaling.md")
    missing = [e for e in expected if e not in text]
    assert not missing, missing


def test_scaling_teacher_cache_numbers_are_the_bench_record():
    rows = {r[0]: r for r in table_after("BENCHMARKS.md", "| teacher | step (s) | rollout (s)")}
    live, cached = (
        float(rows[k][1]) for k in ("live top-k testbed teacher", "read from the cache")
    )
    assert f"{live:.2f} s a step with the live top-k teacher against {cached:.2f} s" in page(
        "docs/scaling.md"
    )


def test_scaling_cache_sizes_follow_the_shard_format():
    """``B·T·(12k + 12)`` bytes: int64 ids (8k), k + 1 fp32 folded log-probs, two fp32 token
    log-probs, per position."""

    def size(b: int, t: int, k: int) -> float:
        return b * t * (8 * k + 4 * (k + 1) + 2 * 4)

    text = page("docs/scaling.md")
    assert f"{size(16, 24, 8) / 1e3:.0f} kB at B = 16, T = 24, k = 8" in text
    assert f"{size(64, 200, 64) / 1e6:.0f} MB at B = 64, T = 200, k = 64" in text


def test_studies_numbers_are_benchmarks_records():
    rows = table_after("BENCHMARKS.md", "| parent (low LR, seed 42) | held-out before")
    gains = [float(r[2].rstrip("%")) - float(r[1].rstrip("%")) for r in rows]
    seconds = [int(r[5]) for r in rows]
    studies = page("docs/studies.md")
    assert f"by +{min(gains):.1f} to +{max(gains):.1f} pp" in studies
    assert f"in {min(seconds)}–{max(seconds)} s per run" in studies
    # the paper preset's time: test_benchmarks_paper_record_is_its_record


def test_testbed_learning_rates_are_the_calibration_record():
    rows = table_after("BENCHMARKS.md", "| rollout | LR | Countdown-3 acc. | forgetting (pp)")
    by_lr: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        lr = r[1].strip("*").split()[0]
        by_lr.setdefault(lr, []).append((float(r[2].rstrip("%")), float(r[3])))
    low, high = by_lr["1e-04"], by_lr["3e-04"]
    broken = [f for lr, runs in by_lr.items() if float(lr) >= 1e-3 for _, f in runs]
    text = page("docs/testbed.md")
    low_f = sorted(f for _, f in low)
    assert f"moves {low_f[-1]:.1f} to {low_f[0]:.1f} pp" in text  # the smaller change first
    high_f = sorted(-f for _, f in high)
    assert f"they drop {high_f[0]:.1f}–{high_f[-1]:.1f} pp" in text
    gap = max(abs(a_low - a_high) for (a_low, _), (a_high, _) in zip(low, high, strict=True))
    assert f"with accuracy within {gap:.1f} pp" in text
    assert f"(skills {round(max(broken))} to {round(min(broken))} pp)" in text


def test_testbed_sizes_and_build_times_are_the_shipped_files():
    weights = ROOT / "src" / "distillscope" / "testbed" / "weights"
    size = sum(p.stat().st_size for p in weights.glob("*/model.safetensors"))
    small = json.loads((weights / "teacher-small" / "build.json").read_text())
    minutes = (small["train_seconds"] + small["sharpen_seconds"]) / 60
    text = page("docs/testbed.md")
    assert f"{size / 2**20:.0f} MB of safetensors with the second teacher" in text  # MiB
    assert f"rebuilds it alone, {minutes:.0f} min on 2 loaded cores" in text


def test_language_detector_cost_is_the_bench_record():
    rows = table_after("BENCHMARKS.md", "| detector | build + first (CPU s)")
    ours = next(r for r in rows if r[0].endswith("(ours)"))
    memory = float(ours[4].removesuffix(" MB"))
    assert (
        f"low accuracy mode, ≈ {round(memory, -1):.0f} MB and {float(ours[1]):.1f} CPU s to build"
        in page("docs/real-models.md")
    )


def test_benchmarks_quick_calibration_is_its_record():
    """BENCHMARKS.md's table of what the quick study decides: the record's verdicts and the
    rates of its 200-draw calibration (`distillscope report DIR --draws 200`, the file kept
    beside the record)."""
    cal = json.loads((QUICK_STUDY / "calibration-200-draws.json").read_text())
    _, results = quick_study_record()
    rows = table_after("BENCHMARKS.md", "| claim | verdict | false support")
    assert cal["draws"] == 200 and [int(r[0]) for r in rows] == cal["claims"]
    for claim, verdict, support, contra, power in rows:
        said, _, why = verdict.partition(" (")
        assert said == results[int(claim)].verdict and why.rstrip(")") in results[int(claim)].reason
        for shown, key in ((support, "false_support"), (contra, "false_contradiction")):
            assert shown == f"{100 * cal[key][claim]:.1f}%", (claim, key)
        assert power == f"{100 * cal['power'][claim]:.1f}%", claim
    worst = max(cal["false_rate"].values())
    named = " and ".join(str(c) for c in cal["claims"] if cal["false_rate"][str(c)] == worst)
    assert f"The worst false rate is {100 * worst:.1f}% (claims {named})" in page("BENCHMARKS.md")


def test_benchmarks_paper_record_is_its_record():
    """BENCHMARKS.md's record of the `paper` preset (2026-12-03): its runs and study time
    (provenance.json), its verdicts (scored from the record as from any study directory: the
    trajectory claims from the kept metrics.jsonl, the noise from the kept per-item outcomes),
    the report's calibration kept with it, and the 200-draw calibration's rates per claim."""
    from distillscope.scorecard.calibration_run import UNSCORED

    said = dict(table_after("BENCHMARKS.md", "| paper record | value"))
    df = pd.read_parquet(PAPER_RECORD / "results.parquet")
    results = score_claims(df, PAPER_RECORD)
    by: dict[str, list[int]] = {}
    for r in published(results):  # the instrument checks are never counted among them
        by.setdefault(r.verdict, []).append(r.id)
    for verdict in ("supported", "contradicted", "inconclusive", "not applicable", "not tested"):
        assert said[verdict] == ", ".join(map(str, by.get(verdict, []))), verdict
    checks = "; ".join(f"{r.id} {r.verdict}" for r in instrument_checks(results))
    assert said["checks of the instrument (not counted above)"] == checks
    tested = [r.id for r in results if r.verdict not in UNSCORED]
    counted = [r.id for r in published(results) if r.verdict not in UNSCORED]
    decided = len(by.get("supported", [])) + len(by.get("contradicted", []))
    assert said["decided"] == f"{decided} of {len(counted)}"
    assert said["runs"] == str(int((df["experiment"] != "baseline").sum()))
    prov = json.loads((PAPER_RECORD / "provenance.json").read_text())
    inside = datetime.fromisoformat(prov["finished"]) - datetime.fromisoformat(prov["started"])
    assert said["study_s (baselines + runs, provenance.json)"] == f"{inside.total_seconds():.1f}"
    cal = json.loads((PAPER_RECORD / "calibration.json").read_text())
    # the report's calibration rates exactly the claims today's rules test on the record
    assert cal["claims"] == tested and cal["draws"] == 40
    assert said[
        f"calibration_s (the report's, {cal['tables']:,} tables, the code that scores it)"
    ] == (f"{cal['seconds']:.1f}")
    worst = max(cal["false_rate"].values())
    assert said["worst false rate (the report's calibration, 40 draws)"] == f"{100 * worst:.1f}%"
    reasons = {r.id: r.reason for r in published(results)}

    def naming(why: str) -> set[int]:
        """The claims whose reason is ``why`` and names the seeds that would decide them."""
        return {c for c, r in reasons.items() if why in r and " seeds would decide" in r}

    lacking = page("BENCHMARKS.md").split("- lacking power: ")[1].split(" 31 (a variance")[0]
    offered = re.findall(r"(\d+) \(≈ (\d+)", lacking)
    assert {int(c) for c, _ in offered} == naming("lacks power")
    assert all(f"≈ {k} seeds" in reasons[int(c)] for c, k in offered)
    near = page("BENCHMARKS.md").split("if its estimate is the effect: ")[1].split(";")[0]
    offered = re.findall(r"(\d+) \(≈ (\d+)\)", near)
    assert {int(c) for c, _ in offered} == naming("near its margin")
    assert all(f"≈ {k} seeds" in reasons[int(c)] for c, k in offered)
    evidence = {r.id: r.evidence for r in results}
    # claim 2's Δ_KL with the item × configuration component (issue 42: [-3.9, -1.2] before)
    assert "Δ_KL -2.5 pp [-4.9, -0.2]" in evidence[2]
    assert "was [-3.9, -1.2] with the seed-only interval" in page("BENCHMARKS.md")
    assert "is **[-4.9, -0.2]** with the item × configuration component" in page("BENCHMARKS.md")
    minutes = float(said["wall_s (start-up to the written report)"]) / 60
    n, _, of = said["decided"].partition(" of ")
    studies = " ".join(page("docs/studies.md").split())
    assert f"{minutes:.0f} min on 2 cores, report included; it decides {n} of the {of}" in studies
    # the rates per claim: of the 200-draw calibration where the record keeps one, else of the
    # report's (issue 42's re-report could not re-run 200 draws; BENCHMARKS says so)
    big_path = PAPER_RECORD / "calibration-200-draws.json"
    big = json.loads(big_path.read_text()) if big_path.exists() else cal
    rows = table_after("BENCHMARKS.md", "| paper claim | verdict | false support")
    assert [int(r[0]) for r in rows] == big["claims"]
    worst_big = max(big["false_rate"].values())
    said_worst = f"(worst false rate {100 * worst_big:.1f}% at {big['draws']} draws"
    assert said_worst in page("BENCHMARKS.md")
    if not big_path.exists():
        assert "was **not re-run** with this code" in page("BENCHMARKS.md")
    verdicts = {r.id: r.verdict for r in results}
    for claim, verdict, support, contra, power in rows:
        assert verdict == verdicts[int(claim)], claim
        for shown, key in ((support, "false_support"), (contra, "false_contradiction")):
            assert shown == f"{100 * big[key][claim]:.1f}%", (claim, key)
        assert power == f"{100 * big['power'][claim]:.1f}%", claim


def test_benchmarks_across_cpus_is_the_two_records():
    """BENCHMARKS.md "Across CPUs": the quick study re-run under ``ATEN_CPU_CAPABILITY=default``
    against the record, column by column."""
    a, b = (
        pd.read_parquet(d / "results.parquet").set_index("run_id").sort_index()
        for d in (QUICK_STUDY, DEFAULT_KERNELS)
    )
    assert list(a.index) == list(b.index)
    cols = [c for c in a.columns if c.startswith("eval/") and pd.api.types.is_float_dtype(a[c])]
    gap = {c: (a[c] - b[c]).abs().max() for c in cols}
    moved = [c for c in cols if gap[c] > 0 or not a[c].isna().equals(b[c].isna())]
    text = page("BENCHMARKS.md")
    assert f"{len(moved)} of its {len(cols)} numeric `eval/*` columns" in text
    assert f"accuracy by up to {100 * gap['eval/accuracy']:.1f} pp" in text


def test_benchmarks_changed_decisions_are_the_records():
    """BENCHMARKS.md's tables of the decisions that changed when both records were re-reported
    (issue 42): each row's new verdict is today's on its record (a check of the instrument
    marked) and differs from the old one the row names."""
    _, quick = quick_study_record()
    df = pd.read_parquet(PAPER_RECORD / "results.parquet")
    paper = {r.id: r for r in score_claims(df, PAPER_RECORD)}
    for header, results in (("| claim | was |", quick), ("| paper claim | was |", paper)):
        rows = table_after("BENCHMARKS.md", header)
        assert rows, header
        for claim, was, now, _ in rows:
            r = results[int(claim)]
            assert now == r.verdict + (" (check)" if r.instrument else ""), claim
            assert was != r.verdict, claim
