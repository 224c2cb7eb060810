"""Exact full-vocabulary losses at V = 151,936 as the token count grows: time and peak memory.

    python bench/bench_vocab_scaling.py                          # CPU: N = 512, 1,024, … doubling
    python bench/bench_vocab_scaling.py --device cuda --max-tokens 65536

Forward KL(π_T ‖ π_S), reverse KL(π_S ‖ π_T) and JSD (β = 0.5), token mean, temperature 1, from
student and teacher hidden states (N, H = 896, Qwen2.5-0.5B) and LM heads (V = 151,936, Qwen2.5's
padded vocabulary), forward *and* backward (∂/∂hidden and ∂/∂head of the student). Modes:

- ``fused``: distillscope ``fused_divergence`` at the default ``objective.memory_budget_mb``
  (256 MB: closed-form gradients, chunks of token rows sized to the budget);
- ``plain``: distillscope ``divergence_loss`` on materialised (N × V) logits, autograd; run only
  while its extra peak memory, projected ×2 from the previous N, stays under ``--plain-limit-gb``;
- ``liger``: Liger ``LigerFusedLinearJSDLoss`` (β = 0 forward KL, 1 reverse KL, 0.5 JSD;
  uncompiled, its default 1,024-row chunks); skipped with the reason where it does not import.

N doubles from ``--start-tokens`` while N ≤ ``--max-tokens`` and the previous measurement,
projected ×2, stays under ``--time-limit-s``. Each (objective, mode, N) runs in its own process:
a tiny warm-up call, then one timed call. Peak memory is the growth during that call — on CPU
the high-water mark VmHWM (reset just before the call) minus the RSS just before it; on CUDA
``torch.cuda.max_memory_allocated`` minus the allocated bytes just before it — so the resident
inputs do not count and the gradients the call returns do.

Budget accounting for ``fused``: beyond its chunks, any exact call must hold ∂L/∂W (V × H fp32,
545 MB here), ∂L/∂h (N × H) and the gathered (masked) rows of both models' hidden states
(2 · N × H): "held". The table gives extra peak − held, the part the chunk budget governs, and
whether it is within the default budget (256 MB, for the (rows × V) buffers) plus 16 MB for what
that budget does not cover (per-row vectors, (rows × H) temporaries, allocator slack). The fused
and plain loss values must agree to a relative 1e-5 at every N both ran (else the bench ends
with exit status 1 after its table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from bench_objectives import _inputs, _reset_peak_rss, _rss_mb

from distillscope.objectives.options import DEFAULT_MEMORY_BUDGET_MB

VOCAB, HIDDEN = 151_936, 896
OBJECTIVES = ("forward_kl", "reverse_kl", "jsd")
MODES = ("fused", "plain", "liger")
LIGER_BETA = {"forward_kl": 0.0, "reverse_kl": 1.0, "jsd": 0.5}  # Liger's β: 0 → KL(T‖S)
AGREEMENT = 1e-5
SLACK_MB = 16.0  # what the budget does not cover: row vectors, (C × H) temporaries, allocator
VERL_BAR = "verl (issue #6593): ~28 GB at 64K tokens × 152K vocabulary"


def _loss_function(objective: str, mode: str):
    """(h_S (B, T, H), W_S (V, H), h_T, W_T) → scalar loss of ``objective`` computed by ``mode``."""
    import torch

    if mode in ("fused", "plain"):
        from distillscope.objectives.divergences import DIVERGENCES, divergence_loss
        from distillscope.objectives.fused import fused_divergence
        from distillscope.objectives.options import ChunkSpec, DivergenceOptions

        options = DivergenceOptions(reduction="token_mean", weights={"beta": 0.5})
        divergence = DIVERGENCES[objective]

        def ours(h, w, h_t, w_t):
            mask = torch.ones(h.shape[:2], dtype=torch.bool, device=h.device)
            if mode == "plain":
                return divergence_loss(
                    h @ w.T, h_t @ w_t.T, mask, divergence=divergence, options=options
                )[0]
            chunks = ChunkSpec()  # the default objective.memory_budget_mb
            return fused_divergence(
                h, w, h_t, w_t, mask, divergence=divergence, options=options, chunks=chunks
            )[0]

        return ours
    if mode == "liger":
        from liger_kernel.chunked_loss import LigerFusedLinearJSDLoss

        loss_fn = LigerFusedLinearJSDLoss(
            weight_hard_loss=0.0, weight_soft_loss=1.0, beta=LIGER_BETA[objective], compiled=False
        )

        def liger(h, w, h_t, w_t):
            labels = torch.zeros(h.shape[0] * h.shape[1], dtype=torch.long, device=h.device)
            return loss_fn(h.flatten(0, 1), w, h_t.flatten(0, 1), w_t, labels)

        return liger
    raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")


def worker(objective: str, mode: str, tokens: int, device: str) -> dict:
    """One warm-up call, then one timed forward+backward: seconds, extra peak MB, loss."""
    import torch

    loss_fn = _loss_function(objective, mode)
    cuda = device.startswith("cuda")
    for size in ((64, 32, 512), (tokens, HIDDEN, VOCAB)):  # tiny warm-up, then the case
        h, w, h_t, w_t = (x.to(device) for x in _inputs(*size))
        h.requires_grad_()
        w.requires_grad_()
        if size[0] == 64:
            loss_fn(h, w, h_t, w_t).backward()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 1e6
    else:
        _reset_peak_rss()
        before = _rss_mb("VmRSS")
    start = time.perf_counter()
    loss = loss_fn(h, w, h_t, w_t)
    loss.backward()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 1e6 if cuda else _rss_mb("VmHWM")
    return {"time_s": seconds, "extra_mb": peak - before, "loss": float(loss.detach())}


def _run_worker(objective: str, mode: str, tokens: int, device: str) -> dict:
    """One subprocess; the worker's dict, or {"skipped": the last line of its error}."""
    command = [sys.executable, __file__, "--worker", objective, mode, str(tokens)]
    done = subprocess.run([*command, "--device", device], capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return {"skipped": lines[-1][:160]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def held_mb(tokens: int) -> float:
    """What any exact call holds beyond its chunks: ∂L/∂W (V × H fp32), ∂L/∂h and both models'
    gathered rows (3 · N × H fp32)."""
    return (VOCAB * HIDDEN + 3 * tokens * HIDDEN) * 4 / 1e6


def sweep(objective: str, mode: str, args: argparse.Namespace) -> tuple[dict[int, dict], str]:
    """Rows {N: result} of one (objective, mode), and why the doubling stopped."""
    rows: dict[int, dict] = {}
    tokens, last = args.start_tokens, None
    while tokens <= args.max_tokens:
        if last is not None and 2 * last["time_s"] > args.time_limit_s:
            return rows, f"N = {tokens:,} not run (projected {2 * last['time_s']:.0f} s)"
        projected_gb = None if last is None else 2 * last["extra_mb"] / 1e3
        if mode == "plain" and projected_gb is not None and projected_gb > args.plain_limit_gb:
            return rows, f"N = {tokens:,} not run (projected {projected_gb:.1f} GB)"
        last = _run_worker(objective, mode, tokens, args.device)
        print(f"  {objective} {mode} N={tokens}: {last}", file=sys.stderr, flush=True)
        if "skipped" in last:
            return rows, f"skipped: {last['skipped']}"
        rows[tokens] = last
        tokens *= 2
    return rows, f"N = {tokens:,} not run (> --max-tokens)"


def _table_row(objective: str, mode: str, tokens: int, result: dict, plain: dict | None) -> str:
    """One Markdown row: tokens/s, extra peak, the fused budget check, the loss."""
    within, agree = "–", "–"
    if mode == "fused":
        chunk_mb = result["extra_mb"] - held_mb(tokens)
        verdict = "yes" if chunk_mb <= DEFAULT_MEMORY_BUDGET_MB + SLACK_MB else "**no**"
        within = f"{chunk_mb:,.0f} MB: {verdict}"
    if plain is not None and mode != "plain":
        agree = f"{abs(result['loss'] - plain['loss']) / abs(plain['loss']):.1e}"
    return (
        f"| {objective} | {mode} | {tokens:,} | {tokens / result['time_s']:,.0f} "
        f"| {result['time_s']:.2f} s | {result['extra_mb']:,.0f} MB | {within} "
        f"| {result['loss']:.6f} | {agree} |"
    )


def report(results: dict[tuple[str, str], tuple[dict[int, dict], str]]) -> tuple[str, float]:
    """The Markdown table, the stop reasons below it, and the fused-vs-plain max relative gap."""
    lines = [
        "| objective | mode | N | tokens/s | time | extra peak | fused: extra − held, ≤ budget? "
        "| loss | rel. diff to plain |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    stops, worst = [], 0.0
    for (objective, mode), (rows, stop) in results.items():
        plain_rows = results.get((objective, "plain"), ({}, ""))[0]
        for tokens, result in rows.items():
            plain = plain_rows.get(tokens)
            lines.append(_table_row(objective, mode, tokens, result, plain))
            if mode == "fused" and plain is not None:
                gap = abs(result["loss"] - plain["loss"]) / abs(plain["loss"])
                worst = max(worst, gap)
        stops.append(f"- {objective} {mode}: {stop}")
    return "\n".join([*lines, "", *stops]), worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    ap.add_argument("--start-tokens", type=int, default=512, help="the first N (a multiple of 8)")
    ap.add_argument("--max-tokens", type=int, default=65_536, help="the largest N to try")
    ap.add_argument("--time-limit-s", type=float, default=60.0, help="a measurement's bound")
    ap.add_argument(
        "--plain-limit-gb", type=float, default=8.5, help="plain: bound on its projected peak"
    )
    ap.add_argument("--objectives", default=",".join(OBJECTIVES), help=f"of {OBJECTIVES}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        objective, mode, tokens = args.worker
        print(json.dumps(worker(objective, mode, int(tokens), args.device)))
        return

    import torch

    start, load = time.perf_counter(), os.getloadavg()[0]
    results = {}
    for objective in args.objectives.split(","):
        for mode in args.modes.split(","):
            results[(objective, mode)] = sweep(objective, mode, args)
    table, worst = report(results)
    print(table)
    print(
        f"\nV = {VOCAB:,}, H = {HIDDEN}, token mean, forward+backward; {args.device}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"1-min load average {load:.1f} at the start; "
        f"`{' '.join(['python', *sys.argv])}`, {time.perf_counter() - start:.0f} s"
    )
    print(f"fused vs plain loss: max relative difference {worst:.1e} (bound {AGREEMENT:.0e})")
    print(f"For reference, {VERL_BAR}.")
    if worst > AGREEMENT:
        sys.exit(f"fused and plain losses differ by {worst:.1e} > {AGREEMENT:.0e}")


if __name__ == "__main__":
    main()
