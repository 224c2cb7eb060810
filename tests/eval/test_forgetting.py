"""eval.forgetting: lm-evaluation-harness scores the student before and after training.

The harness tests run the real lm-eval on CPU: tiny random Llamas with the testbed tokenizer and
local multiple-choice tasks over a JSONL file (``include_path``), 4–6 items each.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from distillscope.config import (
    HARNESS_MISSING,
    PAPER_FORGETTING_LIMITS,
    ConfigError,
    RunConfig,
    evaluation_key,
    run_config_from_dict,
)
from distillscope.eval import forgetting
from distillscope.store import config_fingerprint
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec
from distillscope.train import preflight

SUMS = [(1, 2), (3, 4), (2, 2), (5, 1), (3, 3), (7, 1)]  # 6 items; the tests score 4
#: [P]'s suite with HumanEval allowed to run the model's code (off by default).
ALLOW_CODE = {"confirm_run_unsafe_code": True}


def _mc_task(name: str, text: str, data: Path, cache: Path) -> str:
    return f"""task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
  cache_dir: {cache}
test_split: test
output_type: multiple_choice
doc_to_text: "{text}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


@pytest.fixture(scope="module")
def local_tasks(tmp_path_factory) -> Path:
    """``tiny_sum`` and the group ``tiny_ops`` (``tiny_sub``, ``tiny_mul``) over one JSONL file,
    in the testbed alphabet: the gold answer is choice 0."""
    root = tmp_path_factory.mktemp("lm-tasks")
    rows = [
        {"q": f"{a}+{b}", "choices": [str(a + b), str(a + b + 1), str(a * b)], "label": 0}
        for a, b in SUMS
    ]
    data = root / "sums.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = root / "datasets-cache"  # datasets' cache in the test's directory, not ~/.cache
    for name, text in (("tiny_sum", "{{q}}="), ("tiny_sub", "sum {{q}} ="), ("tiny_mul", "{{q}}:")):
        (root / f"{name}.yaml").write_text(_mc_task(name, text, data, cache))
    (root / "tiny_ops.yaml").write_text("group: tiny_ops\ntask: [tiny_sub, tiny_mul]\n")
    return root


def _forgetting(local_tasks: Path) -> dict:
    return {
        "tasks": ["tiny_sum", "tiny_ops"],
        "limit": 4,  # of each task, the group's included: one harness call (one limit)
        "include_path": str(local_tasks),
        "batch_size": 4,
    }


@pytest.fixture
def harness():
    return pytest.importorskip(
        "lm_eval", reason="lm-eval-harness is an optional extra: pip install 'distillscope[lmeval]'"
    )


# ---------------------------------------------------------------------------------------------
# The config
# ---------------------------------------------------------------------------------------------


def test_the_default_suite_is_papers_seven_under_lm_evals_names():
    with pytest.raises(ValueError, match="holds 'humaneval_instruct', which executes the model"):
        RunConfig.model_validate({"eval": {"forgetting": {"harness": "lm-eval"}}})
    paper = {"harness": "lm-eval", "confirm_run_unsafe_code": True}  # HumanEval runs code
    f = RunConfig.model_validate({"eval": {"forgetting": paper}}).eval
    assert f.skill_items == 0  # the harness replaces the skill suite unless it is named
    assert f.forgetting.tasks == list(PAPER_FORGETTING_LIMITS)
    assert f.forgetting.limit == {
        "mmlu_pro": 200,  # per subject: 14 × 200
        "truthfulqa_mc1": 200,
        "ifeval": 200,
        "humaneval_instruct": 164,
        "eq_bench": 171,
        "bbq": 200,
        "toxigen": 200,
    }
    lm_tasks = Path(pytest.importorskip("lm_eval").__file__).parent / "tasks"
    where = {"truthfulqa_mc1": "truthfulqa", "humaneval_instruct": "humaneval"}
    for name in PAPER_FORGETTING_LIMITS:  # a task or group of the installed harness
        yamls = (lm_tasks / where.get(name, name)).glob("*yaml")
        pattern = re.compile(rf"^(task|group): {name}$", re.M)
        assert any(pattern.search(p.read_text()) for p in yamls), name


def test_config_rules():
    chosen = RunConfig.model_validate({"eval": {"forgetting": {"tasks": ["toxigen", "arc_easy"]}}})
    assert chosen.eval.forgetting.limit == {"toxigen": 200}  # [P]'s count; arc_easy: all items
    assert chosen.eval.forgetting.limit_of("arc_easy") is None
    assert forgetting._by_limit(chosen.eval.forgetting) == {200: ["toxigen"], None: ["arc_easy"]}
    with pytest.raises(ConfigError, match="eval.forgetting and eval.skill_items=5 both write"):
        run_config_from_dict({"eval": {"skill_items": 5, "forgetting": ALLOW_CODE}})
    with pytest.raises(ConfigError, match="limit names 'ifeval', which is not in"):
        run_config_from_dict({"eval": {"forgetting": {"tasks": ["bbq"], "limit": {"ifeval": 2}}}})
    with pytest.raises(ConfigError, match="not a device"):
        run_config_from_dict({"eval": {"forgetting": {**ALLOW_CODE, "device": "cuda1"}}})
    # off by default, and then absent from fingerprints: earlier run directories still resume
    _, fields = config_fingerprint(RunConfig().model_dump(mode="json"), version=1)
    assert RunConfig().eval.forgetting is None and "eval.forgetting" not in fields
    assert "forgetting" not in evaluation_key(RunConfig())  # nor from the shared cache's keys
    assert '"forgetting": {' in evaluation_key(chosen)


def test_a_missing_harness_is_one_line_before_anything_runs(tmp_path, monkeypatch, tiny_pair):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval` now fails
    teacher, student = tiny_pair
    cfg = RunConfig.model_validate(
        {
            "model": {"teacher": str(teacher), "student": str(student)},
            "eval": {"forgetting": ALLOW_CODE},
        }
    )
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    assert str(err.value) == HARNESS_MISSING
    assert "pip install 'distillscope[lmeval]'" in HARNESS_MISSING
    with pytest.raises(ConfigError, match=re.escape(HARNESS_MISSING)):
        run_study(_spec(tiny_pair, ALLOW_CODE), tmp_path / "s")
    assert not (tmp_path / "s").exists()  # nothing written, nothing trained
    with pytest.raises(ImportError, match=re.escape(HARNESS_MISSING)):
        forgetting._harness()  # `distillscope eval`, which runs no preflight


# ---------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------


def _results(**rows) -> dict:
    return {
        "results": {name: row for name, (row, _) in rows.items()},
        "configs": {name: {"output_type": kind} for name, (_, kind) in rows.items()},
        "higher_is_better": {},
    }


def test_primary_score_of_each_kind_of_task():
    res = _results(
        mc=({"alias": "mc", "acc_norm,none": 0.9, "acc,none": 0.25, "acc_stderr,none": 0.1},
            "multiple_choice"),
        gen=({"exact_match,custom-extract": 0.5, "exact_match_stderr,custom-extract": 0.0},
             "generate_until"),
        ifeval=({"prompt_level_strict_acc,none": 0.3, "inst_level_strict_acc,none": 0.6},
                "generate_until"),
        eq=({"eqbench,none": 55.0, "percent_parseable,none": 100.0}, "generate_until"),
        eq_bad=({"eqbench,none": -20.0}, "generate_until"),
        ppl=({"word_perplexity,none": 30.0}, "loglikelihood_rolling"),
    )  # fmt: skip
    assert forgetting.primary_score(res, "mc") == 0.25  # acc, whatever comes first
    assert forgetting.primary_score(res, "gen") == 0.5
    assert forgetting.primary_score(res, "ifeval") == 0.3  # the first metric
    assert forgetting.primary_score(res, "eq") == 0.55  # eqbench is reported on 0–100
    assert forgetting.primary_score(res, "eq_bad") == -0.2  # worse than random answers
    res["group_subtasks"] = {"grp": ["mc", "gen", "ifeval"]}
    assert forgetting.primary_score(res, "grp") == pytest.approx((0.25 + 0.5 + 0.3) / 3)
    with pytest.raises(forgetting.HarnessResultError, match="not a score in"):
        forgetting.primary_score(res, "ppl")
    with pytest.raises(forgetting.HarnessResultError, match="no result for 'truthfulqa'"):
        forgetting.primary_score(res, "truthfulqa")  # a tag: its tasks have rows, it has none
    res["higher_is_better"] = {"gen": {"exact_match": False}}
    with pytest.raises(forgetting.HarnessResultError, match="lower is better"):
        forgetting.primary_score(res, "gen")


def test_forgetting_metrics_are_unweighted_means_in_pp():
    out = forgetting.forgetting_metrics({"a": 0.5, "b": 0.25}, {"a": 0.25, "b": 0.25})
    assert out["eval/forgetting_before"] == 0.375 and out["eval/forgetting_after"] == 0.25
    assert out["eval/forgetting_pp"] == pytest.approx(-12.5)
    assert out["eval/lmeval/a"] == 0.25 and out["eval/lmeval_before/a"] == 0.5


def _reference_accuracy(model_dir: Path, items: int) -> float:
    """tiny_sum's accuracy computed without the harness: the gold choice (0) has the highest
    summed log-probability of ``" " + choice`` after ``<bos> q=``."""
    from distillscope.models.load import load_model

    model, tok = load_model(model_dir)
    correct = 0
    for a, b in SUMS[:items]:
        lls = []
        for choice in (a + b, a + b + 1, a * b):
            context, whole = tok(f"{a}+{b}=")["input_ids"], tok(f"{a}+{b}= {choice}")["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].double(), -1)
            lls.append(sum(logp[t - 1, whole[t]].item() for t in range(len(context), len(whole))))
        correct += max(range(3), key=lambda i: lls[i]) == 0
    return correct / items


def test_harness_scores_and_keeps_its_answers(
    harness, local_tasks, tiny_pair, tmp_path, monkeypatch
):
    _, student = tiny_pair
    cfg = RunConfig.model_validate(
        {"model": {"student": str(student)}, "eval": {"forgetting": _forgetting(local_tasks)}}
    )
    scores = forgetting.run_harness(cfg, student, tmp_path)
    assert list(scores) == ["tiny_sum", "tiny_ops"]
    assert scores["tiny_sum"] == _reference_accuracy(student, 4)  # limit 4
    assert all(0.0 <= s <= 1.0 for s in scores.values())

    # a student handed over in memory, never exported: the block exports it for the harness
    from types import SimpleNamespace

    from distillscope.models.load import load_model

    model, tok = load_model(student)
    blocks = SimpleNamespace(cfg=cfg, student=model, tokenizer=tok, say=lambda message: None)
    out = forgetting.harness_forgetting(blocks, tmp_path, untrained=False, cache_dir=None)
    assert out["eval/lmeval/tiny_sum"] == out["eval/lmeval_before/tiny_sum"] == scores["tiny_sum"]
    assert out["eval/forgetting_pp"] == 0.0  # the same weights before and after
    assert not list(tmp_path.glob(".lmeval-student.*"))  # the export is gone

    # run again (as after a kill): every answer comes from the request cache in the run directory
    from lm_eval.models.huggingface import HFLM

    def boom(self, requests, *args, **kwargs):
        if requests:
            raise AssertionError("the harness asked the model again")
        return []

    monkeypatch.setattr(HFLM, "loglikelihood", boom)
    assert forgetting.run_harness(cfg, student, tmp_path) == scores
    digest = forgetting.model_digest(student)[:16]
    assert (tmp_path / f".lmeval-{digest}_rank0.db").is_file()


# ---------------------------------------------------------------------------------------------
# A study: the baseline scores "before" once, runs reuse it, a killed study does not redo it
# ---------------------------------------------------------------------------------------------


def _spec(tiny_pair, forgetting_section: dict) -> StudySpec:
    teacher, student = tiny_pair
    return StudySpec.model_validate(
        {
            "name": "tiny-forgetting",
            "base": {
                "model": {"teacher": str(teacher), "student": str(student)},
                "task": {"max_new_tokens": 6},
                "rollout": {"prompts_per_step": 4},
                "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-2},
                "checkpoint_every": 0,
                "eval": {
                    "items": 2,
                    "coverage_items": 0,
                    "harder_task": None,
                    "forgetting": forgetting_section,
                },
            },
            "experiments": [{"name": "main", "axes": {"rollout.policy": ["student", "teacher"]}}],
        }
    )


def test_study_scores_before_once_and_resumes_without_redoing_it(
    harness, local_tasks, tiny_pair, tmp_path, monkeypatch
):
    spec, out = _spec(tiny_pair, _forgetting(local_tasks)), tmp_path / "s"
    calls: list[Path] = []
    real = forgetting.run_harness

    def counting(cfg, model_dir, run_dir):
        calls.append(Path(model_dir))
        return real(cfg, model_dir, run_dir)

    monkeypatch.setattr(forgetting, "run_harness", counting)

    # killed after the baseline: the first run is interrupted as it starts training
    from distillscope.study import run_one as run_one_mod

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(run_one_mod, "distill", killed)
        with pytest.raises(KeyboardInterrupt):
            run_study(spec, out)
    assert calls == [Path(tiny_pair[1])]  # the baseline: the untrained student, once

    df = pd.read_parquet(run_study(spec, out))  # resumed
    runs = sorted(p for p in (out / "runs").iterdir() if p.name != "baseline")
    assert calls[1:] == [r / "student" for r in runs]  # each run's "after" only
    assert set(df["status"]) == {"done"} and len(df) == 3

    base = df.set_index("run_id").loc["baseline"]
    assert base["eval/forgetting_pp"] == 0.0
    for task in ("tiny_sum", "tiny_ops"):
        assert base[f"eval/lmeval/{task}"] == base[f"eval/lmeval_before/{task}"]
    for _, row in df[df["experiment"] != "baseline"].iterrows():
        after = [row["eval/lmeval/tiny_sum"], row["eval/lmeval/tiny_ops"]]
        before = [row["eval/lmeval_before/tiny_sum"], row["eval/lmeval_before/tiny_ops"]]
        assert before == [base["eval/lmeval/tiny_sum"], base["eval/lmeval/tiny_ops"]]
        assert row["eval/forgetting_before"] == pytest.approx(sum(before) / 2)
        assert row["eval/forgetting_after"] == pytest.approx(sum(after) / 2)
        expected = 100 * (row["eval/forgetting_after"] - row["eval/forgetting_before"])
        assert row["eval/forgetting_pp"] == pytest.approx(expected)
    assert "eval/skills_before" not in df  # the skill suite is off: one source of forgetting_pp
