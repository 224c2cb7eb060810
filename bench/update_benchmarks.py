"""Run the benchmark scripts and rewrite their sections of BENCHMARKS.md (``make bench``).

    python bench/update_benchmarks.py                    # every benchmark below
    python bench/update_benchmarks.py step_trl study     # only these
    python bench/update_benchmarks.py --list

Each benchmark NAME owns the block ``<!-- bench:NAME -->…<!-- /bench:NAME -->`` of
BENCHMARKS.md (appended under "## Latest `make bench`" when missing). The block gets the command,
the machine, the date, and the Markdown table the script printed (a script that prints a JSON
object instead gets it as a two-column table). A script that is not in bench/ yet, or an
optional dependency it lacks, is skipped with the reason; the old block stays as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
DOC = BENCH.parent / "BENCHMARKS.md"
HEADING = "## Latest `make bench`"

BENCHMARKS: dict[str, list[str]] = {
    "objectives": ["bench_objectives.py", "--quick"],  # plain / chunked / fused / TRL / Liger
    "memory": ["bench_memory.py"],  # training-step memory
    "fsdp": ["bench_fsdp.py"],  # per-rank memory and step time: 1 process, 2, 2 under FSDP
    "sampler": ["bench_sampler.py"],  # sampler vs transformers generate()
    "step_trl": ["bench_step_trl.py"],  # a step vs TRL DistillationTrainer, two shapes
    "teacher_cache": ["bench_teacher_cache.py"],  # shared teacher scores at V = 128,256
    "teacher_cache_built": ["bench_teacher_cache_built.py"],  # teacher-cache build vs live
    "served_teacher": ["bench_served_teacher.py"],  # top-k + tail error, request latency
    "cross_tokenizer": ["bench_cross_tokenizer.py"],  # aligned / ULD against the exact KL
    "language": ["bench_language.py"],  # the language identifier of chat-format style runs
    "train": ["bench_train.py"],  # one quick-preset run
    "eval_precision": ["bench_eval_precision.py"],  # samples per evaluation item
    "study": ["bench_study.py"],  # the main job: the quick study
    "vocab_scaling": ["bench_vocab_scaling.py"],  # exact losses at V = 151,936 as N grows
    "config_check": ["bench_config_check.py"],  # a bad input refused before torch loads
}


def machine() -> str:
    """CPU model, cores, Python and torch versions, and whether the machine was shared."""
    cpu = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo")
    if info.exists():
        found = re.search(r"model name\s*:\s*(.+)", info.read_text())
        cpu = found.group(1).strip() if found else cpu
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
        f"{torch.__version__}; 1-min load average at the start {load:.1f}"
    )


def markdown_of(stdout: str) -> str:
    """The Markdown the script printed (table lines and the notes between them), or its final
    JSON object as a ``| key | value |`` table."""
    lines = stdout.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if first is not None:
        return "\n".join(lines[first:]).strip()
    start = stdout.rfind("\n{")
    obj = json.loads(stdout[start + 1 if start >= 0 else 0 :])
    rows = [
        f"| {k} | {json.dumps(v) if isinstance(v, dict | list) else v} |" for k, v in obj.items()
    ]
    return "\n".join(["| quantity | value |", "|---|---|", *rows])


def replace_block(doc: str, name: str, body: str) -> str:
    """``doc`` with the ``bench:NAME`` block's content replaced by ``body`` (appended if absent)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(doc):
        return pattern.sub(lambda _: block, doc)
    if HEADING not in doc:
        doc = doc.rstrip("\n") + f"\n\n{HEADING}\n"
    return doc.rstrip("\n") + f"\n\n### {name}\n\n{block}\n"


def run(name: str) -> str | None:
    """Run one benchmark; its block's new content, or None (skipped, reason printed)."""
    script, *args = BENCHMARKS[name]
    if not (BENCH / script).exists():
        print(f"skip {name}: bench/{script} is not in this checkout yet", file=sys.stderr)
        return None
    command = f"python bench/{script} {' '.join(args)}".strip()
    print(f"run  {name}: {command}", file=sys.stderr, flush=True)
    started, where = datetime.now(timezone.utc), machine()
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"skip {name}: exit {done.returncode}: {tail}", file=sys.stderr)
        return None
    header = f"`{command}` — {started:%Y-%m-%d %H:%M} UTC — {where}"
    return f"{header}\n\n{markdown_of(done.stdout)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help=f"of {list(BENCHMARKS)} (default: all)")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(BENCHMARKS))
        return
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        sys.exit(f"unknown benchmark {unknown}: choose from {list(BENCHMARKS)}")
    for name in args.names or BENCHMARKS:
        body = run(name)
        if body is not None:  # write after each one: a late failure keeps the earlier tables
            DOC.write_text(replace_block(DOC.read_text(), name, body))


if __name__ == "__main__":
    main()
