"""``testbed build --like``: a tiny random copy keeps everything a run reads but the weights."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.models.load import load_model
from distillscope.models.vocab import stop_token_ids

runner = CliRunner()
KEPT = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def test_a_copy_keeps_tokenizer_template_stops_and_padded_vocabulary(tmp_path, padded_qwen_pair):
    teacher, student = padded_qwen_pair
    res = runner.invoke(
        app,
        ["testbed", "build", "--like", str(teacher), "--like", str(student)]
        + ["--out", str(tmp_path), "--hidden", "32"],
    )
    assert res.exit_code == 0, res.output
    for source in (teacher, student):
        copy = tmp_path / source.name
        src_cfg = json.loads((source / "config.json").read_text())
        cfg = json.loads((copy / "config.json").read_text())
        assert cfg["model_type"] == src_cfg["model_type"] == "qwen2"
        assert cfg["vocab_size"] == src_cfg["vocab_size"]  # 3,072 / 3,008: padding kept
        assert cfg["tie_word_embeddings"] == src_cfg["tie_word_embeddings"]
        assert (cfg["num_hidden_layers"], cfg["hidden_size"]) == (2, 32)
        for name in KEPT:  # byte for byte
            assert (copy / name).read_bytes() == (source / name).read_bytes(), name
        model, tok = load_model(copy)
        original, src_tok = load_model(source)
        assert tok.apply_chat_template(
            [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
        ) == src_tok.apply_chat_template(
            [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
        )
        stops = stop_token_ids([tok], [model])
        assert stops == stop_token_ids([src_tok], [original]) and len(stops) == 2
        assert model.get_output_embeddings().weight.shape[0] == src_cfg["vocab_size"]


def test_two_sources_of_one_name_and_a_used_out_are_refused(tmp_path, padded_qwen_pair):
    teacher, _ = padded_qwen_pair
    twice = ["testbed", "build", "--like", str(teacher), "--like", str(teacher)]
    res = runner.invoke(app, [*twice, "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "two sources are named" in res.output
    (tmp_path / "b" / teacher.name).mkdir(parents=True)
    (tmp_path / "b" / teacher.name / "x").write_text("")
    res = runner.invoke(
        app, ["testbed", "build", "--like", str(teacher), "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 2 and "is not empty" in res.output
