"""A preset is one YAML file in ``presets/`` (docs/architecture.md "Adding a preset"): dropped
into the folder, it is listed, shown, planned and run by name with no other edit."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.study import spec as spec_module
from distillscope.study.spec import expand, load_spec

runner = CliRunner()


def test_a_preset_added_to_the_folder_is_found_everywhere_a_name_is(tmp_path, monkeypatch):
    shipped = spec_module.PRESETS_DIR
    for path in shipped.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    text = (shipped / "smoke.yaml").read_text().replace("name: smoke", "name: tiny-demo", 1)
    text = text.replace("A handful of short runs", "Hello from a new preset: a handful of runs", 1)
    (tmp_path / "tiny-demo.yaml").write_text(text)
    monkeypatch.setattr(spec_module, "PRESETS_DIR", tmp_path)

    assert "tiny-demo" in spec_module.preset_names()
    listed = runner.invoke(app, ["presets"], terminal_width=200)
    assert listed.exit_code == 0 and "Hello from a new preset" in listed.output, listed.output
    shown = runner.invoke(app, ["presets", "show", "tiny-demo"])
    assert shown.exit_code == 0 and shown.output == text
    ours, smoke = expand(load_spec("tiny-demo")), expand(load_spec("smoke"))
    assert [r.run_id for r in ours] == [r.run_id for r in smoke]  # the grid is the file's
    unknown = runner.invoke(app, ["presets", "show", "nope"])
    assert unknown.exit_code == 2 and "tiny-demo" in unknown.output
