"""Several samples per item, their per-item outcomes (``eval_items.parquet``) and the protocol
label in ``eval.json``."""

import json

import pandas as pd
import pytest

from distillscope.config import ConfigError, evaluation_key, load_run_config
from distillscope.eval.evaluate import evaluate
from distillscope.models import resolve_model_path
from distillscope.models.load import load_model
from distillscope.store import (
    EVAL_ITEM_COLUMNS,
    StoreError,
    config_fingerprint,
    read_eval_items,
    write_eval_items,
)
from distillscope.store_versions import ADDED_FIELDS


def test_eval_items_round_trip(tmp_path):
    columns = {
        "block": ["accuracy", "accuracy", "skill/add"],
        "task": ["tb-countdown3", "tb-countdown3", "add"],
        "item": [0, 0, 7],
        "item_id": ["countdown:1,2,3>6", "countdown:1,2,3>6", "text:1+2="],
        "sample": [0, 1, 0],
        "score": [1.0, 0.0, 0.5],
        "length": [9, 24, 3],
        "truncated": [False, True, False],
    }
    path = write_eval_items(tmp_path / "run", columns)
    assert path.name == "eval_items.parquet"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left
    df = read_eval_items(tmp_path / "run")
    assert tuple(df.columns) == EVAL_ITEM_COLUMNS
    pd.testing.assert_frame_equal(df, pd.DataFrame(columns))


def test_eval_items_refuse_other_columns_and_report_corrupt_files(tmp_path):
    with pytest.raises(ValueError, match="eval items need the columns"):
        write_eval_items(tmp_path, {"block": ["accuracy"]})
    assert read_eval_items(tmp_path) is None and read_eval_items(None) is None
    (tmp_path / "eval_items.parquet").write_bytes(b"not parquet")
    with pytest.raises(StoreError, match="eval_items.parquet is unreadable"):
        read_eval_items(tmp_path)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """The shipped testbed student evaluated with several samples per item in every block."""
    cfg = load_run_config(
        None,
        [
            "task.max_new_tokens=24",
            "eval.items=5",
            "eval.samples_per_item=3",
            "eval.coverage_items=2",
            "eval.coverage_samples=4",
            "eval.harder_samples_per_item=2",
            "eval.skill_items=2",
            "eval.skill_samples_per_item=2",
        ],
    )
    run = tmp_path_factory.mktemp("run")
    student, _ = load_model(resolve_model_path("testbed:student"))
    return evaluate(cfg, run, student=student), read_eval_items(run)


def test_each_block_is_the_mean_over_items_and_samples(evaluated):
    out, df = evaluated
    counts = df.groupby("block").size()
    assert counts["accuracy"] == 5 * 3 and counts["coverage"] == 2 * 4
    assert counts["harder"] == 5 * 2 and counts["harder_coverage"] == 2 * 4
    skills = [b for b in counts.index if b.startswith("skill/")]
    assert skills and all(counts[b] == 2 * 2 for b in skills)
    acc = df[df.block == "accuracy"]
    assert list(zip(acc["item"], acc["sample"], strict=True)) == [
        (i, j) for i in range(5) for j in range(3)
    ]
    assert acc.groupby("item")["item_id"].nunique().eq(1).all()
    assert acc["item_id"].nunique() == 5
    assert out["eval/accuracy"] == pytest.approx(acc["score"].mean(), abs=1e-12)
    assert out["eval/len_mean"] == pytest.approx(acc["length"].mean(), abs=1e-12)
    harder = df[df.block == "harder"]["score"].mean()
    assert out["eval/harder_accuracy"] == pytest.approx(harder, abs=1e-12)
    after = df[df.block.str.startswith("skill/")].groupby("block")["score"].mean().mean()
    assert out["eval/skills_after"] == pytest.approx(after, abs=1e-12)
    assert out["eval/avg@4"] == pytest.approx(df[df.block == "coverage"]["score"].mean(), abs=1e-12)


def test_eval_json_says_which_protocol_the_run_used(evaluated):
    out, _ = evaluated
    assert out["eval/accuracy_samples"] == 3
    assert out["eval/harder_samples"] == 2
    assert out["eval/skill_samples"] == 2


SAMPLE_FIELDS = ("samples_per_item", "harder_samples_per_item", "skill_samples_per_item")


def test_the_sample_counts_at_one_leave_fingerprints_and_keys_as_they_were():
    one = load_run_config(None)
    _, fields = config_fingerprint(one.model_dump(mode="json"), version=1)  # a directory of v1
    key = json.loads(evaluation_key(one))
    for name in SAMPLE_FIELDS:
        assert ADDED_FIELDS[f"eval.{name}"].default == 1 and getattr(one.eval, name) == 1
        assert f"eval.{name}" not in fields and name not in key["eval"]
        more = load_run_config(None, [f"eval.{name}=4"])
        assert json.loads(evaluation_key(more))["eval"][name] == 4  # skills before: own key
        assert config_fingerprint(more.model_dump(mode="json"))[1][f"eval.{name}"] == 4


@pytest.mark.parametrize("name", SAMPLE_FIELDS)
def test_zero_samples_per_item_is_refused_naming_the_field(name):
    with pytest.raises(ConfigError, match=rf"^config: eval\.{name}: "):
        load_run_config(None, [f"eval.{name}=0"])
