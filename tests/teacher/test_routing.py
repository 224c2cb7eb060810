"""Several teachers in one run (teacher/routed.py): each row's rollouts and scores come from its
routed teacher; identical teachers give the one-teacher run bit for bit; a served teacher works
inside a mixture."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch
from tests.conftest import served_teacher
from tests.train.conftest import random_rollouts
from tests.train.test_distill import strip_timings
from tests.train.test_teacher_cache_built import RUN as CACHED_RUN

from distillscope.config import load_run_config
from distillscope.eval.evaluate import evaluate
from distillscope.models.load import load_model
from distillscope.rollout.rollouts import micro_batches
from distillscope.rollout.scoring import TeacherTopK
from distillscope.store import read_metrics
from distillscope.tasks import resolve_task
from distillscope.tasks.pools import evaluation_problems
from distillscope.teacher.routed import RoutedStep, RoutedTeachers, routed_rollouts, routed_scores
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.cache_build import build_teacher_cache
from distillscope.train.loop import distill
from distillscope.train.step import Objective

V = 54  # the testbed vocabulary
MIXTURE = "model.route={by: mixture, weights: {a: 1, b: 1}}"


def _items(student, **over) -> list[str]:
    return [
        f"model.student={student}",
        "optim.steps=2",
        "optim.warmup_steps=1",
        "optim.lr=1e-3",
        "rollout.prompts_per_step=4",
        "rollout.rollouts_per_prompt=2",
        "task.max_new_tokens=8",
        "checkpoint_every=2",
    ] + [f"{k}={v}" for k, v in over.items()]


def _routed(student, a, b, **over):
    teachers = f"model.teachers={{a: '{a}', b: '{b}'}}"
    return load_run_config(None, [*_items(student, **over), teachers, MIXTURE])


def _own(rows: list[dict]) -> list[dict]:
    """The rows without timings and the per-teacher keys (which a one-teacher run lacks)."""
    return [{k: v for k, v in r.items() if not k.startswith("teacher/")} for r in rows]


@pytest.mark.parametrize(
    "over",
    [
        {"rollout.policy": "teacher", "optim.grad_accum": 2, "objective.reduction": "sum"},
        {"rollout.policy": "spectrum", "rollout.lam": 0.5, "objective.kind": "jsd"},
        {"rollout.policy": "student", "objective.kind": "opd", "objective.updates_per_batch": 2},
        {"rollout.policy": "mix", "objective.teacher_topk": 4},
    ],
)
def test_two_identical_teachers_give_the_one_teacher_run_bit_for_bit(tiny_pair, tmp_path, over):
    teacher, student = tiny_pair
    one = load_run_config(None, [*_items(student, **over), f"model.teacher={teacher}"])
    s1 = distill(one, tmp_path / "one")
    s2 = distill(_routed(student, teacher, teacher, **over), tmp_path / "two")
    plain, routed = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "two")
    assert _own(strip_timings(routed)) == strip_timings(plain)
    for p1, p2 in zip(s1.parameters(), s2.parameters(), strict=True):
        assert torch.equal(p1, p2)
    for row in routed:
        shares = [row.get(f"teacher/{n}/share", 0.0) for n in "ab"]
        assert sum(shares) == 1.0
        assert all(row[f"teacher/{n}/seconds"] > 0 for n in "ab" if f"teacher/{n}/share" in row)
        if over.get("objective.reduction") == "sum":  # the teachers' losses add up to the loss
            parts = sum(row.get(f"teacher/{n}/loss", 0.0) for n in "ab")
            assert parts == pytest.approx(row["train/loss"], rel=1e-6)


@pytest.fixture(scope="module")
def two_teachers(tiny_pair):
    """The tiny teacher and, as a second teacher, the tiny student (same tokenizer)."""
    return [load_model(p)[0].requires_grad_(False) for p in tiny_pair]


@pytest.mark.parametrize("topk", [0, 3])
def test_each_row_is_scored_by_its_own_teacher(tiny_pair, two_teachers, topk):
    cfg = _routed(tiny_pair[1], *tiny_pair, **{"objective.teacher_topk": topk})
    objective = Objective.from_config(cfg.objective, V)
    scorers = {n: TeacherScorer(cfg, m, objective) for n, m in zip("ab", two_teachers, strict=True)}
    route = ["a", "b", "b", "a", "b", "a"]
    rollouts = random_rollouts(6, V, seed=3, width=6)
    micro = micro_batches(rollouts, 2)
    merged, saved_s = RoutedStep(RoutedTeachers(cfg, scorers, 0), route).scores(0, None, micro)
    assert saved_s == 0.0
    for m, scores in zip(micro, merged, strict=True):
        own = {n: scorers[n].score(m) for n in "ab"}
        names = ("ids_B_T_K", "folded_B_T_K1", "token_t1_B_T") if topk else ("logits_B_T_V",)
        for i, b in enumerate(m.index_b.tolist()):
            for name in names:
                assert torch.equal(getattr(scores, name)[i], getattr(own[route[b]], name)[i])
        assert not torch.equal(*(getattr(own[n], names[-1]) for n in "ab"))


def test_routed_rollouts_keep_each_row_of_its_teacher_padded_to_the_widest():
    a = random_rollouts(4, V, seed=1, width=3)
    b = random_rollouts(4, V, seed=2, width=5)
    out = routed_rollouts({"a": a, "b": b}, ["b", "a", "a", "b"], pad_id=7)
    assert out.completion_B_T.shape == (4, 5)
    for row, (src, width) in enumerate([(b, 5), (a, 3), (a, 3), (b, 5)]):
        assert torch.equal(out.completion_B_T[row, :width], src.completion_B_T[row])
        assert torch.equal(out.completion_mask_B_T[row, :width], src.completion_mask_B_T[row])
        assert out.completion_B_T[row, width:].eq(7).all()
        assert out.completion_mask_B_T[row, width:].eq(0).all()
        assert out.lengths_B[row] == src.lengths_B[row]
    assert out.prompt_ids_B_P is a.prompt_ids_B_P  # the prompts are every teacher's
    assert routed_rollouts({"a": a}, ["a"] * 4, pad_id=7) is a


def test_a_served_teacher_inside_a_mixture(tiny_pair, tmp_path):
    """A live and a served copy of one teacher: the mixture's loss is the live run's up to
    the server's float rounding (its top k as in tests/teacher/test_served_teacher.py)."""
    teacher, student = tiny_pair
    over = {"objective.teacher_topk": 4, "objective.teacher_temperature": 1.0}
    one = load_run_config(None, [*_items(student, **over), f"model.teacher={teacher}"])
    distill(one, tmp_path / "live")
    with served_teacher(teacher, topk_max=8) as url:
        distill(_routed(student, teacher, url, **over), tmp_path / "mixed")
    live, mixed = read_metrics(tmp_path / "live")[0], read_metrics(tmp_path / "mixed")[0]
    assert mixed["train/loss"] == pytest.approx(live["train/loss"], rel=1e-5, abs=1e-6)
    assert 0 < mixed["teacher/b/share"] < 1 and mixed["teacher/b/seconds"] > 0  # served rows
    assert mixed["teacher/a/share"] + mixed["teacher/b/share"] == 1.0
    assert all(math.isfinite(mixed[f"teacher/{n}/loss"]) for n in "ab")


def test_a_column_route_trains_each_row_with_its_teacher_and_evaluates_per_teacher(
    tiny_pair, tmp_path
):
    teacher, student = tiny_pair
    rows = [
        {
            "question": f"q{i}",
            "options": ["x", "y"],
            "answer": "AB"[i % 2],
            "teacher": "ab"[i % 3 > 0],
        }
        for i in range(40)
    ]
    task = tmp_path / "routed.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = [
        *_items(student, **{"rollout.policy": "teacher"}),
        f"model.teachers={{a: '{teacher}', b: '{student}'}}",
        "model.route={by: column}",
        "task.name=mcq",
        f"task.file={task}",
        "task.prompt_format=testbed",
        "eval.items=8",
        "eval.coverage_items=0",
        "eval.skill_items=0",
    ]
    cfg = load_run_config(None, items)
    out = evaluate(cfg, tmp_path / "run", distill(cfg, tmp_path / "run"))
    first = read_metrics(tmp_path / "run")[0]
    routed = [n for n in "ab" if f"teacher/{n}/share" in first]
    assert routed and all(math.isfinite(first[f"teacher/{n}/loss"]) for n in routed)
    e = cfg.eval
    held = evaluation_problems(resolve_task(cfg.task), e.eval_seed, e.items, cfg.task.eval_fraction)
    counts = Counter(p.meta["extra"]["teacher"] for p in held)
    assert {k.split("/")[2] for k in out if k.startswith("eval/teacher/")} == set(counts)
    # the items' accuracies, weighted by their teachers' item counts, make up eval/accuracy
    mean = sum(out[f"eval/teacher/{n}/accuracy"] * c for n, c in counts.items()) / e.items
    assert mean == pytest.approx(out["eval/accuracy"], abs=1e-12)


def test_a_cached_teacher_inside_a_mixture_gives_the_live_run(tmp_path):
    """A teacher cache of the testbed teacher routed beside the live testbed teacher: every row
    reads the same bits as in the live one-teacher top-k run (tests/train/
    test_teacher_cache_built.py: a cache replays them exactly)."""
    run = CACHED_RUN  # the built-cache tests' two steps of OffPD with a top-4 teacher
    built = tmp_path / "cache"
    build_teacher_cache([load_run_config(None, run)], built, "test")
    distill(load_run_config(None, run), tmp_path / "live")
    teachers = f"model.teachers={{live: testbed:teacher, cached: '{built}'}}"
    mixture = "model.route={by: mixture, weights: {live: 1, cached: 1}}"
    distill(load_run_config(None, [*run, teachers, mixture]), tmp_path / "mixed")
    live, mixed = read_metrics(tmp_path / "live"), read_metrics(tmp_path / "mixed")
    assert _own(strip_timings(mixed)) == strip_timings(live)
    assert any(0 < r.get("teacher/cached/share", 0) < 1 for r in mixed)  # both teachers read


def test_routed_top_k_scores_pad_a_narrower_cached_batch():
    g = torch.Generator().manual_seed(0)

    def topk(width: int) -> TeacherTopK:
        folded = torch.randn(2, width, 5, generator=g).log_softmax(-1)
        ids = torch.randint(0, V, (2, width, 4), generator=g)
        token = torch.randn(2, width, generator=g)
        return TeacherTopK(ids, folded, token, token.clone())

    narrow, wide = topk(3), topk(5)
    out = routed_scores({"cached": narrow, "live": wide}, ["cached", "live"])
    assert out.ids_B_T_K.shape == (2, 5, 4) and out.folded_B_T_K1.shape == (2, 5, 5)
    assert torch.equal(out.folded_B_T_K1[0, :3], narrow.folded_B_T_K1[0])
    assert torch.equal(out.folded_B_T_K1[1], wide.folded_B_T_K1[1])
    # past the cached batch's completion: masked positions, a finite uniform fold
    assert torch.allclose(out.folded_B_T_K1[0, 3:].exp().sum(-1), torch.ones(2))
    assert out.ids_B_T_K[0, 3:].eq(0).all() and out.token_t1_B_T[0, 3:].eq(0).all()


def test_a_routed_run_leaves_the_shared_cache_true_to_each_teacher(tiny_pair, tmp_path):
    """A routed run's teacher scores are of mixed batches: it stores rollouts only, so a
    one-teacher run reading the same cache afterwards gets its own run's numbers."""
    teacher, student = tiny_pair
    over = {"rollout.policy": "teacher", "rollout.cache_teacher_rollouts": True}
    cache = tmp_path / "cache"
    distill(_routed(student, teacher, student, **over), tmp_path / "routed", rollout_cache=cache)
    one = load_run_config(None, [*_items(student, **over), f"model.teacher={teacher}"])
    distill(one, tmp_path / "after", rollout_cache=cache)
    distill(one, tmp_path / "alone")
    after, alone = read_metrics(tmp_path / "after"), read_metrics(tmp_path / "alone")
    assert strip_timings(after) == strip_timings(alone)
