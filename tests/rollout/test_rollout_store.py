"""Rollouts layout, save/load, the teacher-rollout cache and the per-batch diagnostics."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
import torch

from distillscope.rollout.cache import RolloutCache, canonical_json, prompt_digest
from distillscope.rollout.diagnostics import likelihood_metrics, rollout_length_metrics
from distillscope.rollout.rollouts import Rollouts


def _rollouts(shared_teacher_prompt: bool = False, with_student_logp: bool = True) -> Rollouts:
    """Three rows: EOS (id 2) after 2 tokens, after 4 tokens, and truncated at 4."""
    prompt_ids = torch.tensor([[0, 1, 7, 8], [1, 9, 9, 9], [0, 0, 1, 5]])
    prompt_mask = (prompt_ids != 0).long()
    teacher_ids = torch.tensor([[0, 1, 4, 7, 8], [1, 4, 9, 9, 9], [0, 0, 1, 4, 5]])
    completion = torch.tensor([[5, 2, 0, 0], [6, 6, 7, 2], [8, 8, 8, 8]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    logp = torch.log(torch.tensor([[0.5, 0.5, 1, 1], [0.25, 0.5, 0.5, 1.0], [0.1, 0.1, 0.1, 0.1]]))
    logp = logp * mask
    return Rollouts(
        prompt_ids_B_P=prompt_ids,
        prompt_mask_B_P=prompt_mask,
        teacher_prompt_ids_B_Q=prompt_ids if shared_teacher_prompt else teacher_ids,
        teacher_prompt_mask_B_Q=prompt_mask if shared_teacher_prompt else (teacher_ids != 0).long(),
        completion_B_T=completion,
        completion_mask_B_T=mask,
        logp_student_B_T=logp if with_student_logp else None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=logp.clone(),
        lengths_B=mask.sum(1),
        truncated_B=torch.tensor([False, False, True]),
        source="mix(p=0.5)",
        source_B=torch.tensor([1, 0, 1], dtype=torch.int8),
    )


def _assert_identical(a: Rollouts, b: Rollouts) -> None:
    for f in fields(Rollouts):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name


def test_sequence_concatenates_prompt_and_completion_with_real_token_positions():
    r = _rollouts()
    ids, mask, pos = r.sequence("student")
    assert ids[2].tolist() == [0, 0, 1, 5, 8, 8, 8, 8]
    assert pos[2].tolist() == [0, 0, 0, 1, 2, 3, 4, 5]
    assert pos[0].tolist() == [0, 0, 1, 2, 3, 4, 4, 4]  # pads after EOS repeat, masked anyway
    assert mask[0].tolist() == [0, 1, 1, 1, 1, 1, 0, 0]
    assert r.sequence("teacher")[0].shape == (3, 9)
    # Logits at P-1 .. P+L-2 predict the completion: the token right after the slice start
    # is the first completion token.
    for role, width in (("student", 4), ("teacher", 5)):
        sl = r.completion_logits_slice(role)
        assert (sl.start, sl.stop) == (width - 1, width - 1 + 4)
        assert torch.equal(r.sequence(role)[0][:, sl.start + 1], r.completion_B_T[:, 0])
    with pytest.raises(ValueError, match="role"):
        r.sequence("critic")


def test_shape_mismatch_is_rejected():
    r = _rollouts()
    with pytest.raises(ValueError, match="logp_behavior_B_T"):
        Rollouts(
            **{
                **{f.name: getattr(r, f.name) for f in fields(r)},
                "logp_behavior_B_T": torch.zeros(3, 5),
            }
        )


@pytest.mark.parametrize("shared", [False, True])
def test_save_load_round_trip(tmp_path, shared):
    r = _rollouts(shared_teacher_prompt=shared, with_student_logp=not shared)
    r.save(tmp_path / "r.safetensors")
    loaded = Rollouts.load(tmp_path / "r.safetensors")
    _assert_identical(r, loaded)
    assert (loaded.teacher_prompt_ids_B_Q is loaded.prompt_ids_B_P) == shared
    moved = loaded.to("cpu")
    assert (moved.teacher_prompt_ids_B_Q is moved.prompt_ids_B_P) == shared


def test_cache_creates_once_per_key_and_reloads_identically(tmp_path):
    cache = RolloutCache(tmp_path / "cache")
    calls = []

    def make() -> Rollouts:
        calls.append(1)
        return _rollouts()

    key = {"teacher": "tb-teacher", "task": "countdown3", "seed": 42, "step": 0, "temperature": 0.5}
    first, saved = cache.fetch(key, make)
    assert saved == 0.0  # made, not read
    again, saved = cache.fetch(dict(reversed(list(key.items()))), make)  # key order is irrelevant
    assert len(calls) == 1 and saved >= 0.0
    _assert_identical(first, again)
    cache.fetch({**key, "step": 1}, make)
    assert len(calls) == 2
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(names) == 6 and not any(n.endswith(".tmp") for n in names)  # value, key, cost
    digest = cache.path_for(key).stem
    assert (tmp_path / "cache" / f"{digest}.key.json").read_text().strip() == canonical_json(key)


def test_cached_tensors_reload_bit_for_bit_with_their_cost(tmp_path):
    cache = RolloutCache(tmp_path)
    logits = {"micro_0": torch.randn(2, 3, 5), "micro_1": torch.randn(2, 3, 5).bfloat16()}
    got, saved = cache.fetch_tensors({"step": 0}, lambda: logits)
    assert saved == 0.0 and got is logits
    again, saved = cache.fetch_tensors({"step": 0}, lambda: pytest.fail("made twice"))
    assert saved >= 0.0 and again.keys() == logits.keys()
    for k, t in logits.items():
        assert again[k].dtype == t.dtype and torch.equal(again[k], t)


def test_cache_key_must_be_plain_json(tmp_path):
    cache = RolloutCache(tmp_path)
    with pytest.raises(ValueError, match="JSON"):
        cache.fetch({"temperature": float("nan")}, _rollouts)
    with pytest.raises(ValueError, match="JSON"):
        cache.fetch({"prompts": torch.zeros(2)}, _rollouts)


def test_a_failed_make_leaves_no_file(tmp_path):
    cache = RolloutCache(tmp_path)

    def boom() -> Rollouts:
        raise RuntimeError("teacher crashed")

    with pytest.raises(RuntimeError):
        cache.fetch({"seed": 1}, boom)
    assert list(tmp_path.iterdir()) == []


def test_prompt_digest_sees_values_and_dtypes():
    ids = torch.tensor([[0, 1, 5]])
    assert prompt_digest(ids) == prompt_digest(ids.clone())
    assert prompt_digest(ids) != prompt_digest(torch.tensor([[0, 1, 6]]))
    assert prompt_digest(ids) != prompt_digest(ids.int())


def test_likelihood_metrics_pool_the_batch_tokens():
    r = _rollouts()
    logp_s = r.logp_student_B_T
    logp_t = torch.zeros_like(logp_s)  # the teacher is certain of every token
    m = likelihood_metrics(r, logp_s, logp_t)
    probs = [0.5, 0.5, 0.25, 0.5, 0.5, 1.0, 0.1, 0.1, 0.1, 0.1]  # the 10 real tokens
    assert m["rollout/student_token_prob"] == pytest.approx(sum(probs) / 10)
    geo = math.exp(sum(math.log(p) for p in probs) / 10)
    assert m["rollout/student_geo_prob"] == pytest.approx(geo, rel=1e-6)
    assert m["rollout/teacher_token_prob"] == 1.0 and m["rollout/teacher_geo_prob"] == 1.0


def test_length_metrics():
    m = rollout_length_metrics(_rollouts())  # lengths 2, 4, 4; the last one truncated
    assert m == pytest.approx(
        {
            "rollout/len_mean": 10 / 3,
            "rollout/len_p50": 4.0,
            "rollout/len_p90": 4.0,
            "rollout/truncated_frac": 1 / 3,
            "rollout/early_eos_frac": 1 / 3,
        }
    )
    assert rollout_length_metrics(_rollouts(), early_eos_tokens=1)["rollout/early_eos_frac"] == 0
