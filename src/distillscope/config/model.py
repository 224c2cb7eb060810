"""``model``: the student, the teacher (a local model or an OpenAI-compatible server,
docs/scaling.md), several teachers routed per prompt (docs/teachers.md) and the student's
optional LoRA adapters."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import Field, model_validator

from distillscope.config.base import ConfigError, Float, Int, _Section
from distillscope.safeyaml import quote


class LoraConfig(_Section):
    """LoRA adapters on the student (peft): only the adapters train; ``RUN/student/`` holds the
    adapters merged into the base weights (docs/scaling.md "LoRA students")."""

    r: Int = Field(8, ge=1, description="rank of each adapter's update B·A")
    alpha: Float = Field(16.0, gt=0, description="scale numerator: the update is (alpha / r)·B·A")
    dropout: Float = Field(
        0.0, ge=0, lt=1, description="dropout on the adapters' input (0 = resumes bit for bit)"
    )
    target_modules: list[str] = Field(
        ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="names of the student's linear layers that get an adapter",
    )

    def preflight(self) -> None:
        """Refuse, before anything runs, a LoRA run without peft (one line naming the extra)."""
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            raise ConfigError(LORA_MISSING)


#: The one line a run with ``model.lora`` fails with when peft is not installed.
LORA_MISSING = "model.lora needs peft, which is not installed: pip install 'distillscope[lora]'"


class TeacherServerConfig(_Section):
    timeout_s: Float = Field(60.0, gt=0, description="seconds one request may take")
    retries: Int = Field(3, ge=0, description="retries of a failed request (exponential backoff)")
    backoff_s: Float = Field(0.5, ge=0, description="first retry's wait; each later one doubles")
    api_key_env: str | None = Field(
        None, description="environment variable holding the server's API key; null = none"
    )


def teacher_specs_of(teacher: str, teachers: dict[str, str] | None) -> dict[str, str]:
    """Every teacher a run reads, name → directory, URL or cache: ``teachers`` (a routed run's
    ``model.teachers``), else the one ``teacher`` under the name ``teacher`` — the unused
    default of a routed run is not a teacher of it. The one description of a run's teachers:
    configs (:meth:`ModelConfig.teacher_specs`), plans and reports (from a results row) read it.
    """
    return dict(teachers) if teachers else {"teacher": teacher}


def teachers_text_of(teacher: str, teachers: dict[str, str] | None) -> str:
    """A run's teachers (:func:`teacher_specs_of`) as a plan or a table shows them: the one
    ``teacher``'s value, or ``name=value, …`` of routed ``teachers``."""
    if not teachers:
        return teacher
    return ", ".join(f"{name}={spec}" for name, spec in teacher_specs_of(teacher, teachers).items())


def served_url(spec: str) -> bool:
    """Whether a ``model.teacher`` value names a server (``http://`` or ``https://``)."""
    return spec.startswith(("http://", "https://"))


def _check_server_url(url: str, field: str = "model.teacher") -> None:
    """ValueError unless a served teacher's URL (of ``field``) is http(s) with a host and no
    credentials, query or fragment."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{field}: a server URL must not carry credentials; use "
            "model.teacher_server.api_key_env"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"{field}: {quote(url, 60)} has a bad port") from None
    if not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{field}: {quote(url, 60)} is not a server URL (http(s)://HOST:PORT/v1)")


#: A routed teacher's name: it becomes part of metric keys (``teacher/<name>/loss``).
TEACHER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


class RouteConfig(_Section):
    """How each prompt of a run with ``model.teachers`` finds its teacher (docs/teachers.md):
    a task-file column naming it, the task (the teacher named like the run's task), or a fixed
    mixture drawn per prompt from the run's seed."""

    by: Literal["column", "task", "mixture"] = Field(
        description="column: a task-file column names each row's teacher; task: the teacher "
        "named like task.name; mixture: drawn per prompt with model.route.weights"
    )
    column: str = Field("teacher", description="by=column: the task-file column")
    weights: dict[str, Float] | None = Field(
        None, description="by=mixture: teacher name → weight (> 0; normalised)"
    )

    @model_validator(mode="after")
    def _weights(self) -> RouteConfig:
        mixture = self.by == "mixture"
        self._ignored("model.route", {"column": self.by == "column"}, f"model.route.by={self.by}")
        if mixture != (self.weights is not None):
            raise ValueError(
                "model.route.weights is set with model.route.by=mixture, and only then"
            )
        if mixture and (not self.weights or any(w <= 0 for w in self.weights.values())):
            raise ValueError("model.route.weights: give each teacher a weight > 0")
        return self

    def teacher_of(self, problem: Any, task: str, seed: int) -> str:
        """The teacher ``problem`` (a :class:`~distillscope.tasks.base.Problem` of task
        ``task``) reads: its row's column, the teacher named ``task``, or the mixture's draw
        (:func:`mixture_teacher`) for its prompt under ``seed``."""
        if self.by == "task":
            return task
        if self.by == "column":
            return str(problem.meta["extra"][self.column])
        return mixture_teacher(seed, problem.prompt, self.weights)


def mixture_teacher(seed: int, prompt: str, weights: dict[str, float]) -> str:
    """The teacher a mixture gives ``prompt``: the first name whose cumulative weight share
    exceeds u = sha256(seed ⧺ prompt)[:8] / 2⁶⁴ ∈ [0, 1) — the same in every step and every
    run of one seed, whatever else the run varies."""
    digest = hashlib.sha256(f"{seed}\0{prompt}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    total, cumulative = sum(weights.values()), 0.0
    for name, weight in weights.items():
        cumulative += weight / total
        if u < cumulative:
            return name
    return name  # u within rounding of 1: the last teacher


def check_teachers(teachers: dict[str, str], route: RouteConfig) -> None:
    """ValueError (one line naming the field) unless every name is a metric-key-safe word, every
    URL a server URL, and the mixture's weights name teachers of ``teachers``."""
    if not teachers:
        raise ValueError("model.teachers: name at least one teacher")
    for name, spec in teachers.items():
        if not TEACHER_NAME.fullmatch(name):
            raise ValueError(
                f"model.teachers: name {quote(name, 40)} must be letters, digits, _ . - "
                "(up to 40, first a letter or digit)"
            )
        if served_url(spec):
            _check_server_url(spec, f"model.teachers.{name}")
    unknown = sorted(set(route.weights or {}) - set(teachers))
    if unknown:
        raise ValueError(
            f"model.route.weights names {quote(unknown[0], 40)}, not one of model.teachers "
            f"({', '.join(teachers)})"
        )


class ModelConfig(_Section):
    teacher: str = Field(
        "testbed:teacher",
        description="teacher HF directory, testbed:teacher, or an OpenAI-compatible server's "
        "URL (http://HOST:PORT/v1: top-k prompt log-probs; docs/scaling.md)",
    )
    student: str = Field("testbed:student", description="student HF directory, or testbed:student")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="student weights dtype (training keeps fp32 softmax either way)"
    )
    teacher_dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="teacher weights dtype (inference only)"
    )
    device: str = Field("cpu", description="torch device of the student, e.g. cpu or cuda:0")
    teacher_device: str | None = Field(
        None, description="torch device of the teacher, e.g. cuda:1; null = model.device"
    )
    autocast: Literal["auto", "bfloat16", "off"] = Field(
        "auto",
        description="bf16 autocast around forwards (weights stay in model.dtype); auto = on CUDA",
    )
    low_precision_weights: bool = Field(
        False,
        description="accept training a bf16/fp16 student without fp32 master weights (labelled)",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute the student's layer activations in backward (less memory)"
    )
    allow_pickle: bool = Field(False, description="allow loading pickled .bin weights")
    trust_remote_code: bool = Field(False, description="let transformers run model code")
    lora: LoraConfig | None = Field(
        None,
        description="LoRA adapters {r, alpha, dropout, target_modules} train instead of every "
        "weight (extra lora); null = full fine-tuning",
    )
    teacher_server: TeacherServerConfig | None = Field(
        None, description="a served teacher's connection settings; null = the defaults"
    )
    teacher_cache: str | None = Field(
        None,
        description="directory of a teacher cache (distillscope teacher-cache build) whose "
        "rollouts and top-k scores an off-policy run reads instead of model.teacher's; null = "
        "none (docs/scaling.md)",
    )
    teachers: dict[str, str] | None = Field(
        None,
        description="several teachers, name → HF directory, testbed:teacher, server URL or "
        "teacher-cache directory, each prompt routed by model.route (replaces model.teacher; "
        "docs/teachers.md); null = the one model.teacher",
    )
    route: RouteConfig | None = Field(
        None,
        description="with model.teachers: {by: column, column} | {by: task} | {by: mixture, "
        "weights}; null = one teacher",
    )

    @model_validator(mode="after")
    def _routed(self) -> ModelConfig:
        if (self.teachers is None) != (self.route is None):
            raise ValueError("model.teachers and model.route are set together (docs/teachers.md)")
        if self.teachers is not None:
            check_teachers(self.teachers, self.route)
            setting = "model.teachers (each teacher's value names it)"
            self._ignored("model", {"teacher": False, "teacher_cache": False}, setting)
        return self

    @model_validator(mode="after")
    def _served(self) -> ModelConfig:
        # checked here, not in a field validator, so that the error never echoes the URL
        served = served_url(self.teacher)
        if served:
            _check_server_url(self.teacher)
            if self.teacher_cache is not None:
                raise ValueError("model.teacher_cache is built from a local model.teacher")
        specs = list(self.teachers.values()) if self.teachers else [self.teacher]
        local, any_served = not all(map(served_url, specs)), any(map(served_url, specs))
        reads = {"teacher_dtype": local, "teacher_device": local}
        setting = f"a {'served' if served else 'local'} model.teacher"
        if self.teachers:
            setting = "model.teachers" + (" (all served)" if not local else " (none served)")
        self._ignored("model", {**reads, "teacher_server": any_served}, setting)
        return self

    def teacher_specs(self) -> dict[str, str]:
        """Every teacher the run reads, name → directory, URL or cache: ``model.teachers``, or
        the one ``model.teacher`` under the name ``teacher`` (the unused default of a routed
        run is not a teacher of it)."""
        return teacher_specs_of(self.teacher, self.teachers)

    def teachers_text(self) -> str:
        """The run's teachers as a plan or a table shows them: ``model.teacher``'s value, or
        ``name=value, …`` of ``model.teachers``."""
        return teachers_text_of(self.teacher, self.teachers)

    def server(self) -> TeacherServerConfig:
        """The served teacher's connection settings (the defaults when unset)."""
        return self.teacher_server or TeacherServerConfig()
