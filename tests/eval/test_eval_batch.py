import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.eval.generate import MAX_EVAL_BATCH, eval_batch_size


def tiny_llama(vocab: int = 1000) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(cfg)


def test_batch_holds_the_kv_cache_and_logits_within_the_budget():
    model = tiny_llama()
    # per row: 2 (k, v) · 2 layers · 2 kv heads · 16 dims · 100 tokens · 4 bytes + 4 · 1000 · 4
    per_row = 2 * 2 * 2 * 16 * 100 * 4 + 16_000
    budget_mb = 10 * per_row / 2**20
    assert eval_batch_size(model, 60, 40, budget_mb) == 10
    assert eval_batch_size(model, 60, 40, budget_mb * 0.99) == 9


def test_batch_is_between_one_row_and_the_cap():
    model = tiny_llama()
    assert eval_batch_size(model, 60, 40, 1e-6) == 1
    assert eval_batch_size(model, 60, 40, 1e6) == MAX_EVAL_BATCH


def test_longer_sequences_and_wider_vocabularies_give_smaller_batches():
    small, wide = tiny_llama(1000), tiny_llama(150_000)
    assert eval_batch_size(small, 60, 400, 8) < eval_batch_size(small, 60, 40, 8)
    assert eval_batch_size(wide, 60, 40, 8) < eval_batch_size(small, 60, 40, 8)
