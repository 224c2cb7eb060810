"""Teacher and student checkpoints: loading local Hugging Face directories, vocabulary checks.

The package re-exports its torch-free names only: checking a model directory
(``check_model_dir``, ``resolve_model_path``) does not import torch; loading one is
``from distillscope.models.load import load_model``. Importing this package sets
``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless the environment says otherwise), as
:mod:`.load` does, so nothing is ever downloaded.
"""

import os

from distillscope.models.paths import ModelLoadError, check_model_dir, resolve_model_path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers imports huggingface_hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

__all__ = ["ModelLoadError", "check_model_dir", "resolve_model_path"]
