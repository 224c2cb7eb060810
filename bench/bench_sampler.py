"""Sampler speed against ``transformers`` ``generate()``: tokens per second, same settings.

    python bench/bench_sampler.py [--quick] [--repeats 3]

Cases: the shipped testbed student (B = 128, 24 new tokens) and random-weight Llama-shaped
models with realistic vocabularies (V = 32,000 and 128,256, hidden 64) at B = 128 / L = 24 and
B = 32 / L = 256; the λ-spectrum (0.5) on the testbed against the sum of its two single-model
passes. Sampling at T = 1, top-p 1, no top-k, and no stop token for either sampler, so both write
exactly B × L tokens. Implementations are interleaved and each reports its best of ``repeats``
(the machine may be shared). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from distillscope.models import resolve_model_path
from distillscope.rollout.policies import SpectrumPolicy, StudentPolicy, TeacherPolicy
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts


def random_llama(vocab: int, hidden: int = 64, layers: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).eval()


def prompts(vocab: int, batch: int, width: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded random prompts of 8..``width`` tokens."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (batch, width), generator=g)
    lengths = torch.randint(8, width + 1, (batch,), generator=g)
    mask = (torch.arange(width)[None, :] >= width - lengths[:, None]).long()
    return ids.masked_fill(mask == 0, 0), mask


def ours(policy, student, teacher, ids, mask, new_tokens: int) -> None:
    sample_rollouts(
        policy,
        student,
        teacher,
        PromptBatch(ids, mask),
        SamplingSpec(new_tokens, stop_ids=[], pad_id=0),
        torch.Generator().manual_seed(0),
    )


@torch.inference_mode()
def hf_generate(model, ids, mask, new_tokens: int) -> None:
    torch.manual_seed(0)
    model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        eos_token_id=None,
        pad_token_id=0,
    )


def best_times(fns: dict, repeats: int) -> dict[str, float]:
    """Best wall time of each callable, the callables interleaved within each repeat."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
            print(f"  {name}: {time.perf_counter() - t0:.2f} s", file=sys.stderr, flush=True)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="testbed and V = 32k at B = 128 only")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vocab", type=int, help="only the Llama cases of this vocabulary size")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # a shared machine: more threads only spin
    rows = []

    student = AutoModelForCausalLM.from_pretrained(resolve_model_path("testbed:student")).eval()
    teacher = AutoModelForCausalLM.from_pretrained(resolve_model_path("testbed:teacher")).eval()
    ids, mask = prompts(student.config.vocab_size, 128)
    n = 24
    t = best_times(
        {
            "generate": lambda: hf_generate(student, ids, mask, n),
            "student": lambda: ours(StudentPolicy(), student, None, ids, mask, n),
            "teacher": lambda: ours(TeacherPolicy(temperature=1.0), None, teacher, ids, mask, n),
            "spectrum": lambda: ours(SpectrumPolicy(lam=0.5), student, teacher, ids, mask, n),
        },
        args.repeats,
    )
    tokens = 128 * n
    rows.append(("testbed student, B=128, L=24", tokens, t["generate"], t["student"]))
    spectrum_ratio = t["spectrum"] / (t["student"] + t["teacher"])

    cases = [(32_000, 128, 24)]
    if not args.quick:
        cases += [(32_000, 32, 256), (128_256, 128, 24), (128_256, 32, 256)]
    if args.vocab:
        cases = [c for c in cases if c[0] == args.vocab]
    for vocab, batch, n in cases:
        model = random_llama(vocab)
        ids, mask = prompts(vocab, batch)
        t = best_times(
            {
                "generate": lambda m=model, i=ids, k=mask, n=n: hf_generate(m, i, k, n),
                "student": lambda m=model, i=ids, k=mask, n=n: ours(
                    StudentPolicy(), m, None, i, k, n
                ),
            },
            args.repeats,
        )
        label = f"Llama H=64, V={vocab:,}, B={batch}, L={n}"
        rows.append((label, batch * n, t["generate"], t["student"]))

    print(
        f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, best of {args.repeats} interleaved\n"
    )
    print("| case | generate() tok/s | distillscope tok/s | ratio |")
    print("|---|---|---|---|")
    for label, tokens, t_gen, t_ours in rows:
        speeds = f"{tokens / t_gen:,.0f} | {tokens / t_ours:,.0f} | {t_gen / t_ours:.2f}×"
        print(f"| {label} | {speeds} |")
    print(f"\nλ-spectrum 0.5 / (student + teacher), testbed B=128 L=24: {spectrum_ratio:.2f}×")


if __name__ == "__main__":
    main()
