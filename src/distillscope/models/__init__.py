"""Teacher and student checkpoints: loading local Hugging Face directories, vocabulary checks.

Names load from their submodules on first use (:mod:`distillscope.lazy`): checking a model
directory (``check_model_dir``, ``resolve_model_path``) does not import torch. Importing this
package sets ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless the environment says
otherwise), as :mod:`.load` does, so nothing is ever downloaded.
"""

from __future__ import annotations

import os

from distillscope.lazy import lazy_exports

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers imports huggingface_hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "load": ("ModelPair", "load_model", "load_pair", "load_weights", "resolve_dtype"),
        "paths": ("ModelLoadError", "check_model_dir", "resolve_model_path"),
        "vocab": (
            "SpecialTokensWarning",
            "TokenizerMismatchError",
            "check_tokenizers_match",
            "slice_logits",
            "stop_token_ids",
        ),
    },
)
