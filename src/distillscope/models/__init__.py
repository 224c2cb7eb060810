"""Teacher and student checkpoints: loading local Hugging Face directories, vocabulary checks.

The package re-exports its torch-free names only: checking a model directory
(``check_model_dir``, ``resolve_model_path``) does not import torch; loading one is
``from distillscope.models.load import load_model``. Importing the package (through
:mod:`.locate`) sets ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless the environment says
otherwise), so nothing is ever downloaded.
"""

from distillscope.models.locate import ModelLoadError, check_model_dir, resolve_model_path

__all__ = ["ModelLoadError", "check_model_dir", "resolve_model_path"]
