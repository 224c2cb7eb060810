"""A divergence's weights (jsd's β, the mixture's α) are declared once, as :class:`Weight` s in
objectives/options.py, named by the divergence's declaration and its registry entry, and
everything else follows (docs/architecture.md "Adding an objective"): the registry entry's
``options``, the generated ``objective.*`` config field (default, range [0, 1], description) and
:attr:`DivergenceOptions.weights`, which carries a value from the config to the divergence. A
divergence declared in a test gets its weight read from :class:`DivergenceOptions` with no other
edit (tests/objectives/test_declared_divergence.py does the same for the three loss paths), and
a new weighted kind added as its weight, its declaration, its registry entry and its
``ADDED_FIELDS`` line is a config field, refused under the other kinds, read by the loss, and
renames no earlier run (the subprocess test below).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from distillscope.config import ObjectiveConfig, load_run_config
from distillscope.objectives import OBJECTIVES, DivergenceOptions, ObjectiveKind, Weight
from distillscope.objectives.divergences import DIVERGENCES, Divergence
from distillscope.objectives.registry import WEIGHTS, _declared_weights

WEIGHTED = [(d.name, w) for d in DIVERGENCES.values() for w in d.weights]


def test_weighted_divergences_exist():
    assert [(name, w.name) for name, w in WEIGHTED] == [("jsd", "beta"), ("mixture", "alpha")]
    assert list(WEIGHTS) == ["beta", "alpha"]


@pytest.mark.parametrize("name", list(DIVERGENCES))
def test_the_declaration_and_its_registry_entry_name_the_same_weights_its_options(name):
    assert DIVERGENCES[name].weights == OBJECTIVES[name].weights
    assert OBJECTIVES[name].options == tuple(w.name for w in OBJECTIVES[name].weights)


@pytest.mark.parametrize(("name", "weight"), WEIGHTED, ids=[w.name for _, w in WEIGHTED])
def test_each_declared_weight_is_a_config_field_generated_from_its_declaration(name, weight):
    info = ObjectiveConfig.model_fields[weight.name]
    assert info.default == weight.default and info.annotation is float
    assert info.description == f"{name}: {weight.description}"
    bounds = {type(m).__name__: m for m in info.metadata}
    assert bounds["Ge"].ge == 0 and bounds["Le"].le == 1
    assert WEIGHTS[weight.name] == (name, weight)


@pytest.mark.parametrize(("name", "weight"), WEIGHTED, ids=[w.name for _, w in WEIGHTED])
def test_a_weight_set_in_the_config_reaches_the_divergence(name, weight):
    cfg = load_run_config(None, [f"objective.kind={name}", f"objective.{weight.name}=0.25"])
    options = cfg.objective.divergence_options()
    assert DIVERGENCES[name].weights_of(options) == {weight.name: 0.25}
    default = load_run_config(None, [f"objective.kind={name}"]).objective.divergence_options()
    assert DIVERGENCES[name].weights_of(default) == {weight.name: weight.default}
    assert DIVERGENCES[name].weights_of(DivergenceOptions()) == {weight.name: weight.default}


@pytest.mark.parametrize(("name", "weight"), WEIGHTED, ids=[w.name for _, w in WEIGHTED])
def test_a_weight_outside_zero_one_is_refused_by_the_config(name, weight):
    with pytest.raises(ValueError, match=f"objective.{weight.name}: Input should be less"):
        load_run_config(None, [f"objective.kind={name}", f"objective.{weight.name}=1.5"])


#: A weighted divergence declared here: its weight ``lam`` is a name nothing in the package knows.
SCALED_FORWARD = Divergence(
    "scaled_forward",
    value=lambda s, t, lam: lam * (t.exp() * (t - s)).sum(-1),
    gradient=lambda c, lam: (lam * c.forward_C, c.p_student_C_V.sub_(c.p_teacher_C_V), lam),
    weights=(Weight("lam", 0.5, "scale of forward KL"),),
)


def test_a_weight_declared_with_its_divergence_is_read_from_the_options():
    assert SCALED_FORWARD.weights_of(DivergenceOptions()) == {"lam": 0.5}
    options = DivergenceOptions(weights={"lam": 0.2, "beta": 0.9})
    assert SCALED_FORWARD.weights_of(options) == {"lam": 0.2}
    s, t = torch.randn(2, 3, 7).log_softmax(-1), torch.randn(2, 3, 7).log_softmax(-1)
    forward = DIVERGENCES["forward_kl"].tokens(s, t)
    torch.testing.assert_close(SCALED_FORWARD.tokens(s, t, options), 0.2 * forward)
    with pytest.raises(ValueError, match=r"scaled_forward lam must be in \[0, 1\], got -0.5"):
        SCALED_FORWARD.weights_of(DivergenceOptions(weights={"lam": -0.5}))


def test_options_hold_their_weights_read_only_and_compare_by_value():
    weights = {"beta": 0.3}
    options = DivergenceOptions(weights=weights)
    weights["beta"] = 0.9  # the caller's dict is copied
    assert options.weights["beta"] == 0.3 and options == DivergenceOptions(weights={"beta": 0.3})
    with pytest.raises(TypeError):
        options.weights["beta"] = 0.1  # type: ignore[index]
    assert hash(options) == hash(DivergenceOptions(weights={"beta": 0.3}))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("beta two", 0.5, "x"), "a weight's name must be an identifier, got 'beta two'"),
        (("gamma", 1.5, "x"), "weight gamma: default must be in [0, 1], got 1.5"),
    ],
)
def test_a_bad_weight_declaration_is_refused(args, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Weight(*args)


def test_one_weight_name_declared_by_two_kinds_is_refused():
    other = ObjectiveKind("other", "o", "o", load=print, weights=(Weight("alpha", 0.5, "x"),))
    with pytest.raises(ValueError, match="weight 'alpha' is declared by both mixture and other"):
        _declared_weights([OBJECTIVES["mixture"], other])


#: A weighted divergence added as its Weight in options.py, its registry entry (the source
#: edited below), its declaration in DIVERGENCES and its line in ADDED_FIELDS, and nothing else:
#: the config generates
#: ``objective.gamma``, refuses it under the other kinds, the loss reads it, ``distillscope
#: config`` lists it, and the id of a run that does not set it is the id it had before.
NEW_DIVERGENCE = """
import dataclasses
import sys
from pathlib import Path
import distillscope.objectives as objectives
from distillscope.config import RunConfig
from distillscope.study.spec import run_id
before = run_id("main", {}, RunConfig())
objectives.options.BRIER_GAMMA = objectives.Weight("gamma", 0.25, "scale of the squared distance")
source = Path(objectives.__file__).with_name("registry.py").read_text()
entry = '        _full_vocabulary("brier", "Brier", "squared distance", BRIER_GAMMA),\\n'
anchor = '        _estimator(\\n            "forward_sampled",\\n'
names = "import JSD_BETA, "
assert source.count(anchor) == 1 and source.count(names) == 1
source = source.replace(anchor, entry + anchor).replace(names, names + "BRIER_GAMMA, ")
module = type(sys)("distillscope.objectives.registry")
module.__file__ = "registry.py"
sys.modules[module.__name__] = module
exec(compile(source, module.__file__, "exec"), module.__dict__)
objectives.OBJECTIVES = module.OBJECTIVES
for name in [m for m in sys.modules if m.startswith("distillscope.") and "objectives" not in m]:
    del sys.modules[name]  # the config and its readers import the edited registry
import torch
from distillscope.objectives.divergences import DIVERGENCES, Divergence, divergence_loss
from distillscope.objectives.registry import OBJECTIVES
DIVERGENCES["brier"] = Divergence(
    "brier",
    value=lambda s, t, gamma: 0.5 * gamma * ((s.exp() - t.exp()) ** 2).sum(-1),
    gradient=lambda c, gamma: None,
    weights=(objectives.options.BRIER_GAMMA,),
)
from distillscope.store_versions import ADDED_FIELDS, SCHEMA_VERSION, Added
ADDED_FIELDS["objective.gamma"] = Added(0.25, SCHEMA_VERSION + 1)
from distillscope.config import ConfigError, RunConfig, config_fields, load_run_config
from distillscope.labels import OBJECTIVE_NAMES
from distillscope.study.spec import run_id
assert list(RunConfig.model_fields["objective"].annotation.model_fields)[4:7] == [
    "beta", "alpha", "gamma"]
assert run_id("main", {}, RunConfig()) == before, "a run that does not set gamma was renamed"
cfg = load_run_config(None, ["objective.kind=brier", "objective.gamma=0.4"])
brier = OBJECTIVES["brier"].load()
assert brier is DIVERGENCES["brier"] and OBJECTIVE_NAMES["brier"] == "Brier"
options = cfg.objective.divergence_options()
assert brier.weights_of(options) == {"gamma": 0.4}, options
s, t = torch.randn(2, 3, 7, dtype=torch.float64), torch.randn(2, 3, 7, dtype=torch.float64)
mask = torch.ones(2, 3, dtype=torch.bool)
loss, _ = divergence_loss(s, t, mask, divergence=brier, options=options)
at_default = dataclasses.replace(options, weights={})  # gamma absent: 0.25
default, _ = divergence_loss(s, t, mask, divergence=brier, options=at_default)
torch.testing.assert_close(loss, 1.6 * default, rtol=1e-12, atol=0)
row = [r for r in config_fields() if r[0] == "objective.gamma"]
assert row and row[0][3] == "brier: scale of the squared distance", row
refused = {
    "objective.gamma=0.4": "objective.gamma=0.4 is ignored under objective.kind=forward_kl",
    "objective.beta=0.3": "objective.beta=0.3 is ignored under objective.kind=brier",
    "objective.gamma=1.5": "objective.gamma: Input should be less than or equal to 1",
}
for override, message in refused.items():
    kind = [] if "gamma=0.4" in override else ["objective.kind=brier"]
    try:
        load_run_config(None, [*kind, override])
    except ConfigError as err:
        assert message in str(err), err
    else:
        raise AssertionError(f"{override} was accepted")
print("ok")
"""


def test_a_new_weighted_divergence_is_its_declaration_its_entry_and_its_added_field():
    out = subprocess.run(
        [sys.executable, "-c", NEW_DIVERGENCE], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
