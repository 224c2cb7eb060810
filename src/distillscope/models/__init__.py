"""Teacher and student checkpoints: loading local Hugging Face directories, vocabulary checks.

Names load from their submodules on first use (:mod:`distillscope.lazy`): checking a model
directory (``check_model_dir``, ``resolve_model_path``) does not import torch. Importing this
package sets ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless the environment says
otherwise), as :mod:`.load` does, so nothing is ever downloaded.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from distillscope.lazy import lazy_exports

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers imports huggingface_hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

if TYPE_CHECKING:
    # The public names, one list: editors read these imports, lazy_exports parses them.
    from distillscope.models.load import (  # noqa: F401
        ModelPair,
        load_model,
        load_options,
        load_pair,
        load_weights,
        pair_options,
        resolve_dtype,
    )
    from distillscope.models.paths import (  # noqa: F401
        ModelLoadError,
        check_model_dir,
        resolve_model_path,
    )
    from distillscope.models.vocab import (  # noqa: F401
        SpecialTokensWarning,
        TokenizerMismatchError,
        check_tokenizers_match,
        slice_logits,
        stop_token_ids,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
