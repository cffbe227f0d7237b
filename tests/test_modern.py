"""Chapter 16's modern decoder: parity with transformers' LlamaForCausalLM (logits and
gradients in float64, late positions, 1, 2 and 4 query heads per key/value head), cached
decoding, the rotary layouts, ALiBi against transformers' BLOOM, the options that undo one of
Llama's choices (for tools/train_modern_sweep.py and tools/train_length_sweep.py), and clear
errors for bad inputs."""

import warnings
from types import SimpleNamespace

import pytest
import torch

from transformer_book import (
    GroupedQueryAttention,
    ModernConfig,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    alibi_mask,
    alibi_slopes,
    apply_rotary,
    causal_lm_loss,
    llama_from_hf,
    llama_parameter_pairs,
    rope_frequencies,
    rotary_table,
    swiglu_hidden,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import (
        BloomConfig,
        BloomModel,
        LlamaConfig,
        LlamaForCausalLM,
        logging,
    )
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

logging.set_verbosity_error()


def small_llama(kv_heads, tie=False, seed=0):
    torch.manual_seed(seed)
    sizes = dict(vocab_size=40, hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4)
    special_ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
    config = LlamaConfig(
        **sizes,
        **special_ids,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=tie,
        rope_theta=500000.0,
    )
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
        steps = [first] + [ours(tokens[:, t : t + 1], caches, offset=t) for t in range(25, 40)]
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
        assert torch.allclose(apply_rotary(q.expand(2, 16), cos, sin).norm(dim=-1), q.norm(), atol=1e-12)
    assert max(scores) - min(scores) < 1e-5  # float32 angles


def test_rmsnorm_equals_torch_and_swiglu_sizes():
    norm, theirs = RMSNorm(12), torch.nn.RMSNorm(12, eps=1e-6)
    x = torch.randn(3, 12)
    assert torch.allclose(norm(x), theirs(x), atol=1e-6)
    assert swiglu_hidden(4096) == 11008 and swiglu_hidden(128, 16) == 352
    assert sum(p.numel() for p in SwiGLU(8, 24).parameters()) == 3 * 8 * 24


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: RMSNorm(0), "d_model must be a positive int; got d_model=0"),
        (lambda: RMSNorm(8, eps=-1), "eps must be a positive number; got eps=-1"),
        (lambda: SwiGLU(8, 2.5), "d_ff must be a positive int; got d_ff=2.5"),
        (lambda: swiglu_hidden(64, 0), "multiple_of must be a positive int"),
        (
            lambda: GroupedQueryAttention(32, 4, 3),
            "heads must be a multiple of kv_heads .*got heads=4, kv_heads=3",
        ),
        (lambda: GroupedQueryAttention(30, 4), "d_model must split evenly into heads"),
        (lambda: GroupedQueryAttention(32, 4, layout="pairs"), "layout must be one of"),
        (lambda: ModernConfig(10, d_model=24, heads=8), "heads of an even size d_k"),
        (lambda: ModernConfig(10, heads=4, kv_heads=3), "got heads=4, kv_heads=3"),
        (
            lambda: ModernConfig(10, theta=0),
            "theta must be a positive number; got theta=0",
        ),
        (lambda: rotary_table(torch.arange(4), 7), "d_k must be even"),
        (
            lambda: rotary_table(torch.ones(4), 8),
            "positions must be a 1-axis integer tensor",
        ),
        (
            lambda: apply_rotary(torch.ones(4, 8), *rotary_table(torch.arange(4), 8), layout="x"),
            "layout must be one of",
        ),
        (
            lambda: apply_rotary(torch.ones(5, 8), *rotary_table(torch.arange(4), 8)),
            r"cos and sin must have shape \(seq, d_k\) = \(5, 8\)",
        ),
        (lambda: RMSNorm(8)(torch.ones(2, 7)), "x must end with d_model=8 features"),
        (
            lambda: ModernConfig(10, positions="relative"),
            "positions must be one of .*got positions='relative'",
        ),
        (
            lambda: ModernConfig(10, norm="batch"),
            "norm must be one of .*got norm='batch'",
        ),
        (lambda: ModernConfig(10, feed_forward="relu"), "feed_forward must be one of"),
        (
            lambda: ModernConfig(10, max_len=0),
            "max_len must be a positive int; got max_len=0",
        ),
        (
            lambda: ModernConfig(10, d_model=15, heads=3, positions="sinusoidal"),
            "sinusoidal positions need an even d_model; got d_model=15",
        ),
        (lambda: alibi_slopes(0), "heads must be a positive int; got heads=0"),
        (
            lambda: alibi_mask(4, 3, offset=-2),
            "offset must be an int >= 0; got offset=-2",
        ),
        (
            lambda: ModernDecoder(ModernConfig(10, d_model=16, heads=2, layers=1, positions="learned", max_len=4))(
                torch.ones(1, 5, dtype=torch.long)
            ),
            r"positions 0..4 do not fit the learned table of max_len=4",
        ),
    ],
)
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


@pytest.mark.parametrize("heads", [4, 6, 8])
def test_alibi_probabilities_equal_bloom(heads):
    """BLOOM adds slope * key position to the scores, Press's ALiBi -slope * (query - key):
    the two differ by a constant on each row, which the softmax removes."""
    assert torch.equal(alibi_slopes(heads), _get_alibi_slopes(heads, "cpu"))
    torch.manual_seed(0)
    config = BloomConfig(
        vocab_size=50,
        hidden_size=8 * heads,
        n_layer=1,
        n_head=heads,
        attn_implementation="eager",
    )
    theirs = BloomModel(config).double().eval()
    captured = {}
    attention = theirs.h[0].self_attention
    attention.query_key_value.register_forward_hook(lambda module, inputs, output: captured.update(qkv=output))
    tokens = torch.randint(0, 50, (2, 40))
    with torch.no_grad():
        their_probs = theirs(tokens, output_attentions=True).attentions[0]  # (2, h, 40, 40)
    queries, keys, _ = attention._reshape(captured["qkv"])  # (2, h, 40, 8) each
    scores = queries @ keys.transpose(-1, -2) / 8**0.5  # (2, h, 40, 40)
    ours = torch.softmax(scores + alibi_mask(heads, 40, dtype=torch.float64), dim=-1)
    assert torch.allclose(ours, their_probs, atol=1e-6)  # BLOOM's softmax is in float32
    # without the bias (the causal mask alone) the probabilities differ
    causal = alibi_mask(heads, 40, dtype=torch.float64).isinf()
    plain = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
    assert (plain - their_probs).abs().max() > 1e-2


def test_alibi_mask_is_press_bias_and_cached_decoding_agrees():
    mask = alibi_mask(2, 3, offset=1)  # (1, heads, queries, keys)
    slopes = alibi_slopes(2)  # 1/16, 1/256
    assert mask.shape == (1, 2, 3, 4) and slopes.tolist() == [2**-4, 2**-8]
    assert mask[0, 0, 0].tolist() == [-1 / 16, 0.0, float("-inf"), float("-inf")]
    assert mask[0, 1, 2].tolist() == [-3 / 256, -2 / 256, -1 / 256, 0.0]
    assert torch.equal(alibi_mask(2, 4)[:, :, 1:], mask)


@pytest.mark.parametrize(
    "options",
    [
        {"positions": "alibi"},
        {"positions": "learned"},
        {"positions": "sinusoidal"},
        {"positions": "none"},
        {"norm": "layer"},
        {"feed_forward": "gelu"},
    ],
)
def test_undone_choices_decode_with_the_cache_like_the_full_pass(options):
    torch.manual_seed(0)
    config = ModernConfig(30, d_model=16, heads=4, kv_heads=2, layers=2, max_len=12, **options)
    model = ModernDecoder(config).double().eval()
    tokens = torch.randint(0, 30, (2, 12))
    with torch.no_grad():
        full = model(tokens)
        caches = model.new_caches()
        steps = [model(tokens[:, :5], caches)]
        steps += [model(tokens[:, i : i + 1], caches, i) for i in range(5, 12)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-10)


def test_undone_choices_have_the_parts_they_name():
    def parts(**options):
        model = ModernDecoder(ModernConfig(30, d_model=16, heads=4, layers=1, **options))
        return {type(m).__name__ for m in model.modules()}, dict(model.named_parameters())

    names, weights = parts(norm="layer", feed_forward="gelu")
    assert "LayerNorm" in names and "RMSNorm" not in names and "SwiGLU" not in names
    assert names >= {"ActivationFeedForward"}
    zeros = [n for n in weights if n.endswith(("beta", "bias"))]
    assert zeros and all(not weights[n].any() for n in zeros)  # biases start at zero
    assert ModernConfig(30, d_model=16, feed_forward="gelu").hidden == 64
    _, learned = parts(positions="learned", max_len=20)
    assert learned["positions.weight"].shape == (20, 16)
    # no rotation: the positions come from the table, ALiBi's mask or nothing at all
    tokens = torch.randint(0, 30, (1, 6))
    torch.manual_seed(1)
    nope = ModernDecoder(ModernConfig(30, d_model=16, heads=4, layers=1, positions="none"))
    torch.manual_seed(1)
    rope = ModernDecoder(ModernConfig(30, d_model=16, heads=4, layers=1))
    with torch.no_grad():
        assert torch.equal(nope(tokens)[:, 0], rope(tokens)[:, 0])  # position 0: no turn
        assert not torch.allclose(nope(tokens)[:, 1:], rope(tokens)[:, 1:])


LLAMA3 = dict(
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=8192,
)


@pytest.mark.parametrize(
    "rope",
    [dict(rope_type="llama3", **LLAMA3), dict(rope_type="linear", factor=4.0)],
    ids=["llama3", "linear"],
)
def test_scaled_rope_types_equal_llama_in_float64(rope):
    """Llama 3.1's rope type (at head size 8 and base 500,000: two pairs kept, one blended,
    one slowed 8 times) and position interpolation, as transformers computes them."""
    torch.manual_seed(0)
    config = LlamaConfig(
        **{
            **small_llama(2).config.to_dict(),
            "rope_parameters": dict(rope, rope_theta=500000.0),
        }
    )
    theirs = LlamaForCausalLM(config).double().eval()
    ours = llama_from_hf(theirs)
    assert ours.config.rope_scaling == rope
    frequencies = rope_frequencies(8, 500000.0, rope)
    assert torch.equal(frequencies, theirs.model.rotary_emb.inv_freq.float())
    plain = rope_frequencies(8, 500000.0)
    if rope["rope_type"] == "llama3":  # kept, kept, blended, slowed
        ratio = (plain / frequencies).tolist()
        assert ratio[:2] == [1, 1] and 1.5 < ratio[2] < 7.5 and ratio[3] == pytest.approx(8)
    tokens = torch.randint(0, 40, (2, 260), generator=torch.Generator().manual_seed(1))
    their_logits, our_logits = theirs(tokens).logits, ours(tokens)
    assert (our_logits - their_logits).abs().max() < 1e-9
    causal_lm_loss(our_logits, tokens, pad_id=None).backward()
    causal_lm_loss(their_logits, tokens, pad_id=None).backward()
    for name, mine, their in llama_parameter_pairs(ours, theirs):
        assert (mine.grad - their.grad).abs().max() < 1e-9, name


def test_rope_scaling_rules_and_refusals():
    plain = rope_frequencies(16, 10000.0)
    assert torch.equal(rope_frequencies(16, 10000.0, {"rope_type": "linear", "factor": 2.0}), plain / 2)
    ntk = rope_frequencies(16, 10000.0, {"rope_type": "ntk", "factor": 2.0})
    assert ntk[0] == plain[0] and torch.allclose(ntk[-1], plain[-1] / 2)  # fast kept, slowest halved
    cos, _ = rotary_table(torch.arange(6), 16, scaling={"rope_type": "linear", "factor": 2.0})
    assert torch.allclose(cos[4], rotary_table(torch.arange(3), 16)[0][2])  # position 4 reads as 2
    with pytest.raises(ValueError, match=r"rope_scaling must be None or a dict .*'yarn'"):
        rope_frequencies(16, scaling={"rope_type": "yarn", "factor": 2.0})
    with pytest.raises(ValueError, match=r"rope_type 'llama3' needs \['low_freq_factor'"):
        ModernConfig(30, rope_scaling={"rope_type": "llama3", "factor": 8.0})
    with pytest.raises(ValueError, match="rope_scaling factor must be"):
        ModernConfig(30, rope_scaling={"rope_type": "linear", "factor": 0})
    torch.manual_seed(0)
    config = LlamaConfig(
        **{
            **small_llama(2).config.to_dict(),
            "rope_parameters": {
                "rope_type": "dynamic",
                "factor": 2.0,
                "rope_theta": 1e4,
            },
        }
    )
    refused = r"LlamaConfig has rope_type='dynamic', which llama_from_hf cannot copy: it reads rope_type 'default' / 'linear' / 'llama3' only"
    with pytest.raises(ValueError, match=refused):
        llama_from_hf(LlamaForCausalLM(config))
    # transformers 4 kept rope_theta and rope_scaling (its type once named "type"): read too
    fields = {key: getattr(config, key) for key in ("attention_bias", "mlp_bias", "hidden_act")}
    old = SimpleNamespace(**fields, hidden_size=32, num_attention_heads=4, rope_theta=1e4)
    older = type("LlamaForCausalLM", (), {"model": None, "config": old})()
    for scaling in ({"type": "yarn", "factor": 2.0}, {"rope_type": "yarn", "factor": 2.0}):
        old.rope_scaling = scaling
        with pytest.raises(
            ValueError, match=refused.replace("dynamic", "yarn").replace("LlamaConfig", "SimpleNamespace")
        ):
            llama_from_hf(older)


def test_every_projection_into_the_residual_stream_starts_as_gpt2s():
    torch.manual_seed(0)
    model = ModernDecoder(ModernConfig(30, d_model=64, heads=4, layers=8, feed_forward="gelu"))
    assert isinstance(model.layers[0].feed_forward.contract, torch.nn.Linear)
    torch.manual_seed(0)
    swiglu = ModernDecoder(ModernConfig(30, d_model=64, heads=4, layers=8))
    for layer, other in zip(model.layers, swiglu.layers):
        for weight in (
            layer.self_attn.output_proj.weight,
            layer.feed_forward.contract.weight,
            other.feed_forward.down.weight,
        ):
            assert 0.02 / 4 * 0.8 < weight.std() < 0.02 / 4 * 1.2  # 0.02 / sqrt(2 * 8)
        assert 0.02 * 0.9 < layer.self_attn.query_proj.weight.std() < 0.02 * 1.1


def test_the_sliding_window_exercise_keeps_transformers_rule():
    """Chapter 16's exercise 4 (book_exercises.ch16): its solution is transformers' sliding
    window (the window includes the query), checked against transformers' own mask function."""
    from transformers.masking_utils import sliding_window_causal_mask_function

    from book_exercises.ch16 import sliding_window_mask

    for seq, window in ((6, 3), (9, 4), (5, 1), (4, 10)):
        rule = sliding_window_causal_mask_function(window)
        theirs = torch.tensor(
            [[bool(rule(0, 0, torch.tensor(i), torch.tensor(j))) for j in range(seq)] for i in range(seq)]
        )
        assert torch.equal(sliding_window_mask(seq, window), theirs), (seq, window)
