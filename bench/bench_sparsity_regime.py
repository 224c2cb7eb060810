"""What puts [P]'s bf16 update sparsity at 52–90%: rows that get no gradient, or updates below
bf16 resolution? Measured on random-weight models of real shape and on the testbed student.

    python bench/bench_sparsity_regime.py                 # the table of BENCHMARKS.md
    python bench/bench_sparsity_regime.py --steps 20      # a quicker look

[P] distils Llama-3.1-8B into Llama-3.2-1B (vocabulary 128,256, tied embeddings: 263M of the
1.24B parameters are the embedding/LM-head matrix) for 150 full-parameter AdamW steps at LR 1e-5
and 5e-5 with a full-vocabulary KL, and reports 85–90% (low LR) and 52–60% (high LR) of the
parameters unchanged in bf16. This script trains, from the same initialisation scale as those
models (``initializer_range`` 0.02), a 2-layer hidden-64 Llama at each real vocabulary size —
tied (Llama 3.2, V = 128,256) and untied (Llama 2, V = 32,000) — on next-token prediction over
text that uses only ``--used`` distinct token ids (a task's text touches a small share of a real
vocabulary), with [P]'s optimiser settings, and reports per parameter group:

* ``no grad``: the share of entries whose gradient was exactly zero at every step (input rows of
  tokens the text never contains, when the embedding is untied; the full-vocabulary softmax
  sends a gradient to every LM-head row);
* ``bf16 same``: the share unchanged in bf16 at τ = 1e-6 (``eval/sparsity_bf16_tau1e-06``, the
  judged view, :func:`distillscope.eval.measures.update_sparsity`).

The last rows repeat the measurement on the shipped testbed student at the testbed's own LRs,
and the printed ``|w|`` column (median weight magnitude) against the LR shows why the testbed
sits at the floor: its updates are far above bf16 resolution at every LR it can learn with.
Single-threaded by default (``--threads``); a few minutes on one idle core.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.eval.measures import update_sparsity

#: name → (vocabulary, tied embeddings, the real model whose vocabulary and tying it copies)
SHAPES = {
    "llama3.2-V128256-tied": (128_256, True, "Llama-3.2-1B"),
    "llama2-V32000-untied": (32_000, False, "Llama-2-7B"),
}
#: Parameter share of the embedding matrices in the real model of each shape (embedding rows ×
#: hidden ÷ all parameters; both matrices when untied): Llama-3.2-1B 128,256 × 2,048 of 1.236B,
#: Llama-2-7B 2 × 32,000 × 4,096 of 6.738B.
REAL_EMBEDDING_SHARE = {
    "llama3.2-V128256-tied": 128_256 * 2_048 / 1.236e9,
    "llama2-V32000-untied": 2 * 32_000 * 4_096 / 6.738e9,
}


def make_model(vocab: int, tied: bool, seed: int) -> LlamaForCausalLM:
    """A random 2-layer hidden-64 Llama with a real vocabulary (init std 0.02 as the real ones)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
        initializer_range=0.02,
    )
    return LlamaForCausalLM(cfg)


def groups(model: LlamaForCausalLM, used: torch.Tensor) -> dict[str, list[tuple[str, object]]]:
    """Parameter groups by name → [(parameter name, row index or None)]: the embedding's used
    and unused rows, the untied LM head's (when there is one), and everything else."""
    out: dict[str, list[tuple[str, object]]] = {"blocks": []}
    unused = torch.ones(model.config.vocab_size, dtype=torch.bool)
    unused[used] = False
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            label = "embedding" if "embed" in name else "lm_head"
            out.setdefault(f"{label} used rows", []).append((name, ~unused))
            out.setdefault(f"{label} unused rows", []).append((name, unused))
        else:
            out["blocks"].append((name, None))
    return out


def _pick(t: torch.Tensor, rows) -> torch.Tensor:
    return t if rows is None else t[rows]


def measure(
    model: LlamaForCausalLM, used: torch.Tensor, lr: float, steps: int, seq: tuple[int, int]
) -> dict[str, dict[str, float]]:
    """Train ``steps`` AdamW steps (``lr``, betas 0.9/0.999, weight decay 0, clip 1.0) on random
    text over the ``used`` ids (batch × length ``seq``); per group: shares with no gradient,
    unchanged in bf16 (τ 1e-6), entry count and median |w| before training."""
    before = {n: p.detach().float().clone() for n, p in model.named_parameters()}
    touched = {n: torch.zeros_like(p, dtype=torch.bool) for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=0.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = used[torch.randint(len(used), seq, generator=gen)]
        model(input_ids=ids, labels=ids).loss.backward()
        for n, p in model.named_parameters():
            if p.grad is not None:
                touched[n] |= p.grad != 0
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    after = dict(model.named_parameters())
    table = {}
    for label, members in groups(model, used).items():
        n = no_grad = 0
        same_num = 0.0
        mags = []
        for name, rows in members:
            b, a = _pick(before[name], rows), _pick(after[name].detach().float(), rows)
            n += b.numel()
            no_grad += int((~_pick(touched[name], rows)).sum())
            same_num += update_sparsity({"w": b}, {"w": a}, 1e-6, dtype=torch.bfloat16) * b.numel()
            mags.append(b.abs().flatten())
        table[label] = {
            "entries": n,
            "no_grad": no_grad / n,
            "bf16_same": same_num / n,
            "median_abs_w": float(torch.cat(mags).median()),
        }
    return table


def testbed_rows(lrs: list[float], steps: int) -> dict[str, dict[str, float]]:
    """The shipped testbed student trained on its own pretraining mixture for ``steps`` steps at
    each LR (the testbed's low and high LRs): its bf16 sparsity and median |w|."""
    from distillscope.testbed import testbed_path
    from distillscope.testbed.build import train_model
    from distillscope.testbed.recipe import DEFAULT_RECIPE, TrainSpec
    from distillscope.testbed.tokenizer import build_tokenizer

    tok, out = build_tokenizer(), {}
    for lr in lrs:
        model = LlamaForCausalLM.from_pretrained(testbed_path("student"), use_safetensors=True)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        spec = TrainSpec(steps, 16, lr, 0, DEFAULT_RECIPE.student_train.mixture, 10, 1.0)
        train_model(model, tok, spec, lambda m: None)
        mags = torch.cat([p.detach().abs().flatten() for p in model.parameters()])
        out[f"testbed student, LR {lr:g}"] = {
            "entries": mags.numel(),
            "no_grad": float("nan"),
            "bf16_same": update_sparsity(before, model.state_dict(), 1e-6, dtype=torch.bfloat16),
            "median_abs_w": float(mags.median()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=150, help="optimizer steps ([P]: 150)")
    ap.add_argument("--used", type=int, default=2000, help="distinct token ids the text uses")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--pure-bf16",
        action="store_true",
        help="train with bf16 weights and optimizer state (no fp32 master copy): each step's "
        "update is rounded to bf16, so updates below half a bf16 step are lost",
    )
    ap.add_argument("--no-testbed", action="store_true", help="skip the testbed rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    weights = "bf16 weights, no fp32 master" if args.pure_bf16 else "fp32 weights"
    print(f"{args.steps} AdamW steps ({weights}), batch 4 × 32 tokens over {args.used} ids\n")
    print("| model | LR | group | entries | no grad | bf16 same (τ 1e-6) | median abs w |")
    print("|---|---|---|---|---|---|---|")
    for shape, (vocab, tied, _real) in SHAPES.items():
        for lr in (1e-5, 5e-5):
            t0 = time.time()
            model = make_model(vocab, tied, seed=0)
            if args.pure_bf16:
                model = model.to(torch.bfloat16)
            used = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[: args.used]
            table = measure(model, used, lr, args.steps, (4, 32))
            for label, row in table.items():
                print(
                    f"| {shape} | {lr:g} | {label} | {row['entries']:,} | {row['no_grad']:.1%} "
                    f"| {row['bf16_same']:.1%} | {row['median_abs_w']:.4f} |"
                )
            emb = [r for k, r in table.items() if k != "blocks"]
            emb_same = sum(r["bf16_same"] * r["entries"] for r in emb) / sum(
                r["entries"] for r in emb
            )
            share = REAL_EMBEDDING_SHARE[shape]
            est = share * emb_same + (1 - share) * table["blocks"]["bf16_same"]
            print(
                f"| {shape} | {lr:g} | at the real model's proportions ({share:.1%} embedding) "
                f"| | | {est:.1%} | ({time.time() - t0:.0f} s) |"
            )
    if args.no_testbed:
        return
    for label, row in testbed_rows([1e-4, 3e-4], args.steps).items():
        print(
            f"| {label} | | all | {row['entries']:,} | | {row['bf16_same']:.1%} "
            f"| {row['median_abs_w']:.4f} |"
        )


if __name__ == "__main__":
    main()
