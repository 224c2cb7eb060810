"""Mutation score of the core modules (``make mutate``; not in CI: minutes per module).

    python bench/mutate.py                       # every module of MODULES
    python bench/mutate.py split measures        # only these
    python bench/mutate.py --list

For each module, mutmut (the ``dev`` extra) plants one small change at a time — an operator,
a constant, a comparison, a dropped argument — and runs the tests listed for that module (of
those, only the tests that reach the mutated function). A mutant no test notices *survives*.
Each module runs in its own copy of src/, tests/ and docs/ under ``--workdir`` (default
``$TMPDIR/distillscope-mutate``), so the working tree is never touched and no ``mutants/``
directory appears in it. Prints one Markdown row per module (mutants, killed, timeouts,
survived, score, minutes) and writes each module's surviving mutants, as diffs, to
``WORKDIR/NAME/survivors.diff``. Score = (killed + timeout) / (mutants run − skipped).
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")

#: The claim modules under mutation (number, name): scorecard/claims/cNN_name.py.
CLAIM_TESTS = ((1, "no_rollout_gain"), (2, "kl_direction"), (3, "lr_forgetting"))
#: name → (module mutated, the tests that guard it).
MODULES: dict[str, tuple[str, list[str]]] = {
    "split": (
        "src/distillscope/tasks/split.py",
        ["tests/tasks/test_split.py", "tests/tasks/test_split_golden.py"]
        + ["tests/tasks/test_split_guards.py", "tests/tasks/test_pools_split.py"],
    ),
    "measures": (
        "src/distillscope/eval/measures.py",
        ["tests/eval/test_metrics.py", "tests/eval/test_sparsity_boundary.py"]
        + ["tests/eval/test_measures_guards.py"],
    ),
    "verify": (
        "src/distillscope/tasks/verify.py",
        ["tests/tasks/test_countdown.py", "tests/tasks/test_verify_fuzz.py"]
        + ["tests/tasks/test_verify_guards.py"],
    ),
    "stats": (
        "src/distillscope/results/stats.py",
        ["tests/results/test_stats_guards.py", "tests/scorecard/test_rules.py"],
    ),
    "divergences": (
        "src/distillscope/objectives/divergences.py",
        ["tests/objectives/test_divergences.py", "tests/objectives/test_jsd_against_trl.py"]
        + ["tests/objectives/test_chunked_divergences.py", "tests/objectives/test_topk.py"]
        + ["tests/objectives/test_divergences_guards.py"],
    ),
    "estimators": (
        "src/distillscope/objectives/estimators.py",
        ["tests/objectives/test_sampled_estimators.py", "tests/objectives/test_fused_tokens.py"]
        + ["tests/objectives/test_estimators_guards.py"],
    ),
    "opd": (
        "src/distillscope/objectives/opd.py",
        ["tests/objectives/test_opd_policy_gradient.py", "tests/objectives/test_opd_config.py"]
        + ["tests/objectives/test_opd_guards.py"],
    ),
    "run_study": (
        "src/distillscope/study/run_study.py",
        ["tests/study/test_run_study_guards.py", "tests/study/test_resume_counts.py"]
        + ["tests/study/test_study_baseline.py"],
    ),
    "pools": (
        "src/distillscope/tasks/pools.py",
        ["tests/tasks/test_pools_split.py", "tests/tasks/test_split_golden.py"]
        + ["tests/tasks/test_pools_guards.py"],
    ),
    "spectrum": (
        "src/distillscope/rollout/spectrum.py",
        ["tests/rollout/test_rollout_spectrum.py", "tests/rollout/test_spectrum_ends.py"]
        + ["tests/rollout/test_spectrum_guards.py"],
    ),
    "calibrate": (
        "src/distillscope/scorecard/calibrate.py",
        ["tests/scorecard/test_calibrate_guards.py"],
    ),
    # the scorecard: its runner, the decisions on both sides of a margin, the seed-blocked
    # estimates, the evidence a claim may read, and three claim modules (each guarded by its
    # own tables, its guards and the runner's)
    "scorecard": (
        "src/distillscope/scorecard/runner.py",
        [f"tests/scorecard/claims/test_c0{k}_{n}.py" for k, n in CLAIM_TESTS]
        + ["tests/scorecard/test_scorecard.py", "tests/scorecard/test_scorecard_guards.py"]
        + ["tests/scorecard/claims/test_c11_rlvr_survival.py"],  # a part with several routes
    ),
    "verdicts": (
        "src/distillscope/scorecard/verdicts.py",
        [
            "tests/scorecard/claims/test_verdicts.py",
            "tests/scorecard/claims/test_verdicts_guards.py",
        ]
        + ["tests/scorecard/claims/test_c01_no_rollout_gain.py"],
    ),
    "estimate": (
        "src/distillscope/scorecard/estimate.py",
        [
            "tests/scorecard/claims/test_estimate.py",
            "tests/scorecard/claims/test_estimate_guards.py",
        ]
        + ["tests/scorecard/claims/test_c03_lr_forgetting.py"],
    ),
    "evidence": (
        "src/distillscope/scorecard/evidence.py",
        [
            "tests/scorecard/claims/test_evidence.py",
            "tests/scorecard/claims/test_evidence_guards.py",
        ]
        + ["tests/scorecard/claims/test_c01_no_rollout_gain.py"],
    ),
    **{
        f"c0{k}": (
            f"src/distillscope/scorecard/claims/c0{k}_{n}.py",
            [
                f"tests/scorecard/claims/test_c0{k}_{n}.py",
                f"tests/scorecard/claims/test_c0{k}_guards.py",
            ]
            + ["tests/scorecard/claims/test_docs.py"]  # the docs are rendered from the spec
            + ["tests/scorecard/claims/test_specs_guards.py"],  # specify() runs at import
        )
        for k, n in CLAIM_TESTS
    },
}

#: Only these functions of a module are mutated (mutmut name patterns): the study runner's
#: resume decision, not its provenance strings.
ONLY = {
    "run_study": ["*x__unfinished__*", "*x_study_status__*", "*x_prepare__*"],
    # the calibration's bookkeeping; draw/setup/_effects are guarded by the slow tests of
    # test_report_calibrate and test_report_calibration_guards (minutes per mutant)
    "calibrate": [
        f"*x_{f}__mutmut_*"
        for f in ("noise_model", "run_sds", "_typical", "planned_table", "design", "_false")
        + ("_claim_ids", "_scored", "_runs", "calibrate", "_tables_of", "tables")
    ],
}

#: Modules whose guarding tests are marked slow; the others run without the slow tests (a
#: surviving mutant runs every selected test, so one 10 s test costs minutes per module).
WITH_SLOW = {"run_study"}


def _setup_cfg(module: str, tests: list[str], slow: bool, timeout: float = 5.0) -> str:
    # a mutant that loops forever is stopped at `timeout`× its tests' clean time (mutmut: 15×)
    lines = ["[mutmut]", "source_paths=src", f"only_mutate={module}", "also_copy=docs"]
    lines.append(f"timeout_multiplier={timeout}")
    lines.append("pytest_add_cli_args_test_selection=" + "\n\t".join(tests))
    args = ["-q", "-p", "no:cacheprovider", "-x"] + ([] if slow else ["-m", "not slow"])
    lines.append("pytest_add_cli_args=" + "\n\t".join(args))
    return "\n".join(lines) + "\n"


def _statuses(work: Path) -> dict[str, str]:
    """mutant name → status, from ``mutmut results --all true``."""
    out = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    statuses = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[name] = status
    return statuses


def _diff(work: Path, module: str, mutant: str) -> str:
    """The mutant's diff against the original function, read from mutmut's mutated copy (its
    ``.spans`` file gives each variant's lines); ``mutmut show`` (the fallback) re-reads the
    whole tree per mutant and took minutes each on a loaded 2-core machine."""
    mutated = work / "mutants" / module
    spans_file = mutated.with_name(mutated.name + ".spans")
    if not spans_file.is_file():
        show = [str(MUTMUT), "show", mutant]
        return subprocess.run(show, cwd=work, capture_output=True, text=True).stdout
    spans = json.loads(spans_file.read_text())["spans"]
    lines = mutated.read_text().splitlines()
    variant = mutant.rsplit(".", 1)[-1]
    original = variant.split("__mutmut_")[0] + "__mutmut_orig"
    (a0, a1), (b0, b1) = spans[original], spans[variant]
    diff = difflib.unified_diff(lines[a0:a1], lines[b0:b1], original, variant, lineterm="", n=1)
    return "\n".join(diff) + "\n"


def run_module(name: str, workdir: Path, children: int, timeout: float = 5.0) -> dict:
    """Mutate one module in a fresh copy of the tree; returns its counts and minutes."""
    module, tests = MODULES[name]
    tests = [t for t in tests if (ROOT / t).is_file()]
    work = workdir / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for part in ("src", "tests", "docs"):  # docs/: test_docs renders them
        shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / "setup.cfg").write_text(_setup_cfg(module, tests, name in WITH_SLOW, timeout))
    t0 = time.time()
    with open(work / "mutmut.log", "w") as log:
        subprocess.run(
            [str(MUTMUT), "run", "--max-children", str(children), *ONLY.get(name, [])],
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    minutes = (time.time() - t0) / 60
    statuses = {m: s for m, s in _statuses(work).items() if s != "not checked"}
    counts = {s: list(statuses.values()).count(s) for s in set(statuses.values())}
    survivors = [m for m, s in statuses.items() if s == "survived"]
    diffs = [_diff(work, module, m) for m in survivors]
    (work / "survivors.diff").write_text("\n".join(diffs))
    scored = len(statuses) - counts.get("skipped", 0)
    caught = counts.get("killed", 0) + counts.get("timeout", 0)
    score = caught / scored if scored else float("nan")
    return {
        "name": name,
        "module": module,
        "mutants": len(statuses),
        "counts": counts,
        "score": score,
        "minutes": minutes,
        "survivors": survivors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"modules (default all): {', '.join(MODULES)}")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    default_workdir = Path(tempfile.gettempdir()) / "distillscope-mutate"
    parser.add_argument("--workdir", type=Path, default=default_workdir)
    parser.add_argument("--children", type=int, default=1, help="mutants tested in parallel")
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=5.0,
        help="stop a mutant at this multiple of its tests' clean time (raise it when other jobs "
        "load the machine: a test slowed by them otherwise counts as a caught mutant)",
    )
    args = parser.parse_args(argv)
    if args.list:
        for name, (module, tests) in MODULES.items():
            print(f"{name}: {module} ← {' '.join(tests)}")
        return 0
    unknown = [n for n in args.names if n not in MODULES]
    if unknown:
        parser.error(f"unknown module {unknown[0]!r}; choose from {', '.join(MODULES)}")
    if not MUTMUT.is_file():
        parser.error(f"{MUTMUT} is missing: pip install -e '.[dev]' installs mutmut")
    print("| module | mutants | killed | timeout | survived | no tests | score | minutes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.names or list(MODULES):
        r = run_module(name, args.workdir, args.children, args.timeout_multiplier)
        c = r["counts"]
        print(
            f"| `{r['module'].removeprefix('src/distillscope/')}` | {r['mutants']} "
            f"| {c.get('killed', 0)} | {c.get('timeout', 0)} | {c.get('survived', 0)} "
            f"| {c.get('no tests', 0)} | {100 * r['score']:.1f}% | {r['minutes']:.1f} |",
            flush=True,
        )
        for m in r["survivors"]:
            print(f"  survived: {m} (diff in {args.workdir / name / 'survivors.diff'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
