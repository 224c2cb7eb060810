"""The objective kinds a config can name: one entry each, the single home of the list.

Adding an objective is one :class:`ObjectiveKind` in :data:`OBJECTIVES` plus its module: the
entry names the kind, what tables call it (``labels.OBJECTIVE_NAMES`` reads ``label``), its
summary for ``distillscope config``, the ``objective.*`` fields only it reads (``options``: a
config that sets another kind's option is refused on load), what it needs from the loop, and
``load``, which imports what the step feeds when a run calls it, so validating a config (which
reads this registry) never imports torch. A new full-vocabulary divergence is one
:class:`~.divergences.Divergence` declaration (its value and closed-form gradient) and its entry
here, which names its weights (``weights``: the :class:`~.options.Weight` s, declared in
:mod:`.options`, that the declaration reads; the config generates each ``objective.<name>``
field from them, torch-free); the plain and the fused path
(docs/method.md §2 Memory: no [B, T, V] tensor at real vocabularies, the default when
V > :data:`FUSED_MIN_VOCAB`) both consume the declaration.

What ``load`` returns, and what the training step does with it, depends on ``inputs``:

- ``"logits"`` — the :class:`~.divergences.Divergence` of the same name; the step passes it to
  :func:`~.divergences.divergence_loss` (logits) or :func:`~.fused.fused_divergence` (hidden
  states + LM heads, closed-form gradients) with a :class:`~.options.DivergenceOptions`;
- ``"rollout_tokens"`` — a policy gradient on the rollout's own tokens (OPD):
  ``f(logp_student_B_T, logp_teacher_B_T, logp_behavior_B_T, mask_B_T, *, options, reduction)``
  with ``options`` an :class:`~.options.OPDOptions`;
- ``"drawn_tokens"`` — a sampled estimator on one extra token per position, drawn by inverse
  CDF from the step's uniforms under ``draws_from``: ``f(logp_student_B_T, logp_teacher_B_T,
  mask_B_T, *, reduction)``.

- ``"cross_tokenizer"`` — a teacher with another tokenizer, opted into by naming one of these
  kinds (:data:`CROSS_TOKENIZER_KINDS`): :func:`~.cross_tokenizer.cross_tokenizer_loss` with its
  ``form`` bound, ``f(student_logits_B_T_V, teacher_logits_B_T_W, exact_B_T, pairs_M_2,
  mask_B_T, *, options)``; the teacher's side (``teacher/cross_tokenizer.py``) re-tokenises the
  text and aligns its logits to the student's positions.

The drawn and rollout-token kinds read one token's log-prob per position, which both paths give
(from logits, or chunk by chunk from hidden states, :mod:`.fused_tokens`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Literal

from distillscope.objectives.options import JSD_BETA, MIXTURE_ALPHA, OPDOptions, Weight

#: Above this vocabulary size the training loop computes every objective and diagnostic from
#: hidden states (``objective.path: auto``); at or below it, from logits.
FUSED_MIN_VOCAB = 4096

Inputs = Literal["logits", "rollout_tokens", "drawn_tokens", "cross_tokenizer"]
Loss = Callable[..., tuple]


@dataclass(frozen=True)
class ObjectiveKind:
    """One objective a run can minimise, and what it needs from the loop and the config."""

    name: str
    label: str  # what tables and figures call it (labels.OBJECTIVE_NAMES)
    summary: str  # one line, shown in the CLI's config listing
    load: Callable[[], object]  # what the step feeds (module docstring), imported when called
    inputs: Inputs = "logits"  # what the step passes to it (module docstring)
    #: the ``objective.*`` fields only this kind reads (every kind reads the loss temperatures
    #: and the reduction; full-vocabulary kinds also ``teacher_topk``)
    options: tuple[str, ...] = ()
    #: the weights a full-vocabulary divergence reads (each one ``objective.*`` field; their
    #: names are its ``options``)
    weights: tuple[Weight, ...] = ()
    draws_from: Literal["teacher", "student"] | None = None  # drawn_tokens: the sampling model
    needs_behavior_logprobs: bool = False  # needs the sampler's log-probs of its own tokens
    needs_student_rollouts: bool = False  # only meaningful when the student wrote the tokens

    @property
    def full_vocabulary(self) -> bool:
        """Whether the loss sums over the whole vocabulary at each position."""
        return self.inputs == "logits"

    @property
    def needs_generator(self) -> bool:
        """Whether the loss draws extra tokens (from the step's own generator stream)."""
        return self.draws_from is not None


def _divergence(name: str):
    from distillscope.objectives.divergences import DIVERGENCES

    return DIVERGENCES[name]


def _opd() -> Loss:
    from distillscope.objectives.opd import opd_from_logprobs

    return opd_from_logprobs


def _sampled(name: str) -> Loss:
    from distillscope.objectives.estimators import ESTIMATORS, sampled_token_loss

    return functools.partial(sampled_token_loss, estimator=ESTIMATORS[name])


def _cross_tokenizer_loss(form: str) -> Loss:
    from distillscope.objectives.token_alignment import cross_tokenizer_loss

    return functools.partial(cross_tokenizer_loss, form=form)


def _cross_tokenizer(name: str, label: str, summary: str, form: str) -> ObjectiveKind:
    """A loss against a teacher with another tokenizer (:mod:`.token_alignment`, ``form``)."""
    loss = functools.partial(_cross_tokenizer_loss, form)
    return ObjectiveKind(name, label, summary, loss, inputs="cross_tokenizer")


def _full_vocabulary(name: str, label: str, summary: str, *weights: Weight) -> ObjectiveKind:
    """A :class:`~.divergences.Divergence` of :data:`~.divergences.DIVERGENCES`, with the
    ``weights`` it reads (the declaration's ``Divergence.weights``); their names are its
    options."""
    load = functools.partial(_divergence, name)
    options = tuple(w.name for w in weights)
    return ObjectiveKind(name, label, summary, load, options=options, weights=weights)


def _estimator(name: str, label: str, summary: str, draws_from: Literal["teacher", "student"]):
    """A :class:`~.estimators.TokenEstimator` of :data:`~.estimators.ESTIMATORS`: forward KL
    draws from π_T, reverse from π_S (its ``draws_from``)."""
    loss = functools.partial(_sampled, name)
    return ObjectiveKind(name, label, summary, loss, inputs="drawn_tokens", draws_from=draws_from)


OBJECTIVES: dict[str, ObjectiveKind] = {
    k.name: k
    for k in (
        _full_vocabulary(
            "forward_kl", "forward KL", "KL(π_T ‖ π_S), full vocabulary (mode-covering)"
        ),
        _full_vocabulary(
            "reverse_kl", "reverse KL", "KL(π_S ‖ π_T), full vocabulary (mode-seeking)"
        ),
        _full_vocabulary(
            "jsd",
            "JSD",
            "generalised Jensen–Shannon divergence (objective.beta)",
            JSD_BETA,
        ),
        _full_vocabulary(
            "mixture",
            "FKL/RKL mixture",
            "α·forward + (1−α)·reverse KL (objective.alpha)",
            MIXTURE_ALPHA,
        ),
        _estimator(
            "forward_sampled",
            "forward KL (sampled)",
            "forward KL, one teacher sample per position",
            draws_from="teacher",
        ),
        _estimator(
            "reverse_sampled",
            "reverse KL (sampled)",
            "reverse KL, one student sample per position",
            draws_from="student",
        ),
        ObjectiveKind(
            "opd",
            "OPD",
            "on-policy distillation: clipped policy gradient with teacher advantages",
            load=_opd,
            inputs="rollout_tokens",
            options=tuple(f.name for f in fields(OPDOptions)),
            needs_behavior_logprobs=True,
            needs_student_rollouts=True,
        ),
        _cross_tokenizer(
            "uld",
            "ULD (cross-tokenizer)",
            "teacher with another tokenizer: L1 between sorted probabilities (Boizard et al.)",
            form="uld",
        ),
        _cross_tokenizer(
            "aligned_forward_kl",
            "forward KL (token-aligned, cross-tokenizer)",
            "teacher with another tokenizer: forward KL where tokens align, ULD elsewhere",
            form="forward",
        ),
        _cross_tokenizer(
            "aligned_reverse_kl",
            "reverse KL (token-aligned, cross-tokenizer)",
            "teacher with another tokenizer: reverse KL where tokens align, ULD elsewhere",
            form="reverse",
        ),
    )
}


def _declared_weights(kinds: Iterable[ObjectiveKind]) -> dict[str, tuple[str, Weight]]:
    """Each declared weight by name, with the kind that declares it; a name twice is refused."""
    declared: dict[str, tuple[str, Weight]] = {}
    for kind in kinds:
        for weight in kind.weights:
            if weight.name in declared:
                raise ValueError(
                    f"weight {weight.name!r} is declared by both {declared[weight.name][0]} and "
                    f"{kind.name}: each is one objective.* field, so give one another name"
                )
            declared[weight.name] = (kind.name, weight)
    return declared


#: every divergence weight a config can set (``objective.<name>``), in declaration order, with
#: the kind that declares it
WEIGHTS: dict[str, tuple[str, Weight]] = _declared_weights(OBJECTIVES.values())

#: the kinds that accept a teacher whose tokenizer differs from the student's (the opt-in)
CROSS_TOKENIZER_KINDS = tuple(n for n, k in OBJECTIVES.items() if k.inputs == "cross_tokenizer")
