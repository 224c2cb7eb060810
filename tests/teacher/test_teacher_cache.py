"""Off-policy runs share the teacher's rollouts and its scores of them; losses stay identical."""

import pytest
from tests.train.test_distill import strip_timings, tiny_cfg

from distillscope.rollout.cache import TEACHER_LOGITS_MAX_VOCAB, key_digest
from distillscope.store import read_metrics
from distillscope.teacher.scorer import _rollout_key, _score_form, _score_key
from distillscope.train.loop import distill
from distillscope.train.step import Objective

SHARED = {"rollout.policy": "teacher", "rollout.cache_teacher_rollouts": True, "optim.steps": 2}


@pytest.mark.parametrize("chunk_size", [0, 5])
def test_cached_teacher_scores_give_identical_metrics(tiny_pair, tmp_path, chunk_size):
    cfg = tiny_cfg(
        tiny_pair, **SHARED, **{"optim.grad_accum": 2, "objective.chunk_size": chunk_size}
    )
    cache = tmp_path / "cache"
    distill(cfg, tmp_path / "plain")  # no cache: the teacher runs every step
    distill(cfg, tmp_path / "miss", rollout_cache=cache)
    distill(cfg, tmp_path / "hit", rollout_cache=cache)
    plain, miss, hit = (read_metrics(tmp_path / d) for d in ("plain", "miss", "hit"))
    assert strip_timings(hit) == strip_timings(miss) == strip_timings(plain)  # bit for bit
    assert [r["time/teacher_saved"] for r in miss] == [0.0, 0.0]
    assert all(r["time/teacher_saved"] > 0 for r in hit)
    # per step: rollouts + scores, each with its key and its cost
    assert len(list(cache.glob("*.safetensors"))) == 4
    assert len(list(cache.glob("*.meta.json"))) == 4


def test_a_run_with_another_objective_and_lr_reads_the_same_scores(tiny_pair, tmp_path):
    cache = tmp_path / "cache"
    distill(tiny_cfg(tiny_pair, **SHARED), tmp_path / "a", rollout_cache=cache)
    other = tiny_cfg(tiny_pair, **SHARED, **{"objective.kind": "reverse_kl", "optim.lr": 3e-4})
    distill(other, tmp_path / "b", rollout_cache=cache)
    assert len(list(cache.glob("*.safetensors"))) == 4  # nothing new was written
    assert all(r["time/teacher_saved"] > 0 for r in read_metrics(tmp_path / "b"))


def _teacher_score_form(cfg, vocab_size):
    """What the cache keeps of the teacher's scores: "topk", "hidden", "logits", or None."""
    form = _score_form(Objective.from_config(cfg.objective, vocab_size))
    return None if form is None else form.CACHE_FORM


def _full_key(cfg, vocab_size=54):
    form = _score_form(Objective.from_config(cfg.objective, vocab_size))
    return key_digest({**_rollout_key(cfg, 0, "prompts"), **_score_key(cfg, form, vocab_size)})


@pytest.mark.parametrize(
    "setting,value",
    [
        ("model.teacher_dtype", "bfloat16"),
        ("task.name", "tb-countdown4e"),
        ("task.teacher_style_flag", True),
        ("seed", 7),
        ("rollout.teacher_temperature", 0.7),
        ("rollout.top_p", 0.9),
        ("task.max_new_tokens", 9),
        ("objective.teacher_temperature", 0.7),
        ("optim.grad_accum", 2),
        ("objective.chunk_size", 5),
    ],
)
def test_every_sampling_and_scoring_setting_invalidates(tiny_pair, setting, value):
    base = tiny_cfg(tiny_pair, **SHARED)
    assert _full_key(tiny_cfg(tiny_pair, **SHARED, **{setting: value})) != _full_key(base)


def test_student_settings_and_vocab_size_in_the_key(tiny_pair):
    base = tiny_cfg(tiny_pair, **SHARED)
    same = tiny_cfg(tiny_pair, **SHARED, **{"optim.lr": 3e-4, "objective.kind": "reverse_kl"})
    assert _full_key(same) == _full_key(base)
    assert _full_key(base, vocab_size=55) != _full_key(base)


def test_full_logits_are_cached_only_for_small_vocabularies(tiny_pair):
    auto = tiny_cfg(tiny_pair, **SHARED)
    assert TEACHER_LOGITS_MAX_VOCAB == 4096
    assert _teacher_score_form(auto, 4096) == "logits"
    assert _teacher_score_form(auto, 4097) == "hidden"  # the fused path reads hidden states
    plain = tiny_cfg(tiny_pair, **SHARED, **{"objective.path": "plain"})
    assert _teacher_score_form(plain, 4097) is None
    chunked = tiny_cfg(tiny_pair, **SHARED, **{"objective.chunk_size": 5})
    assert _teacher_score_form(chunked, 128_256) == "hidden"


@pytest.mark.parametrize("chunk_size", [0, 5])
def test_a_top_k_teacher_is_cached_and_gives_identical_metrics(tiny_pair, tmp_path, chunk_size):
    over = {"optim.grad_accum": 2, "objective.chunk_size": chunk_size, "objective.teacher_topk": 4}
    cfg = tiny_cfg(tiny_pair, **SHARED, **over)
    assert _teacher_score_form(cfg, 54) == _teacher_score_form(cfg, 151_936) == "topk"
    cache = tmp_path / "cache"
    distill(cfg, tmp_path / "plain")
    distill(cfg, tmp_path / "miss", rollout_cache=cache)
    distill(cfg, tmp_path / "hit", rollout_cache=cache)
    plain, miss, hit = (read_metrics(tmp_path / d) for d in ("plain", "miss", "hit"))
    assert strip_timings(hit) == strip_timings(miss) == strip_timings(plain)
    assert all(r["time/teacher_saved"] > 0 for r in hit)
    assert all(0 < r["objective/teacher_topk_mass"] <= 1 for r in plain)
    full = _full_key(tiny_cfg(tiny_pair, **SHARED, **{**over, "objective.teacher_topk": 0}))
    assert _full_key(cfg) != full
    assert _full_key(tiny_cfg(tiny_pair, **SHARED, **{**over, "objective.teacher_topk": 5})) != (
        _full_key(cfg)
    )


@pytest.mark.parametrize("chunk_size", [0, 5])
@pytest.mark.parametrize("kind", ["forward_kl", "reverse_kl", "jsd"])
def test_a_top_k_of_v_minus_1_is_the_full_objective(tiny_pair, tmp_path, kind, chunk_size):
    """With one token left for the tail bin, folding loses nothing: same loss, same gradient."""
    vocab = 54  # the tiny pair's tokenizer (the testbed's)
    over = {"objective.kind": kind, "objective.chunk_size": chunk_size, "optim.steps": 1}
    full = tiny_cfg(tiny_pair, **over)
    top = tiny_cfg(tiny_pair, **over, **{"objective.teacher_topk": vocab - 1})
    distill(full, tmp_path / "full")
    distill(top, tmp_path / "top")
    (a,), (b,) = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "top")
    for key in ("train/loss", "train/grad_norm", "kl/k1"):
        assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


def test_a_top_k_beyond_the_vocabulary_is_refused_before_training(tiny_pair, tmp_path):
    cfg = tiny_cfg(tiny_pair, **{"objective.teacher_topk": 54})
    with pytest.raises(ValueError, match="objective.teacher_topk"):
        distill(cfg, tmp_path / "run")
