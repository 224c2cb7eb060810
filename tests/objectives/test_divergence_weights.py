"""A divergence's weights (jsd's β, the mixture's α) read the same in every place that names
them (docs/architecture.md "Adding an objective"): the declaration's ``weights``, its registry
entry's ``options``, the :class:`DivergenceOptions` field, the ``objective.*`` config field with
its default, and the config's ``divergence_options()`` that carries a value from one to the
other. A weight added to a declaration and missed in one of them fails here.
"""

from __future__ import annotations

import dataclasses

import pytest

from distillscope.config import ObjectiveConfig, load_run_config
from distillscope.objectives import OBJECTIVES, DivergenceOptions
from distillscope.objectives.divergences import DIVERGENCES

WEIGHTED = [(d.name, w) for d in DIVERGENCES.values() for w in d.weights]


def test_weighted_divergences_exist():
    assert ("jsd", "beta") in WEIGHTED and ("mixture", "alpha") in WEIGHTED


@pytest.mark.parametrize("name", list(DIVERGENCES))
def test_the_registry_entry_lists_exactly_the_declared_weights(name):
    assert OBJECTIVES[name].options == DIVERGENCES[name].weights


@pytest.mark.parametrize(("name", "weight"), WEIGHTED)
def test_a_weight_has_one_default_and_reaches_the_divergence(name, weight):
    options_default = {f.name: f.default for f in dataclasses.fields(DivergenceOptions)}
    assert weight in options_default, f"DivergenceOptions has no field {weight}"
    assert weight in ObjectiveConfig.model_fields, f"objective.{weight} is not a config field"
    assert ObjectiveConfig.model_fields[weight].default == options_default[weight]
    cfg = load_run_config(None, [f"objective.kind={name}", f"objective.{weight}=0.25"])
    options = cfg.objective.divergence_options()
    assert DIVERGENCES[name].weights_of(options) == {weight: 0.25}


@pytest.mark.parametrize(("name", "weight"), WEIGHTED)
def test_a_weight_outside_zero_one_is_refused_by_the_config(name, weight):
    with pytest.raises(ValueError, match=f"objective.{weight}|{weight}"):
        load_run_config(None, [f"objective.kind={name}", f"objective.{weight}=1.5"])
