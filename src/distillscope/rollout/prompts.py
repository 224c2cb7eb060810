"""Prompts for training and evaluation: seeded selection and tokenisation for either model.

Selection follows docs/method.md §10: prompts of a step are drawn without replacement within the
step and with replacement across steps, from a stream seeded by ``(seed, step)`` — so a resumed run
draws exactly what an uninterrupted one would have. Every random draw of a run comes from one of
the named streams below, seeded by ``(seed, step, stream)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from distillscope.rollout.rollouts import PromptBatch
from distillscope.tasks.base import Problem, Task, styled

#: The Python RNG stream of a step's prompts (:func:`select_problems`, :func:`step_rng`).
PROMPT_STREAM = 0


class Stream(IntEnum):
    """The named streams of the torch generators (:func:`step_generator`), fixed values.

    A draw of step k comes from ``(seed, k, stream)``; changing a value would change every draw
    of its stream. Evaluation draws at step 0, on streams apart from training's.
    """

    ROLLOUT = 0  # the sampler: the step's rollouts
    ESTIMATOR = 1  # the sampled estimators: one uniform per completion position
    PROFILE = 2  # per-position profiles: the probe prompts and their fresh student rollouts
    RLVR_PROMPTS = 20  # an RLVR run's prompts of step k (its pool is another task's)
    RLVR_ROLLOUT = 21  # an RLVR run's G completions per prompt
    EVAL_ACCURACY = 10_000  # held-out accuracy, one sample per item
    EVAL_COVERAGE = 10_001  # pass@k samples
    EVAL_HARDER = 10_002  # the harder task's accuracy
    EVAL_HARDER_COVERAGE = 10_003  # the harder task's pass@k samples
    EVAL_SKILLS = 10_004  # the skill suite, before and after training
    EVAL_STYLE_SUPPORT = 10_005  # the untrained student's style share at T = 1 (a baseline's)


def step_rng(seed: int, step: int, stream: int = PROMPT_STREAM) -> random.Random:
    """An independent Python RNG for one (seed, step, stream) — no state carried across steps."""
    return random.Random(f"{seed}/{step}/{int(stream)}")


def step_generator(
    seed: int, step: int, stream: int = Stream.ROLLOUT, device: torch.device | str = "cpu"
) -> torch.Generator:
    """An independent torch generator for one (seed, step, stream), living on ``device``.

    Sampling draws on the device of the logits they sample from, so the generator must live on
    the model's device (``model_generator``). The same seed gives the same draws on CPU; a CUDA
    generator's stream differs from the CPU one (docs/real-models.md, "Determinism").
    """
    mixed = (seed * 1_000_003 + step * 9_176 + int(stream) * 7_919) % (2**63 - 1)
    return torch.Generator(device=torch.device(device)).manual_seed(mixed)


def model_generator(model: torch.nn.Module, seed: int, step: int, stream: int = Stream.ROLLOUT):
    """``step_generator`` on the device of ``model``'s parameters."""
    return step_generator(seed, step, stream, device=next(model.parameters()).device)


def select_problems(pool: list[Problem], n: int, seed: int, step: int) -> list[Problem]:
    """``n`` distinct problems of ``pool`` for this step (with replacement across steps)."""
    if n > len(pool):
        raise ValueError(f"rollout.prompts_per_step={n} exceeds the {len(pool)} training problems")
    return step_rng(seed, step).sample(pool, n)


def instructed(messages: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """``messages`` with ``instruction`` for the teacher alone: appended to the system message
    (after a blank line) when the first message is one, else a system message of its own before
    the others. [P] conditions the teacher's prompt to reason in Spanish (docs/method.md §8)."""
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


@dataclass
class PromptEncoder:
    """Turns problems into left-padded token batches for the student and the teacher.

    ``prompt_format="testbed"`` uses the compact prompt with ``<bos>``; ``"chat"`` renders the
    task's chat messages with each model's own chat template (``teacher_tokenizer``'s for the
    teacher when given: an Instruct teacher and a base student may differ). With
    ``teacher_style_flag`` the teacher reads the style-flagged prompt and the student the plain
    one; with ``teacher_instruction`` (chat only) the teacher's messages carry that text in their
    system message (:func:`instructed`). Both tokenizers share one vocabulary, so the ids of
    either are valid for both models.
    """

    task: Task
    tokenizer: PreTrainedTokenizerBase
    prompt_format: str = "testbed"
    teacher_style_flag: bool = False
    teacher_tokenizer: PreTrainedTokenizerBase | None = None
    teacher_instruction: str | None = None

    @classmethod
    def of_run(cls, task: Task, task_config: Any, pair: Any) -> PromptEncoder:
        """The encoder a run's ``task`` section (a ``TaskConfig``: prompt format, style flag,
        teacher instruction) asks for, over the tokenizers of its model pair (a ``ModelPair``)."""
        return cls(
            task,
            pair.tokenizer,
            task_config.prompt_format,
            task_config.teacher_style_flag,
            teacher_tokenizer=pair.teacher_tokenizer,
            teacher_instruction=task_config.teacher_instruction,
        )

    def __post_init__(self) -> None:
        if self.teacher_instruction and self.prompt_format != "chat":
            raise ValueError(
                "a teacher instruction needs the chat prompt format (testbed models read the "
                "glyph flag: use teacher_style_flag)"
            )

    @property
    def teacher_prompt_differs(self) -> bool:
        """True when the teacher reads its own prompt (style flag, an instruction, or another
        chat template)."""
        if self.teacher_style_flag or self.teacher_instruction:
            return True
        if self.prompt_format != "chat" or self.teacher_tokenizer is None:
            return False
        return self.teacher_tokenizer.chat_template != self.tokenizer.chat_template

    def _tokenizer(self, role: str) -> PreTrainedTokenizerBase:
        if role == "teacher" and self.teacher_tokenizer is not None:
            return self.teacher_tokenizer
        return self.tokenizer

    def texts(self, problems: list[Problem], role: str) -> list[str]:
        flag = role == "teacher" and self.teacher_style_flag
        if self.prompt_format == "testbed":
            return [styled(p.prompt) if flag else p.prompt for p in problems]
        tokenizer = self._tokenizer(role)
        out = []
        for p in problems:
            msgs = self.task.chat_messages(p)
            if flag:
                msgs = [*msgs[:-1], {**msgs[-1], "content": styled(msgs[-1]["content"])}]
            if role == "teacher" and self.teacher_instruction:
                msgs = instructed(msgs, self.teacher_instruction)
            out.append(
                tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            )
        return out

    def encode(
        self, problems: list[Problem], role: str = "student"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids_B_P, mask_B_P), left padded, encoded by ``role``'s own tokenizer (pads masked)."""
        tokenizer = self._tokenizer(role)
        tokenizer.padding_side = "left"
        texts = self.texts(problems, role)
        special = self.prompt_format == "testbed"  # chat templates carry their own BOS
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=special)
        return enc["input_ids"], enc["attention_mask"]

    def batch(self, problems: list[Problem], device: str) -> PromptBatch:
        """The prompts on the student's device: the student's, and the teacher's own when it
        reads another (style flag, another chat template). The sampler moves the teacher's
        inputs to the teacher's device and its logits back."""
        ids_B_P, mask_B_P = (t.to(device) for t in self.encode(problems, "student"))
        if not self.teacher_prompt_differs:
            return PromptBatch(ids_B_P, mask_B_P)
        teacher_ids_B_Q, teacher_mask_B_Q = (t.to(device) for t in self.encode(problems, "teacher"))
        return PromptBatch(ids_B_P, mask_B_P, teacher_ids_B_Q, teacher_mask_B_Q)
