"""The column names and values the claims read: metrics, the main experiment, the config axes
of the main grid and their values."""

from __future__ import annotations

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the judged view (docs/method.md §10 "Sparsity")
SPARSITY_FP32 = "eval/sparsity_fp32_tau1e-06"
MAIN = "main"
POLICY, KIND, LR = "rollout.policy", "objective.kind", "optim.lr"
STUDENT, TEACHER = "student", "teacher"
FORWARD, REVERSE = "forward_kl", "reverse_kl"
