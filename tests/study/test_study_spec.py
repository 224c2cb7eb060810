import pytest

from distillscope.config import (
    ConfigError,
    DatasetConfig,
    ForgettingConfig,
    LogConfig,
    LoraConfig,
    ObjectiveConfig,
    RLVRConfig,
    TeacherServerConfig,
)
from distillscope.config.model import RouteConfig
from distillscope.study.spec import StudySpec, expand, load_spec, run_id


def spec(**over):
    data = {
        "name": "t",
        "base": {"optim": {"steps": 3}},
        "experiments": [
            {
                "name": "main",
                "axes": {
                    "rollout.policy": ["student", "teacher"],
                    "optim.lr": {"low": 1e-4, "high": 1e-3},
                    "seed": [1, 2],
                },
            }
        ],
    }
    data.update(over)
    return StudySpec.model_validate(data)


def test_axes_cross_into_runs_with_labels_and_configs():
    runs = expand(spec())
    assert len(runs) == 8
    first = runs[0]
    assert first.axes == {"rollout.policy": "student", "optim.lr": 1e-4, "seed": 1}
    assert first.labels == {"lr_label": "low"}
    assert first.config.optim.steps == 3 and first.config.optim.lr == 1e-4
    assert {r.config.rollout.policy for r in runs} == {"student", "teacher"}


def test_any_axis_can_be_labelled():
    runs = expand(
        spec(experiments=[{"name": "t", "axes": {"rollout.student_temperature": {"cool": 0.7}}}])
    )
    assert runs[0].labels == {"student_temperature_label": "cool"}
    assert runs[0].config.rollout.student_temperature == 0.7


def test_a_labelled_axis_whose_label_column_is_ambiguous_is_refused():
    clash = spec(
        experiments=[
            {
                "name": "t",
                "axes": {"rollout.student_temperature": {"cool": 0.7}},
            },
            {"name": "u", "axes": {"objective.student_temperature": [0.5]}},
        ]
    )
    with pytest.raises(ConfigError, match="experiment t.*student_temperature.*last name"):
        expand(clash)


def test_run_ids_are_stable_unique_and_filesystem_safe():
    a, b = expand(spec()), expand(spec())
    assert [r.run_id for r in a] == [r.run_id for r in b]
    assert len({r.run_id for r in a}) == len(a)
    for r in a:
        assert all(c.isalnum() or c in "_.+-" for c in r.run_id)
    cfg = a[0].config
    # a path is named by its last part (its whole text is in the hash)
    assert run_id("main", {"model.teacher": "/x/y z"}, cfg).startswith("main_teacher-y-z_")
    assert run_id("main", {"model.teacher": "/x/y z"}, cfg) != run_id(
        "main",
        {"model.teacher": "/w/y z"},
        cfg.model_copy(update={"model": cfg.model.model_copy(update={"teacher": "/w/y z"})}),
    )


def test_bad_axis_value_names_the_experiment_and_field():
    bad = spec(experiments=[{"name": "main", "axes": {"rollout.policy": ["sideways"]}}])
    with pytest.raises(ConfigError, match="experiment main.*rollout.policy"):
        expand(bad)


def test_presets_load_and_expand():
    smoke = expand(load_spec("smoke"))
    assert 2 <= len(smoke) <= 8
    quick = expand(load_spec("quick"))
    assert len(quick) == 16
    cells = {
        (r.config.rollout.policy, r.config.objective.kind, r.labels["lr_label"]) for r in quick
    }
    assert len(cells) == 8
    for name in ("paper", "paper-llama", "paper-qwen"):
        assert expand(load_spec(name))


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError, match="quick"):
        load_spec("nonexistent-preset")


def test_command_line_overrides_apply_to_every_run_of_a_preset():
    spec = load_spec("paper-qwen", ["model.teacher=/m/t", "model.student=/m/s"])
    runs = expand(spec)
    assert len(runs) == len(expand(load_spec("paper-qwen")))
    modest = [r for r in runs if r.axes.get("teacher") == "modest"]  # teacher_scale's own
    assert len(modest) == 6 and {r.config.model.teacher for r in modest} == {
        "/models/Qwen2.5-3B-Instruct"
    }
    pairs = {(r.config.model.teacher, r.config.model.student) for r in runs if r not in modest}
    assert pairs == {("/m/t", "/m/s")} and {r.config.model.student for r in modest} == {"/m/s"}
    with pytest.raises(ConfigError, match="optim.lr is an axis of experiment main"):
        load_spec("paper-qwen", ["optim.lr=1e-4"])


def test_fields_added_later_leave_earlier_ids_and_fingerprints_alone():
    """A field added with a behaviour-preserving default does not rename or refuse old runs."""
    import hashlib

    from distillscope.store import config_fingerprint
    from distillscope.store_versions import ADDED_FIELDS

    held = {
        "task.dataset": DatasetConfig(path="org/name"),
        "task.fields": {"a": "b"},
        "task.teacher_instruction": "Reason in Spanish.",
        "eval.style_language": "es",
        "eval.forgetting": ForgettingConfig(confirm_run_unsafe_code=True),
        "model.lora": LoraConfig(),
        "model.teacher_server": TeacherServerConfig(timeout_s=5.0),
        "model.teacher_cache": "/caches/teacher",
        "model.teachers": {"a": "/m/a", "b": "/m/b"},
        "model.route": RouteConfig(by="task"),
        "rlvr": RLVRConfig(parent="main_x"),
        "log": LogConfig(trackers=["tensorboard"]),
        "rollout.engine": "vllm",
        "rollout.engine_is_cap": 3.0,
        "rollout.engine_gpu_memory": 0.5,
    }

    def other(default, dotted):  # a value other than the default, of its type
        if default is None or dotted in held:  # null by default, or given: a value it can hold
            return held[dotted]
        if isinstance(default, bool):
            return not default
        if isinstance(default, list):
            return [*default, 0]
        return default + 1 if isinstance(default, int) else {"paper": "policies"}[default]

    cfg = expand(spec())[0].config
    # the config as a version without any of the added fields wrote it
    old_dump = cfg.model_dump(mode="json")
    exclude: dict[str, set[str]] = {}
    sections = {d for d in ADDED_FIELDS if "." not in d}  # whole sections, null by default
    for dotted in ADDED_FIELDS:
        if dotted in sections:
            del old_dump[dotted]
            exclude[dotted] = True
            continue
        section, name = dotted.split(".")
        del old_dump[section][name]
        exclude.setdefault(section, set()).add(name)
    old_json = cfg.model_dump_json(exclude=exclude)
    prefix = run_id("main", {}, cfg).rsplit("_", 1)[0]
    old_id = f"{prefix}_{hashlib.sha256(old_json.encode()).hexdigest()[:8]}"
    assert run_id("main", {}, cfg) == old_id

    def v1(data):  # the fingerprint a directory of schema version 1 records
        return config_fingerprint(data, version=1)[0]

    assert v1(cfg.model_dump(mode="json")) == v1(old_dump)
    for dotted, added in ADDED_FIELDS.items():
        if dotted in sections:  # set: the run is another kind of run
            changed = cfg.model_copy(update={dotted: held[dotted]})
            assert run_id("main", {}, changed) != old_id
            data = changed.model_dump(mode="json")
            assert v1(data) != v1(old_dump)
            continue
        section, name = dotted.split(".")
        data = cfg.model_dump(mode="json")
        value = other(added.default, dotted)
        data[section][name] = value.model_dump() if hasattr(value, "model_dump") else value
        # set: it changes the run, so it counts (unvalidated: some are read only with other
        # settings, e.g. OPD's under kind=opd)
        part = getattr(cfg, section).model_copy(update={name: value})
        changed = cfg.model_copy(update={section: part})
        assert run_id("main", {}, changed) != old_id
        assert v1(data) != v1(old_dump)


def test_run_ids_are_pinned_so_a_new_field_cannot_rename_earlier_runs():
    """Ids written by earlier versions (these two by 0.x of 2026-12-01): a field added without
    its entry in store_versions.ADDED_FIELDS changes every id, and a study on disk would re-run."""
    s = StudySpec.model_validate(
        {
            "name": "golden",
            "base": {"optim": {"steps": 5}},
            "experiments": [
                {"name": "main", "axes": {"rollout.policy": ["student", "teacher"], "seed": [42]}}
            ],
        }
    )
    assert [r.run_id for r in expand(s)] == [
        "main_policy-student_seed-42_1bf19d66",
        "main_policy-teacher_seed-42_4e417510",
    ]


def test_the_weighted_divergences_ids_and_the_objective_field_order_are_pinned():
    """A run id hashes the dumped config in field order: the objective's weight fields, generated
    from the registry's declarations (config/objective.py), sit where the hand-written β and α
    sat, and these ids (computed by the code before the fields were generated) stay."""
    assert list(ObjectiveConfig.model_fields) == [
        "kind", "student_temperature", "teacher_temperature", "reduction", "beta", "alpha",
        "path", "memory_budget_mb", "chunk_size", "teacher_topk", "regulation", "clip_min",
        "clip_max", "eps_low", "eps_high", "updates_per_batch", "tempered_teacher",
    ]  # fmt: skip
    s = StudySpec.model_validate(
        {
            "name": "golden",
            "base": {"optim": {"steps": 5}},
            "experiments": [
                {
                    "name": "jsd",
                    "overrides": {"objective.kind": "jsd"},
                    "axes": {"objective.beta": [0.5, 0.3]},
                },
                {
                    "name": "mix",
                    "overrides": {"objective.kind": "mixture"},
                    "axes": {"objective.alpha": [0.5, 0.7]},
                },
            ],
        }
    )
    assert [r.run_id for r in expand(s)] == [
        "jsd_beta-0.5_f99af79a",
        "jsd_beta-0.3_772a3c74",
        "mix_alpha-0.5_b20457d2",
        "mix_alpha-0.7_14c30aa4",
    ]
