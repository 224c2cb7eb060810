"""Seed sentences that several claims quote (docs/method.md §9 "Provenance"): declared once.

A claim's other quotes live in its own module; these are the ones two or more claims test.
"""

from __future__ import annotations

from distillscope.scorecard.claim_spec import Quote

#: [P]: the LR governs forgetting and sparsity, rollout barely matters (claims 3, 4, 5, 7).
LR_GOVERNS = Quote(
    "000_4fa7018284e9b536.txt",
    32,
    "A taxa de aprendizado governa o grau de esquecimento e a esparsidade das atualizações, "
    "com pouca ou nenhuma variação atribuível à política de rollout.",
    "The learning rate governs the degree of forgetting and the sparsity of the updates, with "
    "little or no variation attributable to the rollout policy.",
)

#: [D]: regulated OPD beats naive OPD and the RLVR baseline (claims 21, 27).
REGULATED_WINS = Quote(
    "001_836273fe8eeeb907.txt",
    60,
    "A OPD regulada supera consistentemente os baselines de OPD ingênua e RLVR em sete benchmarks.",
    "Regulated OPD consistently outperforms the naive-OPD and RLVR baselines on seven benchmarks.",
)
