"""Per-position profiles (train/profiles.py): the quantities, their bins, the steps they are
written at, resume and the training they must not change."""

from __future__ import annotations

import math

import pytest
import torch
from tests.numerics import chain_tols
from torch.distributions import Categorical, kl_divergence

from distillscope.config import ConfigError, load_run_config
from distillscope.objectives import ChunkSpec
from distillscope.objectives.positions import bin_edges, binned_means
from distillscope.rollout.scoring import HiddenScores, LogitScores
from distillscope.store import PROFILES_FILE, read_metrics, read_profiles
from distillscope.train.loop import distill
from distillscope.train.profiles import profile_tokens

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)


def tiny_cfg(tiny_pair, **over):
    teacher, student = tiny_pair
    items = [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "optim.steps=4",
        "optim.warmup_steps=2",
        "optim.lr=1e-3",
        "rollout.prompts_per_step=4",
        "task.max_new_tokens=8",
        "checkpoint_every=2",
        "eval.profile_prompts=4",
        "eval.profile_bins=3",
    ] + [f"{k}={v}" for k, v in over.items()]
    return load_run_config(None, items)


def strip_timings(rows):
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


def strip_time(rows):
    return [{k: v for k, v in r.items() if k != "time_s"} for r in rows]


def test_forward_kl_is_cross_entropy_minus_teacher_entropy_per_position():
    g = torch.Generator().manual_seed(0)
    vocab, width = 11, 13  # heads padded past the shared vocabulary are sliced off
    s_B_T_V = torch.randn(3, 5, width, generator=g, dtype=torch.float64) * 3
    t_B_T_V = torch.randn(3, 5, width, generator=g, dtype=torch.float64) * 3
    mask_B_T = (torch.arange(5) < torch.tensor([5, 2, 0])[:, None]).long()
    tau_s, tau_t = 1.0, 0.5
    out = profile_tokens(
        LogitScores(s_B_T_V, vocab), LogitScores(t_B_T_V, vocab), mask_B_T, (tau_s, tau_t), 2
    )
    p_s = Categorical(logits=s_B_T_V[..., :vocab] / tau_s)
    p_t = Categorical(logits=t_B_T_V[..., :vocab] / tau_t)
    keep = mask_B_T.bool()
    f, h, ce = out["forward_kl"], out["teacher_entropy"], out["cross_entropy"]
    torch.testing.assert_close(f[keep], kl_divergence(p_t, p_s)[keep].float())
    torch.testing.assert_close(h[keep], p_t.entropy()[keep].float())
    torch.testing.assert_close(out["student_entropy"][keep], p_s.entropy()[keep].float())
    cross = -(p_t.probs * p_s.logits).sum(-1)
    torch.testing.assert_close(ce[keep], cross[keep].float())
    # F = CE − H: two fp32 sums over the vocabulary, of terms up to the largest scaled logit
    scaled = torch.stack([s_B_T_V / tau_s, t_B_T_V / tau_t])[..., :vocab]
    vocab_sums = chain_tols(scaled, 2 * vocab)
    torch.testing.assert_close(f[keep], (ce - h)[keep], **vocab_sums)
    assert (f[keep] >= 0).all() and not out["forward_kl"][~keep].any()  # 0 where masked


def test_hidden_states_and_any_chunk_give_the_logits_values():
    g = torch.Generator().manual_seed(1)
    hidden_s, hidden_t = (torch.randn(2, 4, 6, generator=g) for _ in range(2))
    head_s, head_t = (torch.randn(9, 6, generator=g) for _ in range(2))
    mask_B_T = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    plain = profile_tokens(
        LogitScores(hidden_s @ head_s.T, 8),
        LogitScores(hidden_t @ head_t.T, 8),
        mask_B_T,
        (1.0, 0.5),
        rows=100,
    )
    for rows in (1, 3):
        fused = profile_tokens(
            HiddenScores(hidden_s, head_s, 8, ChunkSpec()),
            HiddenScores(hidden_t, head_t, 8, ChunkSpec()),
            mask_B_T,
            (1.0, 0.5),
            rows=rows,
        )
        # a head matmul (6 terms), then the vocabulary (9), of the largest scaled logit's size
        scaled = torch.stack([hidden_s @ head_s.T, hidden_t @ head_t.T / 0.5])
        for key, value in plain.items():
            torch.testing.assert_close(fused[key], value, **chain_tols(scaled, 6, 9))


def test_bins_of_a_hand_case():
    # V = 2, a uniform teacher: H = ln 2 everywhere. The student is uniform (F = 0, CE = ln 2)
    # except at row 0's position 2 and row 1's position 0, where π_S = (3/4, 1/4).
    skew = [math.log(3.0), 0.0]
    student = torch.zeros(2, 3, 2)
    student[0, 2] = torch.tensor(skew)
    student[1, 0] = torch.tensor(skew)
    mask_B_T = torch.tensor([[1, 1, 1], [1, 0, 0]])
    out = profile_tokens(
        LogitScores(student, 2), LogitScores(torch.zeros(2, 3, 2), 2), mask_B_T, (1.0, 1.0), 4
    )
    ce_skew = -0.5 * (math.log(0.75) + math.log(0.25))
    edges = bin_edges(4, 2)
    assert edges == [0, 2, 4]
    ce = binned_means(out["cross_entropy"], mask_B_T, edges)
    f = binned_means(out["forward_kl"], mask_B_T, edges)
    h = binned_means(out["teacher_entropy"], mask_B_T, edges)
    assert [(b.start, b.stop, b.count) for b in ce] == [(0, 2, 3), (2, 4, 1)]
    assert ce[0].mean == pytest.approx((2 * math.log(2) + ce_skew) / 3, abs=1e-6)
    assert ce[1].mean == pytest.approx(ce_skew, abs=1e-6)
    assert [b.mean for b in h] == pytest.approx([math.log(2)] * 2, abs=1e-6)
    assert f[0].mean == pytest.approx((ce_skew - math.log(2)) / 3, abs=1e-6)
    assert f[1].mean == pytest.approx(ce_skew - math.log(2), abs=1e-6)


def test_profiles_written_at_exactly_the_chosen_steps(tiny_pair, tmp_path):
    cfg = tiny_cfg(tiny_pair, **{"eval.profile_steps": "[4,0,2]"})
    distill(cfg, tmp_path)
    rows = read_profiles(tmp_path)
    assert [r["step"] for r in rows] == [0, 2, 4]  # 4 = optim.steps: after the last update
    for r in rows:
        assert [(b["start"], b["stop"]) for b in r["bins"]] == [(0, 3), (3, 5), (5, 8)]
        assert sum(b["count"] for b in r["bins"]) == r["tokens"] > 0
        for b in r["bins"]:
            if b["count"]:
                gap = b["cross_entropy"] - b["teacher_entropy"]
                assert b["forward_kl"] == pytest.approx(gap, rel=1e-4, abs=1e-5)
                assert b["forward_kl"] >= 0 and b["student_entropy"] >= 0
            else:
                assert math.isnan(b["forward_kl"])
    assert rows[0]["bins"] != rows[-1]["bins"]  # lr 1e-3 moved the student


def test_profiles_change_no_training_metric_and_resume_rewrites_later_rows(tiny_pair, tmp_path):
    plain = tiny_cfg(tiny_pair)
    profiled = tiny_cfg(tiny_pair, **{"eval.profile_steps": "[0,2,3,4]"})
    distill(plain, tmp_path / "plain")
    distill(profiled, tmp_path / "a")
    assert not (tmp_path / "plain" / PROFILES_FILE).exists()  # no profile step: no file
    a = read_metrics(tmp_path / "a")
    assert strip_timings(a) == strip_timings(read_metrics(tmp_path / "plain"))

    # killed after step 2's checkpoint (its profile written), restarted from that checkpoint:
    # the rows before it are kept and the later ones rewritten with the same values
    c = tmp_path / "c"

    def killed_at_step_2(step, row):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        distill(profiled, c, on_step=killed_at_step_2)
    assert [r["step"] for r in read_profiles(c)] == [0, 2]
    with (c / PROFILES_FILE).open("a") as f:
        f.write('{"step": 3, "torn')
    distill(profiled, c)
    assert strip_time(read_profiles(c)) == strip_time(read_profiles(tmp_path / "a"))
    assert strip_timings(read_metrics(c)) == strip_timings(a)


@pytest.mark.parametrize(
    "steps,message",
    [
        ("[0,5]", "eval.profile_steps holds 5, past optim.steps=4"),
        ("[-1]", "eval.profile_steps.0: Input should be greater than or equal to 0"),
    ],
)
def test_a_profile_step_outside_the_run_is_refused(tiny_pair, steps, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as err:
        tiny_cfg(tiny_pair, **{"eval.profile_steps": steps})
    assert "\n" not in str(err.value)
