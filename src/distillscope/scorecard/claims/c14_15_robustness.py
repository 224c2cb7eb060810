"""Claims 14 and 15 ([P]'s robustness checks): the main conclusions hold without gradient
clipping, and with sampled estimators.

Each replays the specifications of the main conclusions (claims 1–4, resp. 1–2: the same
parts and margins, ``cNN.specify(grid)``) on an ablation's runs, shaped as the main grid: the
`no_clip` experiment's runs with ``optim.grad_clip`` null, resp. the `sampled` experiment's
runs with ``forward_sampled`` / ``reverse_sampled`` read as the KL direction they estimate.
The runner (``scorecard.runner``) compares each replayed claim's verdict on the ablation with
its verdict on the main grid (``spec.REPLAY_RULE``); the premise is that the ablation's
students learned. Their margin cases are the replayed claims' own, placed on the ablation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC, MAIN, REVERSE
from distillscope.scorecard.claim_spec import Claim, MarginCase, Offsets, Quote, Replay
from distillscope.scorecard.claims import (
    c01_no_rollout_gain,
    c02_kl_direction,
    c03_lr_forgetting,
    c04_lr_sparsity,
)
from distillscope.scorecard.learned import grid_learned
from distillscope.scorecard.planting import in_pp
from distillscope.scorecard.selection import Grid

NO_CLIP = Grid("no_clip", clipped=False, name="no-clip grid")
SAMPLED = Grid(
    "sampled",
    kinds=(("forward_sampled", "forward_kl"), ("reverse_sampled", REVERSE)),
    name="sampled-estimator grid",
)
#: The planted world without clipping: reverse KL 15 pp less accurate (its larger, spikier
#: gradients unclipped, claim 13), which keeps every conclusion of claims 1–4.
PLANT_NO_CLIP_REVERSE_PP = -15.0


def replays(grid: Grid, modules) -> tuple[Replay, ...]:
    """Each module's claim on the main grid and on ``grid``."""
    return tuple(Replay(m.CLAIMS[0], m.specify(grid), grid.name) for m in modules)


def margin_cases(rs: tuple[Replay, ...]) -> tuple[MarginCase, ...]:
    """The replayed claims' margin cases, placed on the ablation (each keeps the main grid
    where the replayed claim is decided, so that only the ablation's conclusion is at stake).
    Each is ``given`` its replayed claim: the replay judges only the conclusions the main grid
    reaches, so a case is a false world only on a table where the main grid decides it."""
    return tuple(
        MarginCase(f"claim {r.main.id}: {m.name}", m.offsets, m.on_planted, r.main.id)
        for r in rs
        for m in r.ablation.margin_cases
    )


def no_clip_planted(d: pd.DataFrame) -> Offsets:
    """Reverse KL ``PLANT_NO_CLIP_REVERSE_PP`` less accurate in the no-clip runs."""
    clip_off = d["optim.grad_clip"].isna().to_numpy() if "optim.grad_clip" in d else False
    kind = d["objective.kind"].map(str) if "objective.kind" in d else pd.Series("", d.index)
    reverse = kind.isin([REVERSE, "reverse_sampled"]).to_numpy()
    return {ACC: np.where(reverse & clip_off, in_pp(ACC, PLANT_NO_CLIP_REVERSE_PP), 0.0)}


_MODULES_14 = (c01_no_rollout_gain, c02_kl_direction, c03_lr_forgetting, c04_lr_sparsity)
_REPLAYS_14 = replays(NO_CLIP, _MODULES_14)
_REPLAYS_15 = replays(SAMPLED, _MODULES_14[:2])
CLAIMS = (
    Claim(
        id=14,
        title="The main conclusions (claims 1–4) hold without gradient clipping.",
        quotes=(
            Quote(
                "000_4fa7018284e9b536.txt",
                36,
                "As conclusões principais se mantêm em testes de robustez: removendo "
                "gradient clipping",
                "The main conclusions hold in robustness checks: removing gradient clipping",
            ),
            Quote(
                "004_dad148f87bfbc925.txt",
                8,
                "Le conclusioni dello studio sono robuste anche quando si rimuove il "
                "gradient clipping",
                "The study's conclusions are robust also when gradient clipping is removed",
            ),
        ),
        experiments=(NO_CLIP.experiment, MAIN),
        premises=(grid_learned(NO_CLIP),),
        parts=(),
        needs="runs with optim.grad_clip off (experiment `no_clip`) over rollout × KL × LR, "
        "beside the main grid",
        plant=no_clip_planted,
        margin_cases=margin_cases(_REPLAYS_14),
        null_true=True,
        replays=_REPLAYS_14,
    ),
    Claim(
        id=15,
        title="The main conclusions (claims 1–2) hold with sampled estimators.",
        quotes=(
            Quote(
                "000_4fa7018284e9b536.txt",
                36,
                "substituindo a KL de vocabulário completo por estimadores amostrados comuns",
                "replacing the full-vocabulary KL with common sampled estimators",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                45,
                "Os autores verificaram que estimadores amostrados não alteram as "
                "conclusões centrais.",
                "The authors verified that sampled estimators do not change the central "
                "conclusions.",
            ),
        ),
        experiments=(SAMPLED.experiment, MAIN),
        premises=(grid_learned(SAMPLED),),
        parts=(),
        needs="runs with objective.kind forward_sampled and reverse_sampled over rollout × LR "
        "(experiment `sampled`), beside the main grid",
        margin_cases=margin_cases(_REPLAYS_15),
        null_true=True,
        replays=_REPLAYS_15,
    ),
)
