"""Tests for transformer_book.gpt and .poet (chapter 15): the decoder-only model, its parity
with Hugging Face's GPT-2 in float64, the cache, bad input, and the poet."""

import pytest
import torch

from transformer_book import (
    GPT,
    GPTConfig,
    PoemVocabulary,
    Poet,
    causal_lm_loss,
    gpt_from_hf,
    hf_parameter_pairs,
    regular_form,
    subsequent_mask,
    train_lm,
)

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def hf_model(**changes):
    settings = dict(vocab_size=40, n_positions=24, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
    settings.update(changes)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**settings)).double().eval()


@pytest.mark.parametrize("activation", ["gelu_new", "gelu", "relu"])
@pytest.mark.parametrize("tie", [True, False])
def test_parity_with_hugging_face_in_float64(activation, tie):
    theirs = hf_model(activation_function=activation, tie_word_embeddings=tie)
    ours = gpt_from_hf(theirs)
    assert ours.config.tie_embeddings is tie and not ours.training
    tokens = torch.randint(0, 40, (3, 24), generator=torch.Generator().manual_seed(1))
    our_logits, their_logits = ours(tokens), theirs(tokens).logits
    assert our_logits.dtype == torch.float64
    assert (our_logits - their_logits).abs().max() < 1e-12
    causal_lm_loss(our_logits, tokens, pad_id=None).backward()
    causal_lm_loss(their_logits, tokens, pad_id=None).backward()
    pairs = hf_parameter_pairs(ours, theirs)
    assert len({id(mine) for _, mine, _, _ in pairs}) == len(list(ours.parameters()))
    for name, mine, their, convert in pairs:
        assert (mine.grad - convert(their.grad)).abs().max() < 1e-12, name


def test_the_loss_is_the_shifted_cross_entropy_like_hugging_faces():
    theirs = hf_model()
    tokens = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(2))
    output = theirs(tokens, labels=tokens)  # their own shift (computed in float32)
    ours = causal_lm_loss(output.logits, tokens, pad_id=None)
    assert abs(ours.item() - output.loss.item()) < 1e-5


def test_the_cache_gives_the_same_logits_one_token_at_a_time():
    ours = gpt_from_hf(hf_model())
    tokens = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(3))
    whole = ours(tokens)
    caches = ours.new_caches()
    steps = [ours(tokens[:, t : t + 1], caches, offset=t) for t in range(12)]
    assert (torch.cat(steps, dim=1) - whole).abs().max() < 1e-12


def test_the_model_is_causal():
    torch.manual_seed(0)
    model = GPT(GPTConfig(30, max_len=16, d_model=16, heads=2, layers=2)).eval()
    tokens = torch.randint(0, 30, (1, 10))
    changed = tokens.clone()
    changed[0, 6] = (tokens[0, 6] + 1) % 30
    a, b = model(tokens), model(changed)
    assert torch.equal(a[:, :6], b[:, :6]) and not torch.equal(a[:, 6:], b[:, 6:])
    assert torch.equal(
        subsequent_mask(3, offset=2)[0].int(), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    )


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("learned", [True, False])
def test_the_2017_choices_build_and_run(norm_first, learned):
    config = GPTConfig(
        30,
        max_len=16,
        d_model=16,
        heads=2,
        layers=1,
        norm_first=norm_first,
        learned_positions=learned,
        activation="relu",
        tie_embeddings=False,
    )
    model = GPT(config)
    assert (model.final_norm is None) is not norm_first
    assert model(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 30)


def test_bad_input_is_refused_with_the_value_named():
    model = GPT(GPTConfig(30, max_len=8, d_model=16, heads=2, layers=1))
    with pytest.raises(ValueError, match=r"token ids in \[0, vocab_size=30\)"):
        model(torch.tensor([[3, 30]]))
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        model(torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="one cache per layer"):
        model(torch.zeros(1, 2, dtype=torch.long), caches=[{}, {}])
    with pytest.raises(ValueError, match="activation must be one of"):
        GPTConfig(30, activation="swish")
    with pytest.raises(ValueError, match="d_model must be a positive int; got d_model=0"):
        GPTConfig(30, d_model=0)
    with pytest.raises(ValueError, match="must agree on batch and seq"):
        causal_lm_loss(torch.zeros(1, 4, 30), torch.zeros(1, 5, dtype=torch.long))


def test_gpt_from_hf_refuses_what_it_cannot_copy():
    with pytest.raises(TypeError, match="GPT2LMHeadModel; got torch.nn.modules.linear.Linear"):
        gpt_from_hf(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"):
        gpt_from_hf(hf_model(scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(ValueError, match="activation_function='silu'"):
        gpt_from_hf(hf_model(activation_function="silu"))


def small_poet():
    poems = ["白日依山尽，黄河入海流。欲穷千里目，更上一层楼。", "床前明月光，疑是地上霜。举头望明月，低头思故乡。"]
    vocab = PoemVocabulary.from_poems(poems)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), max_len=32, d_model=32, heads=2, layers=1))
    losses = train_lm(model, vocab, poems, steps=30, batch_size=2, lr=1e-2, seed=0)
    return Poet(model, vocab), losses


def test_training_lowers_the_loss_and_the_poet_is_seeded():
    poet, losses = small_poet()
    assert losses[-1] < losses[0] / 2
    assert poet.write(seed=1) == poet.write(seed=1)
    assert poet.write("床前", temperature=0).startswith("床前")
    acrostic = poet.write("白黄欲更", acrostic=True, seed=3)
    verses = [verse for verse in acrostic.replace("。", "，").split("，") if verse]
    assert [verse[0] for verse in verses] == list("白黄欲更")


def test_the_poet_names_unknown_characters_and_bad_prompts():
    poet, _ = small_poet()
    with pytest.raises(ValueError, match="'风雨'"):
        poet.write("风白雨")
    with pytest.raises(TypeError, match="prompt must be a str"):
        poet.write(3)
    with pytest.raises(ValueError, match="1 to 8 characters"):
        poet.write("", acrostic=True)


def test_regular_form():
    assert regular_form("白日依山尽，黄河入海流。欲穷千里目，更上一层楼。")
    assert regular_form("白日依山尽，黄河入海流？欲穷千里目，更上一层楼。")
    assert not regular_form("白日依山尽，黄河入海流。欲穷千里目，更上一层。")
    assert not regular_form("白日依山尽。黄河入海流，欲穷千里目，更上一层楼。")
    assert not regular_form("白日依山尽，黄河入海流。")
    assert not regular_form("白日依山尽，黄河入海流。欲穷千里目，更上一层楼")
