"""One typed config tree: every run — from the CLI, a preset or a study grid — is a ``RunConfig``.

Each field carries a one-line description; ``distillscope config`` lists every field with its
type, default and that text (:func:`config_fields`).
Unknown keys and bad values are rejected on load with a message that names the field and the
allowed values (``load_run_config``).

One module per section, every name imported from here: ``base`` (``ConfigError``, the strict
number types, the sections' shared base), ``model`` (student, teacher — local or served — and
LoRA), ``task`` (the task and its dataset rows), ``rollout``, ``objective`` (the loss and the
optimizer), ``eval`` (held-out metrics and the forgetting suite), ``run`` (RLVR, trackers and
``RunConfig`` with the rules that span sections) and ``load`` (YAML and overrides, the field
listing, the resolved dump, the machine check and the evaluation key).
"""

from __future__ import annotations

from distillscope.config.eval import (
    CODE_EXECUTING_TASKS,
    HARNESS_MISSING,
    PAPER_FORGETTING_LIMITS,
    EvalConfig,
    ForgettingConfig,
    PositiveInt,
)
from distillscope.config.model import (
    LORA_MISSING,
    LoraConfig,
    ModelConfig,
    TeacherServerConfig,
    served_url,
)
from distillscope.config.objective import ObjectiveConfig, OptimConfig
from distillscope.config.parse import (
    apply_overrides,
    check_machine,
    config_fields,
    dump_run_config,
    evaluation_key,
    load_run_config,
    parse_override,
    run_config_from_dict,
)
from distillscope.config.rollout import RolloutConfig
from distillscope.config.run import TRACKER_MISSING, TRACKERS, LogConfig, RLVRConfig, RunConfig
from distillscope.config.section import ConfigError, Float, Int
from distillscope.config.task import DatasetConfig, TaskConfig

__all__ = [
    "CODE_EXECUTING_TASKS",
    "HARNESS_MISSING",
    "LORA_MISSING",
    "PAPER_FORGETTING_LIMITS",
    "TRACKERS",
    "TRACKER_MISSING",
    "ConfigError",
    "DatasetConfig",
    "EvalConfig",
    "Float",
    "ForgettingConfig",
    "Int",
    "LogConfig",
    "LoraConfig",
    "ModelConfig",
    "ObjectiveConfig",
    "OptimConfig",
    "PositiveInt",
    "RLVRConfig",
    "RolloutConfig",
    "RunConfig",
    "TaskConfig",
    "TeacherServerConfig",
    "apply_overrides",
    "check_machine",
    "config_fields",
    "dump_run_config",
    "evaluation_key",
    "load_run_config",
    "parse_override",
    "run_config_from_dict",
    "served_url",
]
