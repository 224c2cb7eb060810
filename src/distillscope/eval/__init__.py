"""Evaluation: everything docs/method.md §8 measures on a trained student (``eval.json``).

:mod:`.evaluate` (``evaluate``: accuracy, pass@k, transfer, forgetting, sparsity),
:mod:`.rlvr_effect` (what an RLVR run changed), :mod:`.generate` (sample and score a student),
:mod:`.measures` (pass@k, update sparsity), :mod:`.samples_file` (``samples.jsonl``),
:mod:`.forgetting` (lm-evaluation-harness before and after), :mod:`.analysis` and
:mod:`.gradient_analysis` (``distillscope analyze``). Every module here imports torch, so the
package re-exports nothing: a name is imported from its module.
"""
