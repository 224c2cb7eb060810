"""Per-rank memory and step time of one run on 1 process, 2 (data parallel) and 2 under FSDP.

    python bench/bench_fsdp.py [--hidden 768] [--layers 8] [--steps 4] [--out /tmp/bench-fsdp]

A random-weight Llama student whose decoder layers hold nearly all of its parameters (hidden
768, MLP 2,048, 8 layers, the testbed's 54-token vocabulary, tied embeddings) and a tiny
teacher (hidden 32, 2 layers), built locally, train the same config three times through the
CLI (``distillscope train CFG --skip-eval``): on one process; with ``--launcher accelerate
--num-processes 2`` (every rank holds the whole student); and with ``--fsdp`` added (the layers
sharded, train/fsdp.py), one torch thread per process (``OMP_NUM_THREADS=1``; gloo between
the ranks). Nothing in the runs is instrumented: the bench polls the resident
set of every rank process of the launched tree from outside (``/proc/PID/status``; a rank is
a ``distillscope.cli`` process whose environment holds the launcher's ``RANK``), under an
allocator that maps every block of 64 kB or more (``MALLOC_MMAP_THRESHOLD_``), so that freed
tensors leave the resident set. A rank's training peak is its high-water mark (VmHWM) last read
before the run's final metrics row appeared: every step up to the last one's logging,
sampling included, and not the final checkpoint and export, in which rank 0 gathers the whole
state into its (CPU) memory by design. Beside it: the largest anonymous resident set read
(RssAnon, the tensors; the file-backed rest is mapped files) and, read once late in the run,
the resident file-backed part of the mapped student checkpoint (``/proc/PID/smaps``). The step
time is the mean ``time/step`` of the steps after the first (metrics.jsonl); the agreement is
with the 1-process run's ``train/loss`` rows and final checkpointed parameters.

The prediction is docs/scaling.md's memory model: per rank 4 × (E + L / N) fp32 numbers
(parameters, gradients, two AdamW moments; E the replicated embeddings and norm, L the layer
parameters), with N = 1 for a rank that holds the whole student, plus, under FSDP, the L full
layer parameters every rank gathers while rank 0 samples (the peak of a step). The resident
sets also hold the interpreter, torch, the teacher and the activations, which no model
predicts; the comparison is therefore between settings: the FSDP rank's peak below the
data-parallel rank's.

Prints a Markdown table and a line on what the model predicts and what was measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

from distillscope.config import dump_run_config, load_run_config
from distillscope.store import read_metrics
from distillscope.testbed.recipe import ModelSpec
from distillscope.testbed.tokenizer import build_tokenizer

SRC = Path(__file__).resolve().parents[1] / "src"
#: every block of 64 kB or more mapped and unmapped when freed (as bench/bench_step_trl.py)
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
#: (setting, train options): the three ways the same config is trained
SETTINGS = [
    ("1 process", []),
    ("2 processes, data parallel", ["--launcher", "accelerate", "--num-processes", "2"]),
    ("2 processes, --fsdp", ["--launcher", "accelerate", "--num-processes", "2", "--fsdp"]),
]
MB = 1e6
FP32 = 4  # bytes


def save_llama(path: Path, hidden: int, intermediate: int, layers: int, seed: int) -> Path:
    """A random Llama of the testbed's shape family (tied embeddings, head dim 64 or less) with
    the testbed tokenizer, saved under ``path``."""
    tok = build_tokenizer()
    torch.manual_seed(seed)
    spec = ModelSpec(hidden, intermediate, layers, num_attention_heads=max(1, hidden // 64))
    LlamaForCausalLM(spec.llama_config(len(tok), tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def parameter_split(student_dir: Path) -> tuple[int, int]:
    """(E, L): the student's parameters outside and inside its decoder layers (FSDP's units)."""
    model = LlamaForCausalLM.from_pretrained(student_dir)
    layers = sum(p.numel() for n, p in model.named_parameters() if n.startswith("model.layers."))
    return sum(p.numel() for p in model.parameters()) - layers, layers


@dataclass
class Watch:
    """What the polls of a run's rank processes read (kB), by rank. ``train``: the high-water
    mark (VmHWM) last read before the final metrics row appeared; ``anon``: the largest
    anonymous resident set (RssAnon) read in that time, and ``file``: the file-backed one
    (RssFile) read with it; ``end``: the high-water mark last read at all (the final
    checkpoint and export included); ``mapped``: the resident file-backed part of the student's
    checkpoint (``*.safetensors`` in /proc/PID/smaps) read once, when the second-to-last step's
    row appeared."""

    train: dict[int, int] = field(default_factory=dict)
    mapped: dict[int, int] = field(default_factory=dict)
    anon: dict[int, int] = field(default_factory=dict)
    file: dict[int, int] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:  # the process ended between the listing and the read
        return None


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (from each process's parent id in /proc)."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _read(entry / "stat")
            if stat:  # "pid (comm) state ppid …"; comm may hold spaces
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        tree += frontier
    return tree


def _rank_of(pid: int, launched: bool) -> int | None:
    """The rank of ``pid`` if it is a process of the run (a ``distillscope.cli`` process; under
    a launcher the one whose environment holds ``RANK``), else None."""
    cmdline, environ = _read(Path(f"/proc/{pid}/cmdline")), _read(Path(f"/proc/{pid}/environ"))
    if not cmdline or environ is None or "distillscope.cli" not in cmdline:
        return None
    env = dict(v.split("=", 1) for v in environ.split("\0") if "=" in v)
    if not launched:
        return 0
    return int(env["RANK"]) if "RANK" in env else None


def _memory_kb(pid: int) -> dict[str, int]:
    """VmHWM, RssAnon and RssFile of ``pid`` (empty once it has exited)."""
    status = _read(Path(f"/proc/{pid}/status")) or ""
    keys = ("VmHWM:", "RssAnon:", "RssFile:")
    return {
        ln.split()[0][:-1]: int(ln.split()[1]) for ln in status.splitlines() if ln.startswith(keys)
    }


def _mapped_kb(pid: int, suffix: str = ".safetensors") -> int:
    """The resident file-backed kB of ``pid``'s mappings of files named ``*suffix`` (a mapping's
    Rss less its Anonymous: the pages written in place, copies of the file's)."""
    total, inside = 0, False
    for line in (_read(Path(f"/proc/{pid}/smaps")) or "").splitlines():
        head = line.split()
        if head and "-" in head[0]:  # a mapping's first line: "start-end perms … path"
            inside = head[-1].endswith(suffix)
        elif inside and head[0] in ("Rss:", "Anonymous:"):
            total += int(head[1]) * (1 if head[0] == "Rss:" else -1)
    return total


def watch(proc: subprocess.Popen, run_dir: Path, steps: int, ranks: int) -> Watch:
    """Poll the ``ranks`` rank processes of ``proc``'s tree every 20 ms until it exits (the
    tree is listed every 0.2 s until every rank is found)."""
    rank_of, marks, listed = {}, Watch(), 0.0
    metrics = run_dir / "metrics.jsonl"
    while proc.poll() is None:
        if sum(r is not None for r in rank_of.values()) < ranks and time.monotonic() > listed:
            listed = time.monotonic() + 0.2
            for pid in _descendants(proc.pid):
                if pid not in rank_of:
                    rank_of[pid] = _rank_of(pid, launched=ranks > 1)
        read = {r: _memory_kb(pid) for pid, r in rank_of.items() if r is not None}
        read = {r: m for r, m in read.items() if len(m) == 3}
        marks.end |= {r: m["VmHWM"] for r, m in read.items()}
        # the marks were read before the row count: with fewer rows than steps, no rank had
        # reached the final checkpoint when they were read
        rows = len((_read(metrics) or "").splitlines())
        if rows >= max(1, steps - 1) and not marks.mapped:
            marks.mapped = {r: _mapped_kb(pid) for pid, r in rank_of.items() if r is not None}
        if rows < steps:
            marks.train = dict(marks.end)
            for r, m in read.items():
                if m["RssAnon"] > marks.anon.get(r, -1):
                    marks.anon[r], marks.file[r] = m["RssAnon"], m["RssFile"]
        time.sleep(0.02)
    return marks


def train(cfg_file: Path, run_dir: Path, options: list[str], steps: int) -> tuple[Watch, float]:
    """One run of ``distillscope train`` with ``options``; its marks and wall seconds."""
    command = [sys.executable, "-m", "distillscope.cli", "train", str(cfg_file)]
    command += ["--out", str(run_dir), "--skip-eval", *options]
    pythonpath = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, **MEMORY_ENV, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as proc:
        marks = watch(proc, run_dir, steps, ranks=2 if options else 1)
        err = proc.stderr.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{err[-3000:]}")
    return marks, time.perf_counter() - t0


def agreement(run_dir: Path, ref_dir: Path) -> tuple[float, float]:
    """Max |Δ train/loss| over the steps and max |Δ| of the final checkpointed parameters."""
    rows, ref = read_metrics(run_dir), read_metrics(ref_dir)
    loss = max(abs(a["train/loss"] - b["train/loss"]) for a, b in zip(rows, ref, strict=True))
    params, want = (load_file(d / "checkpoint" / "model.safetensors") for d in (run_dir, ref_dir))
    weights = max(float((params[k] - v).abs().max()) for k, v in want.items())
    return loss, weights


def _mb(kb: int) -> float:
    return kb * 1024 / MB


def _per_rank(kb_by_rank: dict[int, int]) -> str:
    return " / ".join(f"{_mb(kb):,.0f}" for _, kb in sorted(kb_by_rank.items()))


HEADER = [
    "| setting | ranks | peak RSS per rank (MB) | peak anonymous RSS per rank (MB) | predicted "
    "peak state per rank, 4 × (E + L/N) (+ L under FSDP) (MB) | step time (s) | "
    "max \\|Δ train/loss\\| | max \\|Δ parameter\\| | peak RSS with the final checkpoint (MB) | "
    "wall (s) |",
    "|---|---|---|---|---|---|---|---|---|---|",
]


def summary(e: int, layer: int, marks: dict[str, Watch], steps: int) -> str:
    """What the model predicts FSDP saves each rank against data parallel, and what it saved;
    and what data parallel's ranks hold above the single process."""
    one, ddp, sharded = (marks[name] for name, _ in SETTINGS)
    predicted = (4 * layer / 2 - layer) * FP32 / MB  # sharded states, less the gathered L

    def less(a: dict[int, int], b: dict[int, int]) -> list[float]:
        return [_mb(a[r] - b[r]) for r in sorted(b)]

    def mb(values: list[float]) -> str:
        return " / ".join(f"{v:,.0f}" for v in values)

    saved = less(ddp.anon, sharded.anon)
    above_one = less(ddp.anon, {r: one.anon[0] for r in ddp.anon})
    return (
        f"Student: E = {e:,} replicated and L = {layer:,} layer parameters. The model predicts "
        f"that FSDP over 2 ranks lowers each rank's peak by 4 × L / 2 − L = {predicted:,.0f} MB "
        f"against data parallel (the same rows per rank; the sampling peak holds the L "
        f"gathered parameters beside the shards). Measured (rank 0 / rank 1): {mb(saved)} MB "
        f"of peak anonymous RSS ({mb([100 * v / predicted for v in saved])} % of the "
        f"prediction) and "
        f"{mb(less(ddp.train, sharded.train))} MB of peak RSS: under FSDP the student's "
        f"checkpoint file stays mapped, {_per_rank(sharded.mapped)} MB of it resident and "
        f"file-backed after step {steps - 2} ({_per_rank(ddp.mapped)} MB without FSDP). Data "
        f"parallel's ranks peak {mb(above_one)} MB of anonymous RSS "
        f"above the single process's, against 4 × L = {4 * predicted:,.0f} MB of state that "
        f"both hold whole."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-fsdp"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    teacher = save_llama(args.out / "teacher", 32, 64, 2, seed=1)
    student = save_llama(args.out / "student", args.hidden, args.intermediate, args.layers, 2)
    e, layer = parameter_split(student)
    items = [f"model.teacher={teacher}", f"model.student={student}", f"optim.steps={args.steps}"]
    items += ["optim.lr=1e-3", "optim.warmup_steps=0", "rollout.prompts_per_step=4"]
    items += ["task.max_new_tokens=16", "checkpoint_every=0"]
    cfg_file = args.out / "run.yaml"
    cfg_file.write_text(dump_run_config(load_run_config(None, items)))

    table, marks = list(HEADER), {}
    for i, (name, options) in enumerate(SETTINGS):
        run_dir = args.out / f"run{i}"
        marks[name], wall = train(cfg_file, run_dir, options, args.steps)
        shards = 2 if "--fsdp" in options else 1
        gathered = layer if shards > 1 else 0  # FSDP: the full layers while rank 0 samples
        predicted = (4 * (e + layer / shards) + gathered) * FP32 / MB
        step_s = statistics.mean(r["time/step"] for r in read_metrics(run_dir)[1:])
        loss, weights = agreement(run_dir, args.out / "run0") if i else (0.0, 0.0)
        m = marks[name]
        table.append(
            f"| {name} | {len(m.train)} | {_per_rank(m.train)} | {_per_rank(m.anon)} | "
            f"{predicted:,.0f} | {step_s:.2f} | {loss:.1e} | {weights:.1e} | "
            f"{_per_rank(m.end)} | {wall:.0f} |"
        )
    print("\n".join(table))
    print(f"\n{summary(e, layer, marks, args.steps)}")


if __name__ == "__main__":
    main()
