"""Validating a config imports no torch: the config tree, the study spec and the CLI's checks.

Every package ``__init__`` re-exports only torch-free names, so reading a config, a preset or a
study file touches light modules only; a bad file or override is refused in a fraction of a
second (issue 36 item 7), before the training stack is imported. Each check runs in a fresh
interpreter and reads ``sys.modules`` (no timing).
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import distillscope

HEAVY = ("torch", "transformers")


def _modules(script: str, *args: str) -> list[str]:
    """``sorted(sys.modules)`` after ``script`` ran in a fresh interpreter (its last line)."""
    out = subprocess.run(
        [sys.executable, "-c", script + "\nprint(json.dumps(sorted(sys.modules)))", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


CONFIG_TREE = """
import json, sys
from distillscope.config import (
    ConfigError, RunConfig, check_machine, dump_run_config, load_run_config, run_config_from_dict
)
from distillscope.study.spec import StudySpec, expand, load_spec
spec = load_spec("paper-qwen", ["model.teacher=/m/t", "model.student=/m/s"])
assert isinstance(StudySpec.model_validate(spec.model_dump(mode="json")), StudySpec)
runs = expand(spec)
cfg = runs[0].config
assert isinstance(cfg, RunConfig) and len(runs) > 10
again = run_config_from_dict(cfg.model_dump(mode="json"), "round trip")
assert load_run_config(None, ["rollout.policy=spectrum", "rollout.lam=0.5"]).rollout.lam == 0.5
check_machine(load_run_config(None))
assert dump_run_config(again) == dump_run_config(cfg)
try:
    load_run_config(None, ["optim.lrr=1"])
except ConfigError as err:
    assert "optim.lrr" in str(err)
"""


def test_loading_and_validating_configs_and_studies_imports_no_torch():
    modules = _modules(CONFIG_TREE)
    assert "distillscope.objectives.registry" in modules
    assert "distillscope.rollout.policy_registry" in modules
    assert not [m for m in modules if m in HEAVY]


def test_importing_any_package_imports_no_torch():
    """The one import style: a package ``__init__`` re-exports torch-free names only."""
    packages = [
        m.name for m in pkgutil.iter_modules(distillscope.__path__, "distillscope.") if m.ispkg
    ]
    assert {"distillscope.rollout", "distillscope.objectives", "distillscope.train"} <= set(
        packages
    )
    modules = _modules(
        "import json, sys, importlib\n"
        + "".join(f"importlib.import_module({p!r})\n" for p in packages)
    )
    assert not [m for m in modules if m in HEAVY]


CLI_CHECK = """
import json, sys
from distillscope.cli import app
code = app(sys.argv[1:], standalone_mode=False)  # the exit code, as the console script's
assert code == 2, code
"""


def test_the_cli_refuses_a_bad_config_before_importing_torch(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("optim:\n  lrr: 0.1\n")
    out = str(tmp_path / "out")
    run = tmp_path / "run"  # a trained run whose config.yaml was edited by hand
    (run / "checkpoint").mkdir(parents=True)
    (run / "checkpoint" / "model.safetensors").write_bytes(b"")
    (run / "config.yaml").write_text(bad.read_text())
    for argv in (
        ["eval", str(run)],
        ["train", str(bad), "--out", out],
        ["train", "optim.lr=fast", "--out", out],
        ["study", "--preset", "smoke", "--out", out, "optim.lrr=3"],
        ["study", "plan", "--preset", "smoke", "optim.lrr=3"],
    ):
        modules = _modules(CLI_CHECK, *argv)
        assert not [m for m in modules if m in HEAVY], argv
        assert "distillscope.study.run_one" not in modules, argv
    assert not Path(out).exists()
