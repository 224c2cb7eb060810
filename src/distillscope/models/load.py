"""Load teacher and student checkpoints from local Hugging Face model directories.

A model directory holds ``config.json``, safetensors weights (``model.safetensors`` or the
sharded ``model.safetensors.index.json``) and tokenizer files — what ``save_pretrained`` writes
and what the Hub serves. Pickled weights (``pytorch_model.bin``) can run arbitrary code when
unpickled, so they are refused unless the caller passes ``allow_pickle=True``; code shipped with
a checkpoint is never run unless ``trust_remote_code=True``. Nothing is downloaded: every
Hugging Face call passes ``local_files_only=True`` and importing this module sets
``HF_HUB_OFFLINE=1`` (unless the environment already says otherwise), so a missing local path is
an error naming it, never a request to a model hub.

    from distillscope.models.load import load_pair
    from distillscope.models.vocab import slice_logits
    pair = load_pair("ckpt/Qwen2.5-7B-Instruct", "ckpt/Qwen2.5-1.5B-Instruct", dtype="bfloat16")
    logits_B_T_V = slice_logits(pair.student(tokens_B_T).logits, pair.vocab_size)
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers imports huggingface_hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from distillscope.models.locate import ModelLoadError, check_model_dir
from distillscope.models.vocab import shared_vocabulary

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass
class ModelPair:
    """A frozen teacher and a student that share one tokenizer.

    Attributes:
        teacher: in eval mode, every parameter with ``requires_grad=False``.
        student: as loaded (``from_pretrained`` leaves it in eval mode; call ``.train()``).
        tokenizer: the student's tokenizer (identical to the teacher's vocabulary and specials).
        vocab_size: ``len(tokenizer)``; slice both models' logits to it (:func:`slice_logits`).
        teacher_tokenizer: the teacher's own tokenizer (same vocabulary; its chat template and
            special tokens may differ, e.g. an Instruct teacher of a base student).
        stop_ids: every id that ends a completion, for either model (:func:`stop_token_ids`).
    """

    teacher: PreTrainedModel
    student: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    vocab_size: int
    teacher_tokenizer: PreTrainedTokenizerBase | None = None
    stop_ids: tuple[int, ...] = ()


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32" | "bfloat16" | "float16"`` or a ``torch.dtype`` → the ``torch.dtype``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}") from None


def load_model(
    path: str | os.PathLike,
    *,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` from a local Hugging Face directory.

    The model is an ``AutoModelForCausalLM`` with parameters in ``dtype`` on ``device``, in eval
    mode. Safetensors only unless ``allow_pickle``; never downloads. Raises
    :class:`ModelLoadError` (one sentence naming the path) for a missing directory,
    ``config.json``, weights or tokenizer, for pickle-only weights, and for load failures.
    """
    root = check_model_dir(path, allow_pickle)
    torch_dtype = resolve_dtype(dtype)
    hf_logging.disable_progress_bar()  # distillscope shows its own progress bars
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            root, trust_remote_code=trust_remote_code, local_files_only=True
        )
    except Exception as err:  # transformers raises many types; the cause stays chained
        raise ModelLoadError(f"cannot load the tokenizer of {root}: {_first_line(err)}") from err
    if tokenizer.pad_token is None:
        # Llama 3 ships without a pad token; padding positions are always masked, so EOS serves.
        tokenizer.pad_token = tokenizer.eos_token
    try:
        # transformers ≥ 5 takes `dtype=` (`torch_dtype=` is deprecated). use_safetensors=None
        # prefers safetensors and falls back to pytorch_model.bin; True never unpickles.
        model = AutoModelForCausalLM.from_pretrained(
            root,
            dtype=torch_dtype,
            use_safetensors=None if allow_pickle else True,
            trust_remote_code=trust_remote_code,
            local_files_only=True,
        )
    except Exception as err:
        raise ModelLoadError(f"cannot load the model in {root}: {_first_line(err)}") from err
    return model.to(device), tokenizer


def load_options(model: Any) -> dict[str, Any]:
    """:func:`load_model`'s keyword arguments for the student of a config's ``model`` section
    (:class:`~distillscope.config.ModelConfig`): dtype, device, pickle and remote-code policy."""
    return {
        "dtype": model.dtype,
        "device": model.device,
        "allow_pickle": model.allow_pickle,
        "trust_remote_code": model.trust_remote_code,
    }


def pair_options(model: Any) -> dict[str, Any]:
    """:func:`load_pair`'s keyword arguments for a config's ``model`` section: the student's
    (:func:`load_options`) plus the teacher's own dtype and device (the student's by default)."""
    return {
        **load_options(model),
        "teacher_dtype": model.teacher_dtype,
        "teacher_device": model.teacher_device or model.device,
    }


def load_pair(
    teacher_path: str | os.PathLike,
    student_path: str | os.PathLike,
    *,
    teacher_dtype: str | torch.dtype | None = None,
    teacher_device: str | torch.device | None = None,
    **kw: Any,
) -> ModelPair:
    """Load a teacher and a student, freeze the teacher, and check that they share a tokenizer.

    ``kw`` (``dtype``, ``device``, ``allow_pickle``, ``trust_remote_code``) goes to
    :func:`load_model` for both; ``teacher_dtype`` / ``teacher_device`` override ``dtype`` /
    ``device`` for the teacher only (e.g. a bf16 teacher on its own GPU). Raises
    :class:`~distillscope.models.vocab.TokenizerMismatchError` naming both paths when the
    vocabularies differ (special tokens that differ only warn), and :class:`ModelLoadError`
    when a model's output layer is narrower than the shared tokenizer.
    """
    teacher_kw = dict(kw)
    if teacher_dtype is not None:
        teacher_kw["dtype"] = teacher_dtype
    if teacher_device is not None:
        teacher_kw["device"] = teacher_device
    teacher, teacher_tok = load_model(teacher_path, **teacher_kw)
    student, student_tok = load_model(student_path, **kw)
    vocab_size, stop_ids = shared_vocabulary(
        teacher, student, teacher_tok, student_tok, (str(teacher_path), str(student_path))
    )
    teacher.eval()
    teacher.requires_grad_(False)
    return ModelPair(
        teacher=teacher,
        student=student,
        tokenizer=student_tok,
        vocab_size=vocab_size,
        teacher_tokenizer=teacher_tok,
        stop_ids=stop_ids,
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def load_weights(
    model: torch.nn.Module,
    path: str | os.PathLike,
    place: Callable[[dict[str, torch.Tensor]], dict] | None = None,
) -> None:
    """Load a safetensors state dict into ``model`` strictly: every key, every shape.
    ``place`` maps the checked state dict to what ``model`` holds (FSDP: this rank's shards).

    A truncated or corrupt file, a missing or unexpected tensor, or a shape that differs raises
    :class:`ModelLoadError` in one line naming the file — never a silent partial load.
    """
    from safetensors.torch import load_file

    path = Path(path)
    try:
        state = load_file(path)
    except Exception as err:  # safetensors raises its own error type; the cause stays chained
        raise ModelLoadError(f"{path} is truncated or corrupt ({_first_line(err)})") from err
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [k for k in own if k in state and state[k].shape != own[k].shape]
    for what, keys in (("lacks", missing), ("has unexpected", unexpected), ("has resized", shapes)):
        if keys:
            raise ModelLoadError(
                f"{path} {what} tensors ({keys[0]}{' …' if len(keys) > 1 else ''}); it is not "
                "a checkpoint of this model"
            )
    model.load_state_dict(state if place is None else place(state), strict=True)
