"""Time and memory of full-vocabulary forward KL from hidden states, side by side.

    python bench/bench_objectives.py --quick                 # N=2,048, H=256, V=32,000 only
    python bench/bench_objectives.py --out /tmp/bench-objectives.md   # all four cases

Each mode computes the same loss — forward KL(π_T ‖ π_S), token mean over N = 2,048 positions,
temperature 1 — from student hidden states (N, H) and LM head (V, H) and a teacher of the same
shape, forward *and* backward (∂/∂hidden and ∂/∂head of the student):

- ``plain``: distillscope ``divergence_loss`` (forward KL) on logits materialised as h Wᵀ, autograd;
- ``chunked``: the tests' reference ``chunked_forward_kl`` (tests/objectives/chunked_reference.py,
  autograd per chunk), its default 1,024 rows;
- ``fused``: distillscope ``fused_divergence`` (closed-form gradients, default 256 MB budget);
- ``fused_1gb``: the same with ``memory_budget_mb=1024`` (fewer, larger chunks);
- ``trl``: TRL ``GKDTrainer.generalized_jsd_loss`` (β = 0) on materialised logits;
- ``liger``: Liger ``LigerFusedLinearJSDLoss`` (β = 0, uncompiled: the CPU path);
- ``matmul floor``: not a loss — only the four matmuls every mode must do (student and teacher
  logits, ∂/∂hidden, ∂/∂head), on all N rows at once: a lower bound on any mode's time.

TRL and Liger are optional, bench-only dependencies: a mode whose import fails is reported as
skipped with the reason. Each (mode, round) runs in its own subprocess: a small warm-up call,
then one timed call, with the process's peak RSS reset just before it (``/proc/self/clear_refs``)
so that "extra peak RSS" is the growth over the resident inputs during that call (the returned
gradients included, which every mode produces). Rounds interleave the modes (the order rotates
each round) so that machine noise hits them alike; the table shows the best time of the rounds
and the largest extra RSS, and ratios to ``plain`` and ``liger`` from the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

MODES = ("plain", "chunked", "fused", "fused_1gb", "trl", "liger", "matmul floor")
# (N, H, V): the first is --quick. The last is ~16× the first's work: it runs one round unless
# --rounds is given, so that the full bench stays near 10 minutes on an idle 2-core machine.
CASES = ((2048, 256, 32_000), (2048, 1024, 32_000), (2048, 256, 128_256), (2048, 1024, 128_256))
DEFAULT_ROUNDS = (3, 3, 3, 1)
SEQUENCES = 8  # N = 8 sequences × N/8 tokens, every token counted (token mean = pooled mean)


# ---------------------------------------------------------------------------------------------
# Worker: one mode, one timed call, in a fresh process
# ---------------------------------------------------------------------------------------------


def _rss_mb(field: str) -> float:
    """VmRSS / VmHWM of this process in MB (10⁶ bytes), from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0), so the next peak is this call's."""
    Path("/proc/self/clear_refs").write_text("5")


def _chunked_reference():
    """tests/objectives/chunked_reference.py, the autograd-per-chunk reference (not packaged)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests" / "objectives" / "chunked_reference.py"
    spec = importlib.util.spec_from_file_location("chunked_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _objective(mode: str):
    """The loss function of ``mode``: (h_S, W_S, h_T, W_T) of shapes (B, T, H), (V, H) → loss."""
    import torch

    if mode == "plain":
        from distillscope.objectives import DivergenceOptions
        from distillscope.objectives.divergences import divergence_loss

        options = DivergenceOptions(reduction="token_mean")

        def plain(h, w, h_t, w_t):
            mask = torch.ones(h.shape[:2], dtype=torch.bool)
            return divergence_loss(h @ w.T, h_t @ w_t.T, mask, options=options)[0]

        return plain
    if mode == "chunked":
        chunked_forward_kl = _chunked_reference().chunked_forward_kl

        def chunked(h, w, h_t, w_t):
            mask = torch.ones(h.shape[:2], dtype=torch.bool)
            return chunked_forward_kl(h, w, h_t, w_t, mask, reduction="token_mean")[0]

        return chunked
    if mode in ("fused", "fused_1gb"):
        from distillscope.objectives import DEFAULT_MEMORY_BUDGET_MB, ChunkSpec, DivergenceOptions
        from distillscope.objectives.fused import fused_divergence

        chunks = ChunkSpec(1024 if mode == "fused_1gb" else DEFAULT_MEMORY_BUDGET_MB)
        options = DivergenceOptions(reduction="token_mean")

        def fused(h, w, h_t, w_t):
            mask = torch.ones(h.shape[:2], dtype=torch.bool)
            return fused_divergence(h, w, h_t, w_t, mask, options=options, chunks=chunks)[0]

        return fused
    if mode == "matmul floor":

        def floor(h, w, h_t, w_t):
            with torch.no_grad():
                h, h_t = h.flatten(0, 1), h_t.flatten(0, 1)  # (N, H)
                grad_N_V = h @ w.T  # stands in for ∂L/∂z_S: same shape, same matmuls
                h_t @ w_t.T
                grad_N_V @ w
                grad_N_V.T @ h
            return torch.zeros(())

        return floor
    if mode == "trl":
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        from trl.experimental.gkd import GKDTrainer

        def trl(h, w, h_t, w_t):
            labels = torch.zeros(h.shape[:2], dtype=torch.long)  # no -100: every token counts
            with torch.no_grad():
                teacher_logits = h_t @ w_t.T
            return GKDTrainer.generalized_jsd_loss(h @ w.T, teacher_logits, labels, beta=0.0)

        return trl
    if mode == "liger":
        from liger_kernel.chunked_loss import LigerFusedLinearJSDLoss

        loss_fn = LigerFusedLinearJSDLoss(
            weight_hard_loss=0.0, weight_soft_loss=1.0, beta=0.0, compiled=False
        )

        def liger(h, w, h_t, w_t):
            labels = torch.zeros(h.shape[0] * h.shape[1], dtype=torch.long)
            return loss_fn(h.flatten(0, 1), w, h_t.flatten(0, 1), w_t, labels)

        return liger
    raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")


def _inputs(tokens: int, hidden: int, vocab: int, seed: int = 0):
    """Seeded fp32 student/teacher hidden states (B, T, H) and heads (V, H)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = (SEQUENCES, tokens // SEQUENCES, hidden)
    h = torch.randn(shape, generator=generator)
    w = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    h_t = torch.randn(shape, generator=generator)
    w_t = 1.5 * torch.randn(vocab, hidden, generator=generator) / hidden**0.5  # sharper teacher
    return h, w, h_t, w_t


def worker(mode: str, tokens: int, hidden: int, vocab: int) -> dict:
    """Warm up on a tiny case, then time one forward+backward and measure its peak RSS growth."""
    objective = _objective(mode)
    for size in ((64, 32, 512), (tokens, hidden, vocab)):  # a tiny warm-up call, then the case
        h, w, h_t, w_t = _inputs(*size)
        h.requires_grad_()
        w.requires_grad_()
        if size[0] == 64:  # thread pools, kernels, lazy imports
            _forward_backward(objective, h, w, h_t, w_t)
    _reset_peak_rss()
    rss_before = _rss_mb("VmRSS")
    start = time.perf_counter()
    loss = _forward_backward(objective, h, w, h_t, w_t)
    seconds = time.perf_counter() - start
    return {"time_s": seconds, "extra_mb": _rss_mb("VmHWM") - rss_before, "loss": float(loss)}


def _forward_backward(objective, h, w, h_t, w_t):
    loss = objective(h, w, h_t, w_t)
    if loss.requires_grad:
        loss.backward()
    return loss


# ---------------------------------------------------------------------------------------------
# Driver: rounds of subprocesses, then a Markdown table
# ---------------------------------------------------------------------------------------------


def _run_worker(mode: str, case: tuple[int, int, int]) -> dict:
    """One subprocess; returns the worker's dict or {"skipped": reason}."""
    tokens, hidden, vocab = case
    case_arg = f"{tokens},{hidden},{vocab}"
    command = [sys.executable, __file__, "--worker", mode, "--case", case_arg]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return {"skipped": lines[-1][:160]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_case(case: tuple[int, int, int], modes: list[str], rounds: int) -> dict[str, dict]:
    """Best time and largest extra RSS per mode over ``rounds`` interleaved rounds."""
    results: dict[str, dict] = {}
    for round_index in range(rounds):
        shift = round_index % len(modes)
        for mode in modes[shift:] + modes[:shift]:
            if "skipped" in results.get(mode, {}):
                continue
            run = _run_worker(mode, case)
            print(f"  {case} round {round_index + 1} {mode}: {run}", file=sys.stderr, flush=True)
            if "skipped" in run:
                results[mode] = run
                continue
            best = results.setdefault(mode, {**run, "times": []})
            best["times"].append(run["time_s"])
            best["time_s"] = min(best["time_s"], run["time_s"])
            best["extra_mb"] = max(best["extra_mb"], run["extra_mb"])
    return results


def _ratio(value: float, reference: dict | None, key: str) -> str:
    if reference is None or "skipped" in reference or reference[key] <= 0:
        return "–"
    return f"{value / reference[key]:.2f}×"


def table(all_results: dict[tuple[int, int, int, int], dict[str, dict]]) -> str:
    """Markdown table, one row per (case, mode)."""
    lines = [
        "| N, H, V | mode | time (best of rounds) | × plain | × liger "
        "| extra peak RSS | × plain | loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (tokens, hidden, vocab, rounds), results in all_results.items():
        plain, liger = results.get("plain"), results.get("liger")
        for mode, result in results.items():
            case = f"{tokens:,}, {hidden:,}, {vocab:,} ({rounds} round{'s' * (rounds > 1)})"
            if "skipped" in result:
                lines.append(f"| {case} | {mode} | skipped: {result['skipped']} ||||||")
                continue
            loss = "–" if mode == "matmul floor" else f"{result['loss']:.6f}"
            lines.append(
                f"| {case} | {mode} | {result['time_s']:.2f} s "
                f"| {_ratio(result['time_s'], plain, 'time_s')} "
                f"| {_ratio(result['time_s'], liger, 'time_s')} "
                f"| {result['extra_mb']:,.0f} MB | {_ratio(result['extra_mb'], plain, 'extra_mb')} "
                f"| {loss} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only N=2,048, H=256, V=32,000")
    ap.add_argument(
        "--rounds", type=int, help=f"interleaved rounds per case (default {DEFAULT_ROUNDS})"
    )
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    ap.add_argument("--out", type=Path, help="also write the Markdown report here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        tokens, hidden, vocab = (int(x) for x in args.case.split(","))
        print(json.dumps(worker(args.worker, tokens, hidden, vocab)))
        return

    import torch

    modes = args.modes.split(",")
    count = 1 if args.quick else len(CASES)
    start = time.perf_counter()
    all_results = {}
    for case, rounds in zip(CASES[:count], DEFAULT_ROUNDS[:count], strict=True):
        rounds = args.rounds or rounds
        all_results[(*case, rounds)] = bench_case(case, modes, rounds)
        print(table({(*case, rounds): all_results[(*case, rounds)]}), file=sys.stderr, flush=True)
    report = "\n".join(
        [
            f"Forward KL, forward+backward from hidden states ({datetime.date.today()}; "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
            f"`{' '.join(['python', *sys.argv])}`, {time.perf_counter() - start:.0f} s):",
            "",
            table(all_results),
        ]
    )
    print(report)
    if args.out:
        args.out.write_text(report + "\n")


if __name__ == "__main__":
    main()
