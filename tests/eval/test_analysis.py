"""The analysis orchestration on tiny random models: rollouts at several λ, §5 and §2 numbers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from tests.numerics import chain_tols, model_chain

from distillscope.config import dump_run_config, load_run_config
from distillscope.eval.analysis import (
    AnalysisSpec,
    completion_logits,
    draw_rollouts,
    estimator_analysis,
    load_models,
    parse_lams,
    resolve_target,
    write_analysis,
)
from distillscope.eval.gradient_analysis import _analyse_lam, gradient_analysis
from distillscope.objectives.divergences import divergence_loss
from distillscope.objectives.gradient_bounds import total_variation
from distillscope.objectives.options import DivergenceOptions

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

SPEC = AnalysisSpec(lams=(-1.0, 0.5, 1.0), prompts=3, n_bins=3, probes=4, samples=8, topk=4)


def tiny_run(root: Path, tiny_pair, trained: bool = True, **overrides) -> Path:
    """A run directory: config.yaml naming the tiny pair, and (``trained``) a ``student/``."""
    teacher, student = tiny_pair
    items = {
        "model.teacher": teacher,
        "model.student": student,
        "task.max_new_tokens": 6,
        "seed": 7,
        **overrides,
    }
    cfg = load_run_config(None, [f"{k}={v}" for k, v in items.items()])
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(dump_run_config(cfg))
    if trained:
        shutil.copytree(student, root / "student")
    return root


@pytest.fixture(scope="module")
def run(tiny_pair, tmp_path_factory) -> Path:
    return tiny_run(tmp_path_factory.mktemp("analysis") / "run", tiny_pair)


def test_parse_lams_and_its_errors():
    assert parse_lams("-1, 0,1.5") == (-1.0, 0.0, 1.5)
    for bad, words in (("a,1", "'a' is not a number"), ("3", "outside"), ("1,1", "twice")):
        with pytest.raises(ValueError, match=words):
            parse_lams(bad)


def test_targets(run, tmp_path):
    t = resolve_target(run)
    assert t.student == run / "student" and t.out_dir == run / "analysis"
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        resolve_target(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_target(tmp_path / "nope.yaml")
    assert not any(tmp_path.iterdir())  # nothing written


def test_sequence_gradients_average_to_the_training_objectives_gradient(run):
    """Σ_y g(y) / n is ∇ of the batch loss with seq_mean (what a training step clips)."""
    t = resolve_target(run)
    pair = load_models(t)
    (policy, r), *_ = draw_rollouts(t.cfg, pair, SPEC).values()
    res = _analyse_lam(pair, t, SPEC, -1.0, policy, r, SPEC.lams)
    pair.student.zero_grad()
    z_s = completion_logits(pair.student, r, "student", pair.vocab_size)
    with torch.no_grad():
        z_t = completion_logits(pair.teacher, r, "teacher", pair.vocab_size)
    options = DivergenceOptions(1.0, 0.5, "seq_mean")
    loss, _ = divergence_loss(z_s, z_t, r.completion_mask_B_T, options=options)
    loss.backward()
    params = [p for p in pair.student.parameters() if p.requires_grad]
    full = torch.cat([p.grad.reshape(-1) for p in params])
    # the analysis sums per-row gradients, the reference one batch's: the student's sums
    chain = model_chain(pair.student.config, int(r.completion_mask_B_T.sum()))
    torch.testing.assert_close(res.grad("forward"), full, **chain_tols(full, *chain))
    assert res.rows == int((r.completion_mask_B_T.sum(dim=1) > 0).sum())
    assert len(res.ratios) > 0 and all(x > 0 for x in res.ratios)
    # per-position TV against λ = 1: the λ-spectrum at λ = −1 (paper temperatures, teacher at
    # T = 1) against the student, computed directly
    ell_s = torch.log_softmax(z_s.detach(), -1)
    ell_t = torch.log_softmax(z_t, -1)
    tv = total_variation(res.sampling_logp, res.pair_logp[1.0])
    torch.testing.assert_close(tv, total_variation(ell_t, ell_s))


def test_gradient_analysis_checks_every_bound(run, tmp_path):
    data = gradient_analysis(resolve_target(run), SPEC)
    checks = data["checks"]
    logit = [c for c in checks if c["level"] == "logit"]
    assert len(logit) == 4 * len(SPEC.lams) and all(c["holds"] for c in logit)
    param = [c for c in checks if c["level"] == "parameter"]
    assert len(param) == 4 * len(SPEC.lams) + 2 * 3  # 3 pairs of λ
    assert all(c["holds"] for c in param), [c for c in param if not c["holds"]]
    assert data["empirical_B"]["value"] > 0 and data["empirical_B"]["probes"] > 0
    assert data["temperatures"]["loss_teacher"] == 0.5
    assert data["temperatures"]["spectrum_temperatures"] == "paper"
    for rec in data["per_lam"]:
        assert len(rec["bins"]["forward_norm"]) == len(data["edges"]) - 1
        assert rec["grad_norm_forward"] > 0
    for p in data["pairs"]:
        assert 0.0 <= p["tv_sequence"] <= 1.0
    path = write_analysis(tmp_path, "gradients.json", data)
    assert json.loads(path.read_text())["kind"] == "gradients"


def test_gradient_analysis_is_deterministic(run):
    spec = AnalysisSpec(lams=(0.0, 1.0), prompts=2, n_bins=2, probes=2)
    a = gradient_analysis(resolve_target(run), spec)
    b = gradient_analysis(resolve_target(run), spec)
    assert a["checks"] == b["checks"]


def test_estimator_analysis_rows(run):
    data = estimator_analysis(resolve_target(run), SPEC)
    rows = {(r["lam"], r["estimator"]): r for r in data["rows"]}
    assert len(rows) == 7 * len(SPEC.lams) and data["topk"] == 4
    for lam in SPEC.lams:
        for name in ("k1", "k3", "forward_k1", "forward_k3"):
            assert rows[(lam, name)]["unbiased"], rows[(lam, name)]
        assert rows[(lam, "k2")]["exact_bias"] != 0.0 and not rows[(lam, "k2")]["unbiased"]
        assert rows[(lam, "topk_tail")]["exact_bias"] <= 1e-9  # a lower bound of forward KL
        assert math.isnan(rows[(lam, "topk_tail")]["se"])
    assert len(data["bins"]) == len(data["rows"])
    assert data["temperatures"]["loss_student"] == 1.0
