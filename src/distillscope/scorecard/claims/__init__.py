"""The scorecard's claims, one specification per module (docs/method.md §9).

How to add a claim
==================

1. Create ``scorecard/claims/cNN_short_name.py`` (NN = the claim's number in docs/method.md §9,
   two digits; a small family may share a module: ``c14_15_robustness.py``). The module
   defines ``CLAIMS: tuple[Claim, ...]``; modules named ``c<digits>_…`` are discovered here,
   nothing else needs registering.
2. Declare the ``Claim`` (``scorecard.claim_spec``):

   - ``id``, ``title`` (the finding with its published numbers, one line), ``quotes``: each a
     ``Quote`` (seed file of docs/seeds/, line, the sentence in the seed's language — an exact
     substring of that line — and in English, the paper's section where the seed cites one;
     a test checks each against the seed); ``kind=INSTRUMENT`` for a statement no seed makes
     (an instrument check: reported apart, never counted among published claims);
   - ``experiments``: the only experiments it reads. ``view.rows("main")`` returns their
     finished runs, duplicates counted once; reading an undeclared experiment raises, and an
     absent one is empty — never fall back to other rows;
   - ``parts``: each a ``Part`` — ``estimate(view) -> list[Estimate]`` (one per stratum),
     ``quantifier`` (``EVERY`` / ``POOLED`` / ``ANY`` / ``ONLY``, strata named in ``over``),
     ``side`` (``ABOVE`` / ``BELOW`` / ``WITHIN``), ``margin`` (display units: pp for
     fractions), ``why`` (how the margin follows from the seeds' numbers — a number a seed
     states or arithmetic on such numbers; with no size stated the part is a sign, margin 0)
     and ``published`` (the published value of the estimand: the power analysis's target;
     ``sized=False`` when no seed states one: then it is the calibration's planted effect);
   - ``premises``: parts that must hold for the claim to apply (absent → "not applicable";
     ``learned.learned_part`` for "the students learned");
   - ``features``: trajectory features, ``{column: fn(metrics.jsonl frame) -> float}``;
   - ``plant`` (the published effects in a design, for calibration's planted world),
     ``margin_cases`` (each part at its margin, where "supported" is false), ``null_true``
     (a world without effects makes the claim true: a no-effect claim).
3. Estimate with the seed as a block: ``contrasts.blocks(view, key, rows, metric)`` fits cell +
   seed (``estimate.Blocks``); ``contrasts.matched`` gives matched contrasts per stratum;
   ``Blocks.range`` a range; ``estimate.seed_level`` a level with the seed as replicate. A
   missing metric or a one-seed cell gives ``not_tested(label, what)`` — never drop it silently.
4. Test it in ``tests/scorecard/claims/test_cNN_….py``: a control table where the published
   statement holds (supported) and one adversarial table per failure class that applies
   (pooled-away opposite effects, a sign without its size, a missing premise, the effect only
   in another experiment, duplicated rows, a one-seed cell, a NaN metric, an interval wholly
   beyond the margin → contradicted); ``tests/scorecard/claims/tables.py`` builds tables.
5. Regenerate the docs: ``python -m distillscope.scorecard.claim_docs`` (docs/method.md §9 and
   the claim table of docs/scorecard.md; a test fails when they drift).

The runner (``scorecard.runner``) does the rest: features → estimates → decisions on both
sides of each margin (``scorecard.verdicts``) → the verdict and its reason.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from distillscope.scorecard.claim_spec import Claim

_MODULE = re.compile(r"c\d+(_\d+)*_\w+$")


def _discover() -> tuple[Claim, ...]:
    found: list[Claim] = []
    for info in pkgutil.iter_modules(__path__):
        if _MODULE.match(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found += list(module.CLAIMS)
    ids = [c.id for c in found]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"claims {dup} are specified in more than one module")
    return tuple(sorted(found, key=lambda c: c.id))


#: Every specified claim, in claim order.
CLAIMS: tuple[Claim, ...] = _discover()

__all__ = ["CLAIMS", "Claim"]
