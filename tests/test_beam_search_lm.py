"""Chapter 10's beam loop over the decoder-only models (GPT and the modern decoder)."""

import pytest
import torch

from transformer_book import (
    GPT,
    GPTConfig,
    ModernConfig,
    ModernDecoder,
    decode_loop,
    decoder_only_beam_search,
    decoder_only_scores,
)

VOCAB = 7


def models():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=VOCAB, max_len=16, d_model=16, heads=2, layers=2, dropout=0.0))
    modern = ModernDecoder(ModernConfig(vocab_size=VOCAB, max_len=16, d_model=16, heads=4, kv_heads=2, layers=2))
    return [gpt.double().eval(), modern.double().eval()]


def total_log_prob(model, tokens, prompt_length):
    """The log-probability of tokens[:, prompt_length:] given what comes before, by one plain pass."""
    log_probs = model(tokens[:, :-1]).log_softmax(dim=-1)
    picked = log_probs.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
    return picked[:, prompt_length - 1 :].sum(dim=1)


@pytest.mark.parametrize("model", models(), ids=["gpt", "modern"])
def test_beam_of_one_is_greedy(model):
    prompt = torch.tensor([[1, 2], [3, 4]])
    found, _ = decoder_only_beam_search(model, prompt, 5, beam_size=1)
    greedy = decode_loop(decoder_only_scores(model), prompt, 5, None, lambda scores, _: scores.argmax(dim=-1))
    assert torch.equal(found, greedy)


@pytest.mark.parametrize("model", models(), ids=["gpt", "modern"])
def test_beam_finds_the_most_probable_continuation(model):
    # Three new tokens from a vocabulary of 7: 343 continuations, few enough to score every one.
    prompt = torch.tensor([[1, 2]])
    every = torch.cartesian_prod(*[torch.arange(VOCAB)] * 3)  # (343, 3)
    scores = total_log_prob(model, torch.cat([prompt.expand(len(every), 2), every], dim=1), 2)
    found, score = decoder_only_beam_search(model, prompt, 3, beam_size=VOCAB**2)
    assert torch.equal(found[0, 2:], every[scores.argmax()])  # a beam of 49 keeps every 2-token prefix
    assert torch.allclose(score, scores.max(), atol=1e-12, rtol=0)


@pytest.mark.parametrize("model", models(), ids=["gpt", "modern"])
def test_the_cache_follows_its_hypotheses(model):
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    cached, cached_score = decoder_only_beam_search(model, prompt, 6, beam_size=3)
    plain, plain_score = decoder_only_beam_search(model, prompt, 6, beam_size=3, use_cache=False)
    assert torch.equal(cached, plain)
    assert torch.allclose(cached_score, plain_score, atol=1e-12, rtol=0)
    assert torch.allclose(cached_score, total_log_prob(model, cached, 3), atol=1e-12, rtol=0)


def test_a_beam_size_below_one_is_refused():
    with pytest.raises(ValueError, match="beam_size"):
        decoder_only_beam_search(models()[0], torch.tensor([[1]]), 3, beam_size=0)
