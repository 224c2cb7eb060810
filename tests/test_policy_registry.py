"""The rollout policy registry: one entry per policy, read by config, loop and labels."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distillscope.config import ConfigError, RolloutConfig, load_run_config
from distillscope.labels import ROLLOUT_NAMES
from distillscope.rollout.policies import (
    InterleavePolicy,
    MixturePolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)
from distillscope.rollout.policy_registry import POLICY_NAMES, ROLLOUT_POLICIES
from distillscope.train.setup import make_policy

CLASSES = {
    "student": StudentPolicy,
    "teacher": TeacherPolicy,
    "spectrum": SpectrumPolicy,
    "mix": MixturePolicy,
    "interleave": InterleavePolicy,
}


def test_each_entry_builds_its_policy_and_names_it_once():
    assert POLICY_NAMES == tuple(CLASSES)
    assert ROLLOUT_NAMES == {n: k.label for n, k in ROLLOUT_POLICIES.items()}
    assert len(set(ROLLOUT_NAMES.values())) == len(ROLLOUT_NAMES)
    for name, cls in CLASSES.items():
        assert type(make_policy(RolloutConfig(policy=name))) is cls
        for option in ROLLOUT_POLICIES[name].all_options():
            assert option in RolloutConfig.model_fields


def test_the_spectrum_samples_both_models_at_the_student_temperature():
    # [P] samples the λ-spectrum with both models at 1.0 (docs/method.md §3, §10)
    cfg = RolloutConfig(policy="spectrum", lam=0.5, student_temperature=0.8, top_p=0.9)
    assert make_policy(cfg) == SpectrumPolicy(
        lam=0.5, student_temperature=0.8, teacher_temperature=0.8, top_p=0.9
    )
    mix = make_policy(RolloutConfig(policy="mix", p_student=0.25, teacher_temperature=0.7))
    assert mix == MixturePolicy(0.25, StudentPolicy(1.0), TeacherPolicy(0.7))


def test_policies_temperatures_sample_each_model_at_its_pure_policy_temperature():
    # docs/method.md §3 "The spectrum's ends": λ = −1 is then OffPD, λ = +1 OnPD
    cfg = RolloutConfig(
        policy="spectrum", lam=0.5, spectrum_temperatures="policies", student_temperature=0.8
    )
    assert make_policy(cfg) == SpectrumPolicy(
        lam=0.5, student_temperature=0.8, teacher_temperature=0.5
    )
    cfg = load_run_config(
        None,
        [
            "rollout.policy=spectrum",
            "rollout.spectrum_temperatures=policies",
            "rollout.teacher_temperature=0.7",
        ],
    ).rollout
    assert make_policy(cfg).teacher_temperature == 0.7


def test_the_spectrum_reads_teacher_temperature_only_with_policies_temperatures():
    spectrum = ROLLOUT_POLICIES["spectrum"]
    assert "teacher_temperature" not in spectrum.reads(RolloutConfig(policy="spectrum"))
    policies = RolloutConfig(policy="spectrum", spectrum_temperatures="policies")
    assert "teacher_temperature" in spectrum.reads(policies)
    with pytest.raises(ConfigError, match="rollout.teacher_temperature=0.7 is ignored under"):
        load_run_config(None, ["rollout.policy=spectrum", "rollout.teacher_temperature=0.7"])
    for name in ("student", "teacher", "mix", "interleave"):
        with pytest.raises(ConfigError, match="rollout.spectrum_temperatures='policies' is ign"):
            load_run_config(
                None, [f"rollout.policy={name}", "rollout.spectrum_temperatures=policies"]
            )
    with pytest.raises(ConfigError, match="spectrum_temperatures"):
        load_run_config(None, ["rollout.policy=spectrum", "rollout.spectrum_temperatures=both"])


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_an_option_of_another_policy_is_refused(name):
    options = ROLLOUT_POLICIES[name].options
    others = {o for k in ROLLOUT_POLICIES.values() for o in k.options} - set(options)
    values = {
        "lam": 0.5,
        "p_student": 0.25,
        "top_k": 3,
        "teacher_temperature": 0.7,
        "spectrum_temperatures": "policies",
    }
    for option in options:
        load_run_config(None, [f"rollout.policy={name}", f"rollout.{option}={values[option]}"])
    for option in others:
        with pytest.raises(ConfigError, match=f"rollout.{option}=.* is ignored under"):
            load_run_config(None, [f"rollout.policy={name}", f"rollout.{option}={values[option]}"])


def test_paper_temperatures_leave_run_ids_unchanged():
    # The field added at its default (today's behaviour) stays out of run ids and of the
    # fingerprints of directories written before it (schema version 1).
    from distillscope.store import config_fingerprint

    default = load_run_config(None, []).model_dump(mode="json")
    _, fields = config_fingerprint(default, version=1)
    assert "rollout.spectrum_temperatures" not in fields
    policies = load_run_config(
        None, ["rollout.policy=spectrum", "rollout.spectrum_temperatures=policies"]
    )
    _, fields = config_fingerprint(policies.model_dump(mode="json"))
    assert fields["rollout.spectrum_temperatures"] == "policies"


def test_an_unknown_policy_names_the_allowed_values():
    with pytest.raises(ConfigError) as err:
        load_run_config(None, ["rollout.policy=onn"])
    allowed = "'student', 'teacher', 'spectrum', 'mix' or 'interleave'"
    assert str(err.value) == f"config: rollout.policy: Input should be {allowed} (got 'onn')"


def test_the_registry_and_the_labels_import_no_torch():
    script = (
        "import sys; import distillscope.labels, distillscope.rollout.policy_registry; "
        "light = {'distillscope.rollout', 'distillscope.rollout.policy_registry'}; "
        "assert not [m for m in sys.modules if m in ('torch', 'transformers') "
        "or (m.startswith('distillscope.rollout') and m not in light)], sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


#: A policy added as one entry of the registry, and nothing else: config validation, the
#: ``distillscope config`` listing, the loop's constructor and the report's label all read it.
NEW_POLICY = """
import sys
from pathlib import Path
import distillscope.rollout
source = Path(distillscope.rollout.__file__).with_name("policy_registry.py").read_text()
entry = '        PolicyKind("greedy", "greedy OnPD", "greedy student", (), _greedy),\\n'
anchor = "    )\\n}\\n"
assert source.count(anchor) == 1
source = source.replace(anchor, entry + anchor).replace(
    "ROLLOUT_POLICIES: dict",
    "def _greedy(cfg):\\n"
    "    from distillscope.rollout.policies import StudentPolicy\\n"
    "    return StudentPolicy(temperature=1e-3)\\n\\n\\nROLLOUT_POLICIES: dict",
)
module = type(sys)("distillscope.rollout.policy_registry")
module.__file__ = "policy_registry.py"
sys.modules[module.__name__] = module
exec(compile(source, module.__file__, "exec"), module.__dict__)
from distillscope.config import ConfigError, config_fields, load_run_config
from distillscope.labels import ROLLOUT_NAMES
from distillscope.rollout.policies import StudentPolicy
from distillscope.train.setup import make_policy
cfg = load_run_config(None, ["rollout.policy=greedy"])
assert make_policy(cfg.rollout) == StudentPolicy(temperature=1e-3)
assert ROLLOUT_NAMES["greedy"] == "greedy OnPD"
assert any("greedy (greedy student)" in str(f) for f in config_fields())
try:
    load_run_config(None, ["rollout.policy=greedy", "rollout.lam=0.5"])
except ConfigError as err:
    assert "rollout.lam=" in str(err) and "is ignored under" in str(err), err
else:
    raise AssertionError("a spectrum option under the new policy was accepted")
print("ok")
"""


def test_a_new_policy_is_one_registry_entry():
    out = subprocess.run(
        [sys.executable, "-c", NEW_POLICY], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
