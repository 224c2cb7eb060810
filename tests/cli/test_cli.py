from typer.testing import CliRunner

from distillscope.cli import app

runner = CliRunner()


def test_bad_override_is_one_clear_line(tmp_path):
    res = runner.invoke(
        app, ["train", "--out", str(tmp_path / "r"), "--", "rollout.policy=sideways"]
    )
    assert res.exit_code == 2
    assert "rollout.policy" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()  # nothing written for a config that never validated


def test_missing_config_file_is_named(tmp_path):
    res = runner.invoke(app, ["train", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "nope.yaml" in res.output


def test_an_error_keeps_its_brackets(tmp_path):
    """The message is printed as text, not rich markup: ``[lora]`` in a path (or an extra's
    name) is not swallowed as a style tag."""
    missing = tmp_path / "student[lora]"
    res = runner.invoke(app, ["train", "--out", str(tmp_path / "r"), f"model.student={missing}"])
    assert res.exit_code == 2 and "student[lora]" in res.output


def test_eval_of_a_directory_without_checkpoint(tmp_path):
    res = runner.invoke(app, ["eval", str(tmp_path)])
    assert res.exit_code == 2 and "no trained checkpoint" in res.output


def test_study_status_and_report_need_a_study_dir(tmp_path):
    res = runner.invoke(app, ["study", "status", str(tmp_path)])
    assert res.exit_code == 2 and "not a study directory" in res.output
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "results.parquet" in res.output


def test_unknown_preset_lists_presets(tmp_path):
    res = runner.invoke(app, ["study", "--preset", "huge", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "quick" in res.output


def test_testbed_info_prints_sizes_and_accuracies():
    res = runner.invoke(app, ["testbed", "info"])
    assert res.exit_code == 0, res.output
    assert "teacher" in res.output and "parameters" in res.output and "Countdown-3" in res.output
