"""Teacher and student checkpoints: loading local Hugging Face directories, vocabulary checks."""

from __future__ import annotations

from distillscope.models.load import (
    ModelLoadError,
    ModelPair,
    check_model_dir,
    load_model,
    load_pair,
    load_weights,
    resolve_dtype,
)
from distillscope.models.paths import resolve_model_path
from distillscope.models.vocab import (
    SpecialTokensWarning,
    TokenizerMismatchError,
    check_tokenizers_match,
    slice_logits,
    stop_token_ids,
)

__all__ = [
    "ModelLoadError",
    "ModelPair",
    "SpecialTokensWarning",
    "TokenizerMismatchError",
    "check_model_dir",
    "check_tokenizers_match",
    "load_model",
    "load_pair",
    "load_weights",
    "resolve_dtype",
    "resolve_model_path",
    "slice_logits",
    "stop_token_ids",
]
