"""``samples.jsonl``: what the student wrote, for the first items of every evaluation block.

One JSON object a line — ``block`` (accuracy, coverage, harder, harder_coverage, skill/NAME),
``item``, ``sample``, ``prompt`` (the text the student read), ``completion``, ``score`` — so a
user can read the student's answers next to the numbers of ``eval.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from distillscope.eval.generate import Samples
from distillscope.rollout.prompts import PromptEncoder
from distillscope.store import atomic_write_text
from distillscope.tasks import Problem, Task

SAMPLES_FILE = "samples.jsonl"


class SampleLog:
    """Keeps every sample of the first ``per_block`` items of each block; ``write`` saves them."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, prompt_format: str, per_block: int):
        self.tokenizer = tokenizer
        self.prompt_format = prompt_format
        self.per_block = per_block
        self.records: list[dict] = []

    def add(self, block: str, task: Task, problems: list[Problem], samples: Samples) -> None:
        """Record the first ``per_block`` problems of ``block`` with all their samples."""
        kept = problems[: self.per_block]
        if not kept:
            return
        prompts = PromptEncoder(task, self.tokenizer, self.prompt_format).texts(kept, "student")
        for i, prompt in enumerate(prompts):
            for j, (text, score) in enumerate(
                zip(samples.texts[i], samples.scores[i], strict=True)
            ):
                self.records.append(
                    {
                        "block": block,
                        "item": i,
                        "sample": j,
                        "prompt": prompt,
                        "completion": text,
                        "score": score,
                    }
                )

    def write(self, run_dir: Path) -> Path:
        """Write ``run_dir/samples.jsonl`` atomically (empty when ``per_block`` is 0)."""
        path = run_dir / SAMPLES_FILE
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)
        atomic_write_text(path, text)
        return path
