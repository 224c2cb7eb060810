"""OPD's config as [D] defines it: the teacher at temperature 1 in the advantage unless tempered
by an explicit opt-in, and ``objective.updates_per_batch`` read by OPD only (docs/method.md §4)."""

from __future__ import annotations

import pytest
import torch
import yaml

from distillscope.config import (
    ConfigError,
    config_fields,
    dump_run_config,
    load_run_config,
    run_config_from_dict,
)
from distillscope.objectives import OPDOptions
from distillscope.objectives.opd import opd_from_logprobs
from distillscope.store import config_fingerprint

OPD = ["objective.kind=opd"]


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_run_config(None, overrides)
    message = str(err.value)
    assert "\n" not in message and len(message) < 300
    return message


def test_opd_takes_the_teacher_at_one_and_the_resolved_config_says_so():
    cfg = load_run_config(None, OPD)
    assert cfg.objective.teacher_temperature == 1.0
    assert cfg.objective.divergence_options().teacher_temperature == 1.0
    dumped = yaml.safe_load(dump_run_config(cfg))["objective"]
    assert dumped["teacher_temperature"] == 1.0 and dumped["tempered_teacher"] is False
    assert run_config_from_dict(yaml.safe_load(dump_run_config(cfg))) == cfg  # round trip
    # every other kind keeps the loss temperature of the distillation losses
    assert load_run_config(None).objective.teacher_temperature == 0.5


def test_a_tempered_opd_teacher_is_an_error_naming_the_field_without_the_opt_in():
    message = _error([*OPD, "objective.teacher_temperature=0.5"])
    assert "objective.teacher_temperature=0.5" in message
    assert "objective.tempered_teacher=true" in message and "remove it" in message
    cfg = load_run_config(
        None, [*OPD, "objective.teacher_temperature=0.5", "objective.tempered_teacher=true"]
    )
    assert cfg.objective.teacher_temperature == 0.5 and cfg.objective.tempered_teacher
    assert run_config_from_dict(yaml.safe_load(dump_run_config(cfg))) == cfg
    # the temperature the run's own config names explicitly at 1.0 needs no opt-in
    assert load_run_config(None, [*OPD, "objective.teacher_temperature=1.0"]) == load_run_config(
        None, OPD
    )


def test_the_opt_in_without_a_tempered_teacher_is_an_error():
    message = _error([*OPD, "objective.tempered_teacher=true"])
    assert "objective.tempered_teacher=true" in message
    assert "objective.teacher_temperature" in message


@pytest.mark.parametrize("kind", ["forward_kl", "reverse_sampled", "jsd"])
@pytest.mark.parametrize(
    "override", ["objective.updates_per_batch=2", "objective.tempered_teacher=true"]
)
def test_the_opd_only_fields_are_refused_under_other_kinds(kind, override):
    message = _error([f"objective.kind={kind}", override])
    field = override.split("=")[0]
    assert f"{field}=" in message and f"ignored under objective.kind={kind}" in message


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "true"])
def test_updates_per_batch_is_an_integer_of_at_least_one(value):
    assert "objective.updates_per_batch" in _error([*OPD, f"objective.updates_per_batch={value}"])
    with pytest.raises(ValueError, match="updates_per_batch must be at least 1"):
        OPDOptions(updates_per_batch=0)


def test_updates_per_batch_reaches_the_options_and_steps_count_rollout_batches():
    cfg = load_run_config(None, [*OPD, "objective.updates_per_batch=3"])
    assert cfg.objective.opd_options().updates_per_batch == 3
    described = {name: text for name, _, _, text in config_fields()}
    assert "rollout batches" in described["optim.steps"]
    assert "updates_per_batch" in described["optim.steps"]
    assert "tempered_teacher" in described["objective.teacher_temperature"]


def test_the_new_fields_at_their_defaults_leave_fingerprints_unchanged():
    # Run ids and fingerprints of every run that does not use the new fields stay as they were,
    # so earlier studies resume; an OPD run of the old default (teacher at 0.5) no longer matches.
    for overrides in ([], ["objective.kind=jsd"], OPD):
        dump = load_run_config(None, overrides).model_dump(mode="json")
        _, fields = config_fingerprint(dump, version=1)  # as directories before them
        assert "objective.updates_per_batch" not in fields
        assert "objective.tempered_teacher" not in fields
    _, fields = config_fingerprint(
        load_run_config(None, [*OPD, "objective.updates_per_batch=2"]).model_dump(mode="json")
    )
    assert fields["objective.updates_per_batch"] == 2
    assert fields["objective.teacher_temperature"] == 1.0


def test_a_fixed_student_side_sets_the_advantage_and_leaves_the_gradient_path():
    g = torch.Generator().manual_seed(0)
    logp_B_T = (-torch.rand(3, 4, generator=g, dtype=torch.float64)).requires_grad_()
    teacher_B_T = -torch.rand(3, 4, generator=g, dtype=torch.float64)
    old_B_T = logp_B_T.detach() + 0.05
    fixed_B_T = -torch.rand(3, 4, generator=g, dtype=torch.float64)
    mask_B_T = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    loss, metrics = opd_from_logprobs(
        logp_B_T, teacher_B_T, old_B_T, mask_B_T, logp_student_fixed_B_T=fixed_B_T
    )
    keep = mask_B_T.bool()
    # Δℓ = log π_T − the fixed student's (teacher in fp32, as the loss reads it)
    delta_B_T = teacher_B_T.float().double() - fixed_B_T
    assert metrics["opd/raw_advantage_mean"] == pytest.approx(float(delta_B_T[keep].mean()))
    _, without = opd_from_logprobs(logp_B_T, teacher_B_T, old_B_T, mask_B_T)
    assert without["opd/raw_advantage_mean"] != pytest.approx(metrics["opd/raw_advantage_mean"])
    loss.backward()
    assert logp_B_T.grad is not None and bool(logp_B_T.grad[keep].ne(0).any())
    with pytest.raises(ValueError, match="logp_student_fixed_B_T"):
        opd_from_logprobs(
            logp_B_T, teacher_B_T, old_B_T, mask_B_T, logp_student_fixed_B_T=fixed_B_T[:, :2]
        )
