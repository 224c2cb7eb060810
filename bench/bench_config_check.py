"""How long a bad input takes to be refused: ``distillscope train BAD`` against importing torch.

    python bench/bench_config_check.py

Each case is a fresh ``distillscope train`` process (the console script's own interpreter)
whose config or override is wrong in one way; the bench times it (median of :data:`REPEATS`;
wall clock, and the CPU seconds the process used, which a shared machine inflates less),
asserts it exits 2 with one ``error:`` line and writes nothing, and reports whether torch was
imported by the time it exited (an ``atexit`` hook of the process reads ``sys.modules``). The
reference row is ``python -c "import torch"``: what every bad input cost when torch was
imported before the config was validated. Prints a Markdown table.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 5
#: The process: the CLI's entry point, with a hook that reports torch on exit.
PROGRAM = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('torch' in sys.modules, file=sys.stderr))\n"
    "from distillscope.cli import main\n"
    "sys.argv = ['distillscope', *sys.argv[1:]]\n"
    "main()\n"
)


def cases(root: Path) -> dict[str, list[str]]:
    """``description → train arguments`` of each bad input (``root``: a scratch directory)."""
    bad = root / "bad.yaml"
    bad.write_text("optim:\n  stepz: 3\n")
    return {
        "a misspelt field in the config file (stepz for steps)": [str(bad)],
        "a value out of range (`optim.lr=-1`)": ["optim.lr=-1"],
        "an unknown task (`task.name=nosuch`)": ["task.name=nosuch"],
        "a missing task file (`task.file=/nonexistent.jsonl`)": [
            "task.name=mcq",
            "task.file=/nonexistent.jsonl",
        ],
    }


def run(command: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """``(wall s, CPU s, process)`` of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, proc


def timed(args: list[str], out: Path) -> tuple[float, float, bool]:
    """Wall and CPU seconds of one refused ``train`` and whether torch was imported."""
    wall, cpu, proc = run([sys.executable, "-c", PROGRAM, "train", *args, "--out", str(out)])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert not out.exists(), f"{out} was written"
    return wall, cpu, proc.stderr.strip().splitlines()[-1] == "True"


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for what, args in cases(root).items():
            runs = [timed(args, root / "run") for _ in range(REPEATS)]
            torch = "yes" if any(t for *_, t in runs) else "no"
            rows.append((what, *(statistics.median(r[i] for r in runs) for i in (0, 1)), torch))
        torch_runs = [run([sys.executable, "-c", "import torch"]) for _ in range(REPEATS)]
        medians = (statistics.median(r[i] for r in torch_runs) for i in (0, 1))
        rows.append(('reference: `python -c "import torch"`', *medians, "yes"))
    print("| bad input to `distillscope train` | refused after (wall s) | CPU s | torch imported |")
    print("|---|---|---|---|")
    for what, wall, cpu, torch in rows:
        print(f"| {what} | {wall:.2f} | {cpu:.2f} | {torch} |")


if __name__ == "__main__":
    main()
