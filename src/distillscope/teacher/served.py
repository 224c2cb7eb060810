"""A served teacher (``model.teacher: http://HOST:PORT/v1``): its top-k scores of a micro-batch.

Each row of a micro-batch goes to the server as its real tokens, the teacher's prompt ⧺ the
completion (no padding), in one request (:class:`~distillscope.teacher.client.TeacherClient`);
the answer's log-probs at the completion positions become the :class:`TeacherTopK` an in-process
teacher reduced to its top k gives: the top-k ids, the folded log-probs (tail = log(1 − Σ top-k),
at least :data:`~distillscope.teacher.client.TAIL_FLOOR`) and the completion's own log-probs. The
server answers at temperature 1, so the loss reads the teacher at 1.0 (config-enforced).
"""

from __future__ import annotations

import math

import torch

from distillscope.config import RunConfig
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_model, load_options
from distillscope.models.vocab import stop_token_ids
from distillscope.rollout.rollouts import Rollouts
from distillscope.rollout.scoring import TeacherTopK
from distillscope.teacher.client import TeacherClient


class ServedTeacher:
    """The teacher behind a server, in the place of a model in :class:`ModelPair`."""

    def __init__(self, client: TeacherClient) -> None:
        self.client = client

    def topk(self, r: Rollouts, k: int, temperature: float) -> TeacherTopK:
        """The teacher's top ``k`` of ``r``'s completion positions, on ``r``'s device."""
        if temperature != 1.0:
            raise ValueError("a served teacher scores at objective.teacher_temperature=1.0 only")
        prompts = _real_rows(r.teacher_prompt_ids_B_Q, r.teacher_prompt_mask_B_Q)
        completions = _real_rows(r.completion_B_T, r.completion_mask_B_T)
        rows = [p + c for p, c in zip(prompts, completions, strict=True)]
        answers = self.client.prompt_logprobs(rows, k)
        B, T = r.completion_B_T.shape
        at: dict[str, list] = {"b": [], "t": [], "ids": [], "top": [], "tail": [], "token": []}
        for b, (prompt, completion, answer) in enumerate(
            zip(prompts, completions, answers, strict=True)
        ):
            first = len(prompt) - 1  # answer index i predicts token i + 1 of the row
            span = range(first, first + len(completion))
            at["b"] += [b] * len(span)
            at["t"] += range(len(span))
            at["ids"] += [answer.ids[i] for i in span]
            at["top"] += [answer.logprobs[i] for i in span]
            at["tail"] += [[answer.tail(i)] for i in span]
            at["token"] += [answer.token_logprobs[i] for i in span]
        index = (torch.tensor(at["b"], dtype=torch.long), torch.tensor(at["t"], dtype=torch.long))
        ids_B_T_K = torch.arange(k).expand(B, T, k).clone()
        folded_B_T_K1 = torch.full((B, T, k + 1), -math.log(k + 1), dtype=torch.float64)
        token_B_T = torch.zeros((B, T), dtype=torch.float64)
        if at["b"]:
            ids_B_T_K[index] = torch.tensor(at["ids"], dtype=torch.long)
            top_N_K1 = torch.cat([torch.tensor(at["top"]), torch.tensor(at["tail"])], dim=-1)
            folded_B_T_K1[index] = top_N_K1.double()
            token_B_T[index] = torch.tensor(at["token"], dtype=torch.float64)
        device = r.completion_mask_B_T.device
        token_B_T = token_B_T.float().to(device)
        return TeacherTopK(
            ids_B_T_K.to(device), folded_B_T_K1.float().to(device), token_B_T, token_B_T.clone()
        )


def _real_rows(ids_B_N: torch.Tensor, mask_B_N: torch.Tensor) -> list[list[int]]:
    """Each row's real tokens (where the mask is 1), in order."""
    return [
        [t for t, m in zip(ids, mask, strict=True) if m]
        for ids, mask in zip(ids_B_N.tolist(), mask_B_N.tolist(), strict=True)
    ]


def served_pair(cfg: RunConfig) -> ModelPair:
    """The student and the served teacher of ``cfg``: the server reached, its tokenizer checked
    against the student's, the student loaded as
    :func:`~distillscope.train.setup.load_models` loads it."""
    m = cfg.model
    student, tokenizer = load_model(resolve_model_path(m.student), **load_options(m))
    client = TeacherClient.from_config(m, vocab_size=len(tokenizer))
    client.check_tokenizer(tokenizer)
    return ModelPair(
        teacher=ServedTeacher(client),
        student=student,
        tokenizer=tokenizer,
        vocab_size=len(tokenizer),
        stop_ids=stop_token_ids((tokenizer,), (student,)),
    )
