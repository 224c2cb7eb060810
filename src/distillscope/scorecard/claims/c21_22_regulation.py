"""Claims 21 and 22 ([D]): regulated OPD beats naive OPD; a modest regulated teacher beats a
larger unregulated one.

Claim 21 reads only the `opd` experiment: the seed states no size ("supera consistentemente"),
so it is a sign (docs/method.md §9 "Provenance") — per regulation (hard clip, log compression),
its accuracy − unregulated OPD's on the seed-blocked fit, matched on every other axis, above 0
beyond uncertainty under *every* regulation ("consistently"; either below none beyond
uncertainty contradicts). Claim 22 reads only `teacher_scale`: the smaller teacher (by
``model/teacher_params``) with a regulation − the larger teacher without, above 2 pp (§9's
margin, which no seed's number gives) under either regulation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC
from distillscope.scorecard.claim_spec import ABOVE, ANY, EVERY, Claim, MarginCase, Part, Quote
from distillscope.scorecard.claims.quotes import REGULATED_WINS
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import in_pp, rows_mask

OPD, SCALE = "opd", "teacher_scale"
REG = "objective.regulation"
REGULATED = ("hard_clip", "log_compress")
TEACHER, SIZE = "model.teacher", "model/teacher_params"
MARGIN_PP = 0.0  # claim 21: a sign, the seeds give no size (docs/method.md §9)
#: Claim 22's margin as docs/method.md §9 states it (> 2 pp); no seed gives a size for it either.
MODEST_MARGIN_PP = 2.0
#: The calibration's planted gain of regulated OPD (no seed gives one): power is computed at it.
PLANT_GAIN_PP = 3.0


def _fit(view: ClaimEvidence, experiment: str) -> Blocks | str:
    rows = view.rows(experiment)
    if REG not in rows.columns:
        return f"{REG} of the `{experiment}` runs"
    regs = set(rows[REG].dropna().map(str))
    if "none" not in regs or not regs & set(REGULATED):
        return f"unregulated and hard_clip/log_compress runs of `{experiment}`"
    return blocks(view, experiment, rows, ACC)


def regulated_gain(view: ClaimEvidence) -> list[Estimate]:
    """Per regulation present, its accuracy − none's over matched `opd` cells."""
    b = _fit(view, OPD)
    if isinstance(b, str):
        return [not_tested("Δ regulated", b)]
    regs = [r for r in REGULATED if b.mask(**{REG: r}).any()]
    return [x for r in regs for x in _labelled(matched(b, REG, r, "none", (), r), r)]


def _labelled(xs: list[Estimate], label: str) -> list[Estimate]:
    return [
        Estimate(label, x.value, x.se, x.dof, x.seeds, x.note, x.missing, covers=x.covers)
        for x in xs
    ]


def _sizes(b: Blocks) -> pd.Series:
    """Each teacher's size (median model/teacher_params over its cells)."""
    if SIZE not in b.rows.columns:
        return pd.Series(dtype=float)
    sizes = pd.to_numeric(b.rows[SIZE], errors="coerce")
    return sizes.groupby(b.rows[TEACHER].map(str)).median().dropna()


def modest_teacher(view: ClaimEvidence) -> list[Estimate]:
    """Per regulation, the smaller teacher regulated − the larger unregulated (`teacher_scale`)."""
    b = _fit(view, SCALE)
    if isinstance(b, str):
        return [not_tested("Δ modest", b)]
    sizes = _sizes(b)
    if TEACHER not in b.cells or sizes.nunique() < 2:
        return [not_tested("Δ modest", f"two teachers of different size ({SIZE}) in `{SCALE}`")]
    small, large = str(sizes.idxmin()), str(sizes.idxmax())
    base = b.mask(**{TEACHER: large, REG: "none"})
    out = []
    for reg in REGULATED:
        side = b.mask(**{TEACHER: small, REG: reg})
        if side.any():
            out.append(b.difference(side, base, f"{small} {reg} − {large} none"))
    if not out:
        return [not_tested("Δ modest", f"regulated runs of the smaller teacher ({small})")]
    return out


def regulation_plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """[D]'s picture: regulated OPD PLANT_GAIN_PP above naive OPD in `opd` and `teacher_scale`;
    in `teacher_scale` the smaller teacher's students also 10 pp above the larger's."""
    regulated = pd.Series(d.get(REG, pd.Series("", index=d.index))).map(str).isin(REGULATED)
    rows = rows_mask(d, OPD) | rows_mask(d, SCALE)
    out = np.where(rows & regulated.to_numpy(), in_pp(ACC, PLANT_GAIN_PP), 0.0)
    return {ACC: out}


def at_margin(experiment: str, ahead: tuple[str, ...] = (), margin: float = MARGIN_PP):
    """Regulated runs of ``experiment`` exactly ``margin`` above unregulated ones, but those of
    the regulations in ``ahead`` PLANT_GAIN_PP above (one regulation at the margin while the
    other holds: where "every regulation" is false)."""

    def offsets(d: pd.DataFrame) -> dict[str, np.ndarray]:
        reg = d.get(REG, pd.Series("", index=d.index)).map(str)
        rows = rows_mask(d, experiment)
        gain = np.where(reg.isin(ahead).to_numpy(), PLANT_GAIN_PP, margin)
        return {ACC: np.where(rows & reg.isin(REGULATED).to_numpy(), in_pp(ACC, gain), 0.0)}

    return offsets


CLAIMS = (
    Claim(
        id=21,
        title="Regulated OPD beats naive OPD.",
        quotes=(REGULATED_WINS,),
        experiments=(OPD,),
        parts=(
            Part(
                "Δ regulated",
                "accuracy of hard-clip (or log-compression) OPD − unregulated OPD in the `opd` "
                "experiment, matched cells of its cell + seed fit",
                regulated_gain,
                EVERY,
                ABOVE,
                MARGIN_PP,
                "'consistently outperforms' with no size stated: a sign beyond uncertainty, "
                "under every regulation.",
                published=PLANT_GAIN_PP,
                over="regulation",
                sized=False,
            ),
        ),
        needs="the `opd` experiment: OPD runs with regulation none and hard_clip/log_compress, "
        "with eval/accuracy",
        plant=regulation_plant,
        margin_cases=(
            MarginCase("log compression at the margin in `opd`", at_margin(OPD, ("hard_clip",))),
        ),
    ),
    Claim(
        id=22,
        title="A modest regulated teacher beats a larger unregulated one.",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                62,
                "um professor Qwen3-1.7B-GRPO (regulado) supera um professor "
                "Qwen3-4B-GRPO (não regulado)",
                "a (regulated) Qwen3-1.7B-GRPO teacher outperforms an (unregulated) "
                "Qwen3-4B-GRPO teacher",
            ),
            Quote(
                "001_836273fe8eeeb907.txt",
                64,
                "Um professor modesto com sinais bem regulados pode decisivamente superar "
                "métodos de estado da arte que dependem do escalonamento bruto para "
                "professores massivos",
                "A modest teacher with well-regulated signals can decisively beat "
                "state-of-the-art methods that rely on raw scaling to massive teachers",
            ),
        ),
        experiments=(SCALE,),
        parts=(
            Part(
                "Δ modest",
                "accuracy of the smaller teacher (model/teacher_params) with a regulation − "
                "the larger teacher without, in `teacher_scale`, on its cell + seed fit",
                modest_teacher,
                ANY,
                ABOVE,
                MODEST_MARGIN_PP,
                "docs/method.md §9's 2 pp; the seed ('supera', 'pode decisivamente superar') "
                "states no size, so this margin is not a seed's number (flagged, issue 42).",
                published=13.0,
                over="regulation",
                sized=False,
            ),
        ),
        needs="the `teacher_scale` experiment: two teachers of different size "
        "(model/teacher_params), the smaller regulated and the larger unregulated",
        margin_cases=(
            MarginCase(
                "smaller regulated teacher +margin", at_margin(SCALE, margin=MODEST_MARGIN_PP)
            ),
        ),
    ),
)
