"""Chapter 16's modern decoder: parity with transformers' LlamaForCausalLM (logits and
gradients in float64, late positions, 1, 2 and 4 query heads per key/value head), cached
decoding, the rotary layouts, and clear errors for bad inputs."""

import warnings

import pytest
import torch

from transformer_book import (
    GroupedQueryAttention,
    ModernConfig,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    apply_rotary,
    causal_lm_loss,
    llama_from_hf,
    llama_parameter_pairs,
    rotary_table,
    swiglu_hidden,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import LlamaConfig, LlamaForCausalLM, logging

logging.set_verbosity_error()


def small_llama(kv_heads, tie=False, seed=0):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=72,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=kv_heads, max_position_embeddings=512,
                         bos_token_id=0, eos_token_id=0, pad_token_id=0,
                         tie_word_embeddings=tie, rope_theta=500000.0)
    return LlamaForCausalLM(config).double().eval()


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_logits_and_gradients_equal_llama_in_float64(kv_heads):
    theirs = small_llama(kv_heads)
    ours = llama_from_hf(theirs)
    assert ours.config.theta == 500000.0 and ours.config.kv_heads == kv_heads
    tokens = torch.randint(0, 40, (2, 260), generator=torch.Generator().manual_seed(1))
    their_logits, our_logits = theirs(tokens).logits, ours(tokens)
    assert (our_logits - their_logits).abs().max() < 1e-9
    assert (our_logits[:, 200:] - their_logits[:, 200:]).abs().max() < 1e-9  # late
    causal_lm_loss(our_logits, tokens, pad_id=None).backward()
    causal_lm_loss(their_logits, tokens, pad_id=None).backward()
    pairs = llama_parameter_pairs(ours, theirs)
    assert len(pairs) == len(list(ours.parameters())) == 9 * 2 + 3
    for name, mine, their in pairs:
        assert (mine.grad - their.grad).abs().max() < 1e-9, name


def test_tied_llama():
    theirs = small_llama(2, tie=True)
    ours = llama_from_hf(theirs)
    assert ours.config.tie_embeddings and ours.output_weight() is ours.tokens.weight
    tokens = torch.randint(0, 40, (1, 30), generator=torch.Generator().manual_seed(2))
    assert (ours(tokens) - theirs(tokens).logits).abs().max() < 1e-9


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_cached_decoding_gives_the_full_pass(kv_heads):
    ours = llama_from_hf(small_llama(kv_heads))
    tokens = torch.randint(0, 40, (2, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = ours(tokens)
        caches = ours.new_caches()
        first = ours(tokens[:, :25], caches)  # a prompt, then one token at a time
        steps = [first] + [ours(tokens[:, t : t + 1], caches, offset=t)
                           for t in range(25, 40)]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-12
    assert caches[0]["key"].shape == (2, kv_heads, 40, 8)  # the cache holds kv heads


def test_the_wrong_layout_is_right_at_position_0_only():
    theirs = small_llama(2)
    right = llama_from_hf(theirs)
    config = ModernConfig(**{**right.config.__dict__, "layout": "interleaved"})
    wrong = ModernDecoder(config).double().eval()
    wrong.load_state_dict(right.state_dict())
    tokens = torch.randint(0, 40, (2, 50), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        difference = (wrong(tokens) - theirs(tokens).logits).abs().amax(dim=(0, 2))
    assert difference[0] < 1e-12 and (difference[1:] > 1e-6).all()


def test_rotation_keeps_lengths_and_scores_depend_on_the_offset():
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 1, 16, generator=g, dtype=torch.float64)
    scores = []
    for m in (0, 3, 40):
        cos, sin = rotary_table(torch.tensor([m, m + 5]), 16, dtype=torch.float64)
        rq = apply_rotary(q.expand(2, 16), cos, sin)[0]
        rk = apply_rotary(k.expand(2, 16), cos, sin)[1]
        scores.append((rq @ rk).item())
        assert torch.allclose(apply_rotary(q.expand(2, 16), cos, sin).norm(dim=-1),
                              q.norm(), atol=1e-12)
    assert max(scores) - min(scores) < 1e-5  # float32 angles


def test_rmsnorm_equals_torch_and_swiglu_sizes():
    norm, theirs = RMSNorm(12), torch.nn.RMSNorm(12, eps=1e-6)
    x = torch.randn(3, 12)
    assert torch.allclose(norm(x), theirs(x), atol=1e-6)
    assert swiglu_hidden(4096) == 11008 and swiglu_hidden(128, 16) == 352
    assert sum(p.numel() for p in SwiGLU(8, 24).parameters()) == 3 * 8 * 24


@pytest.mark.parametrize("make, message", [
    (lambda: RMSNorm(0), "d_model must be a positive int; got d_model=0"),
    (lambda: RMSNorm(8, eps=-1), "eps must be a positive number; got eps=-1"),
    (lambda: SwiGLU(8, 2.5), "d_ff must be a positive int; got d_ff=2.5"),
    (lambda: swiglu_hidden(64, 0), "multiple_of must be a positive int"),
    (lambda: GroupedQueryAttention(32, 4, 3),
     "heads must be a multiple of kv_heads .*got heads=4, kv_heads=3"),
    (lambda: GroupedQueryAttention(30, 4), "d_model must split evenly into heads"),
    (lambda: GroupedQueryAttention(32, 4, layout="pairs"), "layout must be one of"),
    (lambda: ModernConfig(10, d_model=24, heads=8), "heads of an even size d_k"),
    (lambda: ModernConfig(10, heads=4, kv_heads=3), "got heads=4, kv_heads=3"),
    (lambda: ModernConfig(10, theta=0), "theta must be a positive number; got theta=0"),
    (lambda: rotary_table(torch.arange(4), 7), "d_k must be even"),
    (lambda: rotary_table(torch.ones(4), 8), "positions must be a 1-axis integer tensor"),
    (lambda: apply_rotary(torch.ones(4, 8), *rotary_table(torch.arange(4), 8),
                          layout="x"), "layout must be one of"),
    (lambda: apply_rotary(torch.ones(5, 8), *rotary_table(torch.arange(4), 8)),
     r"cos and sin must have shape \(seq, d_k\) = \(5, 8\)"),
    (lambda: RMSNorm(8)(torch.ones(2, 7)), "x must end with d_model=8 features"),
])
def test_bad_inputs_raise_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_decoder_refuses_bad_calls():
    model = ModernDecoder(ModernConfig(10, d_model=16, heads=2, layers=1))
    with pytest.raises(ValueError, match=r"token ids in \[0, vocab_size=10\)"):
        model(torch.tensor([[3, 10]]))
    with pytest.raises(ValueError, match=r"shape \(batch, seq\)"):
        model(torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="offset must be an int >= 0; got offset=-1"):
        model(torch.tensor([[3]]), offset=-1)
    with pytest.raises(ValueError, match="one cache per layer: 1 layers, got 2"):
        model(torch.tensor([[3]]), [{}, {}])
    with pytest.raises(TypeError, match="expected a transformers LlamaForCausalLM"):
        llama_from_hf(model)
