"""Cross-tokenizer runs end to end (teacher/cross_tokenizer.py): a tiny student with the testbed's
character tokenizer learns from a tiny teacher with a BPE tokenizer, on-policy and off-policy;
with one shared tokenizer the token-aligned kind is the exact objective; the refusal of a
mismatch names the opt-in."""

from __future__ import annotations

import math

import pytest
import torch
from tests.conftest import save_tiny_llama
from tests.numerics import reorder_tol
from tests.objectives.test_token_alignment import arithmetic_bpe
from tests.train.test_distill import tiny_cfg

from distillscope.config import ConfigError, load_run_config
from distillscope.metric_keys import metric_info
from distillscope.models.tokenizer_files import CROSS_TOKENIZER_OPT_IN, TokenizerMismatchError
from distillscope.objectives.registry import CROSS_TOKENIZER_KINDS
from distillscope.objectives.token_alignment import align_spans
from distillscope.rollout.policy_registry import ROLLOUT_POLICIES
from distillscope.rollout.prompts import select_problems
from distillscope.rollout.rollouts import MicroBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.store import read_metrics
from distillscope.tasks import resolve_task, training_problems
from distillscope.teacher.checks import preflight_pair
from distillscope.teacher.cross_tokenizer import (
    CrossTokenizerPrompts,
    CrossTokenizerTeacher,
    load_cross_tokenizer_pair,
    retokenise,
    with_completions,
)
from distillscope.teacher.kinds import open_teacher
from distillscope.train.loop import distill
from distillscope.train.step import Objective

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)


@pytest.fixture(scope="module")
def bpe_pair(tmp_path_factory):
    """(teacher_dir, student_dir): a tiny Llama teacher with the 320-token arithmetic BPE, a
    tiny testbed-shaped student with the character tokenizer."""
    root = tmp_path_factory.mktemp("bpe-pair")
    teacher = save_tiny_llama(root / "teacher", hidden=32, layers=2, seed=1, tok=arithmetic_bpe())
    return teacher, save_tiny_llama(root / "student", hidden=16, layers=1, seed=2)


def run_cfg(pair, **over):
    """The tiny run of test_distill, two steps."""
    return tiny_cfg(pair, **{"optim.steps": 2, "optim.warmup_steps": 1, **over})


@pytest.mark.parametrize(
    ("policy", "kind", "diagnostic"),
    [("student", "uld", "kl/k1"), ("teacher", "aligned_forward_kl", "kl/forward_k1")],
)
def test_a_bpe_teacher_trains_a_character_student(bpe_pair, tmp_path, policy, kind, diagnostic):
    cfg = run_cfg(bpe_pair, **{"rollout.policy": policy, "objective.kind": kind})
    preflight_pair(cfg)  # the opt-in: another tokenizer is accepted
    distill(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert not [k for k in r if k != "step" and metric_info(k) is None]  # all registered
        assert r["train/grad_norm"] > 0 and math.isfinite(r["train/loss"])
        assert 0 < r["objective/uld_distance"] <= 2  # two distributions: at most 2
        # some character tokens are BPE tokens of the same span, some are inside longer ones
        assert 0 < r["objective/aligned_exact_share"] < 1
        assert math.isfinite(r[diagnostic])
    if kind == "uld":  # the loss is the distance (a seq_mean of the token values)
        assert rows[0]["train/loss"] <= 2


def test_one_shared_tokenizer_makes_the_aligned_kind_the_exact_objective(tiny_pair, tmp_path):
    exact = run_cfg(tiny_pair, **{"objective.kind": "forward_kl"})
    aligned = run_cfg(tiny_pair, **{"objective.kind": "aligned_forward_kl"})
    distill(exact, tmp_path / "exact")
    distill(aligned, tmp_path / "aligned")
    a, b = read_metrics(tmp_path / "exact")[0], read_metrics(tmp_path / "aligned")[0]
    assert b["objective/aligned_exact_share"] == 1.0
    # the same rollouts (step 0), the same loss and gradient up to the renormalisation's
    # logsumexp over the 45-token vocabulary and a different summation order
    for key in ("train/loss", "train/grad_norm", "kl/k1", "rollout/len_mean"):
        assert abs(a[key] - b[key]) <= reorder_tol(max(abs(a[key]), 1.0), 45 * 64), key


@pytest.mark.parametrize("kind", CROSS_TOKENIZER_KINDS)
def test_the_fused_path_and_micro_batches_give_the_plain_step(bpe_pair, tmp_path, kind):
    rows = {}
    for name, over in (
        ("plain", {"objective.path": "plain"}),
        ("fused", {"objective.path": "fused", "objective.chunk_size": 4}),
        ("accumulated", {"objective.path": "plain", "optim.grad_accum": 3}),
    ):
        cfg = run_cfg(bpe_pair, **{"objective.kind": kind, "optim.steps": 1, **over})
        distill(cfg, tmp_path / name)
        rows[name] = read_metrics(tmp_path / name)[0]
    plain = rows["plain"]
    for name in ("fused", "accumulated"):
        for key in ("train/loss", "train/grad_norm", "objective/aligned_exact_share", "kl/k1"):
            tol = reorder_tol(max(abs(plain[key]), 1.0), 320 * 64)
            assert abs(rows[name][key] - plain[key]) <= tol, (name, key)


def test_the_aligned_scores_are_the_teachers_own_forward(bpe_pair):
    """Against one unbatched teacher forward per row on its own prompt ⧺ re-tokenised text: the
    logits at each student position are those at its aligned teacher position j(t), and a row's
    diagnostic log-probs sum to the teacher's log-likelihood of the text."""
    cfg = run_cfg(bpe_pair, **{"objective.kind": "aligned_forward_kl"})
    pair = load_cross_tokenizer_pair(cfg)
    objective = Objective.from_config(cfg.objective, pair.vocab_size)
    task = resolve_task(cfg.task)
    teacher = open_teacher(cfg, pair, objective)  # the loop's constructor
    assert isinstance(teacher, CrossTokenizerTeacher)
    assert teacher.prompt_encoder is CrossTokenizerPrompts
    encoder = teacher.prompt_encoder.of_run(task, cfg.task, pair)
    prompts = encoder.batch(select_problems(training_problems(task), 4, cfg.seed, 0), "cpu")
    eos, chars = pair.tokenizer.eos_token_id, pair.tokenizer
    texts = [("12+3=15", True), ("7*8=56", False), ("12 + 3 = 15", True), ("29+9=38", True)]
    rows = [chars(t, add_special_tokens=False)["input_ids"] + [eos] * e for t, e in texts]
    template = sample_rollouts(  # the prompts, row sources and shapes the loop gives
        ROLLOUT_POLICIES["student"].make(cfg.rollout),
        pair.student,
        None,
        prompts,
        SamplingSpec(1, pair.stop_ids, chars.pad_token_id, pair.vocab_size),
        torch.Generator().manual_seed(0),
    )
    r = with_completions(template, rows, chars.pad_token_id, "student")
    aligned = teacher.score(MicroBatch(torch.arange(r.batch_size), r))
    assert aligned.exact_B_T[0, :8].tolist() == [False, False, True, True, True, False, False, True]
    for b, (ids, (_, ended)) in enumerate(zip(rows, texts, strict=True)):
        done = retokenise(ids, ended, chars, pair.teacher_tokenizer)
        prompt = r.teacher_prompt_ids_B_Q[b][r.teacher_prompt_mask_B_Q[b].bool()].tolist()
        with torch.no_grad():
            logits_S_W = pair.teacher(torch.tensor([prompt + done.ids])).logits[0]
        logits_U_W = logits_S_W[len(prompt) - 1 : -1]  # row u predicts teacher token u
        logp_U = logits_U_W.log_softmax(-1).gather(-1, torch.tensor(done.ids)[:, None])
        want = float(logp_U.sum())
        assert abs(float(aligned.token_t1_B_T[b].sum()) - want) <= reorder_tol(abs(want), 320)
        where = align_spans(done.spans_from, done.spans_to).teacher_position
        torch.testing.assert_close(
            aligned.logits_B_T_W[b, : len(ids)], logits_U_W[where], rtol=0, atol=1e-5
        )


def test_a_mismatch_is_refused_in_one_line_that_names_the_opt_in(bpe_pair):
    with pytest.raises(TokenizerMismatchError) as err:
        preflight_pair(run_cfg(bpe_pair))
    text = str(err.value)
    assert "\n" not in text and CROSS_TOKENIZER_OPT_IN in text
    assert CROSS_TOKENIZER_OPT_IN.split("=")[1].split(" | ") == list(CROSS_TOKENIZER_KINDS)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"rollout.policy": "mix"}, "takes rollout.policy=student or teacher"),
        ({"eval.profile_steps": "[0]"}, "takes no eval.profile_steps"),
        ({"rollout.cache_teacher_rollouts": "true", "rollout.policy": "teacher"}, "engine"),
    ],
)
def test_a_cross_tokenizer_run_of_another_shape_is_refused(bpe_pair, over, message):
    cfg = run_cfg(bpe_pair, **{"objective.kind": "uld", **over})
    with pytest.raises(ConfigError, match=message):
        preflight_pair(cfg)


def test_a_cross_tokenizer_run_with_routed_teachers_is_refused(bpe_pair):
    teacher, student = (str(p) for p in bpe_pair)
    cfg = load_run_config(
        None,
        [
            f"model.student={student}",
            f"model.teachers={{a: '{teacher}', b: '{teacher}'}}",
            "model.route={by: mixture, weights: {a: 1, b: 1}}",
            "objective.kind=aligned_forward_kl",
        ],
    )
    with pytest.raises(ConfigError, match="reads the one model.teacher, not model.teachers"):
        preflight_pair(cfg)
