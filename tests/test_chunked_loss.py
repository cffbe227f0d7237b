"""Chapter 18's cheaper loss: ``chunked_cross_entropy`` equals the output layer followed by
``F.cross_entropy`` (the loss and both gradients, float64, within 1e-12: only the order of the
additions differs), for chunks that divide the rows, that do not, of one row and of more than all,
with and without ignored targets; ``lm_loss`` equals ``causal_lm_loss`` of the logits on chapter 15's
GPT (and through ``train_lm``'s ``loss_of``); bfloat16 stays near float32 at the initialisation; bad
arguments are named. No timing is asserted."""

import pytest
import torch
import torch.nn.functional as F

from transformer_book import (
    GPT,
    GPTConfig,
    PoemVocabulary,
    causal_lm_loss,
    chunked_cross_entropy,
    lm_loss,
    train_lm,
)


def _inputs(n=50, d=8, vocab=30, seed=0):
    torch.manual_seed(seed)
    hidden = torch.randn(n, d, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab, d, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, vocab, (n,))
    return hidden, weight, targets


@pytest.mark.parametrize("chunk", [1, 7, 10, 50, 64])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_chunked_equals_the_head_and_cross_entropy(chunk, ignore_index):
    hidden, weight, targets = _inputs()
    targets[::4] = 3  # some targets ignored when ignore_index is 3
    reference = F.cross_entropy(hidden @ weight.T, targets, ignore_index=ignore_index)
    ours = chunked_cross_entropy(hidden, weight, targets, ignore_index, chunk)
    assert ours.dtype == torch.float64
    assert abs(ours.item() - reference.item()) < 1e-12
    upstream = 2.5  # a gradient that arrives from above is applied
    expected = torch.autograd.grad(upstream * reference, (hidden, weight))
    got = torch.autograd.grad(upstream * ours, (hidden, weight))
    for a, b in zip(got, expected):
        assert (a - b).abs().max().item() < 1e-12


def test_every_target_ignored_gives_zero_not_nan():
    hidden, weight, _ = _inputs()
    loss = chunked_cross_entropy(hidden, weight, torch.full((50,), 3), ignore_index=3)
    loss.backward()
    assert loss.item() == 0.0
    assert hidden.grad.abs().max().item() == 0.0 and weight.grad.abs().max().item() == 0.0


def _gpt_and_tokens(dtype=torch.float64):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, max_len=16, d_model=16, heads=2, layers=2)).to(dtype)
    tokens = torch.randint(1, 40, (3, 12))
    tokens[0, 9:] = 0  # padding at the end of one row
    return model, tokens


def test_lm_loss_equals_the_causal_lm_loss_of_the_logits():
    model, tokens = _gpt_and_tokens()
    reference = causal_lm_loss(model(tokens), tokens, pad_id=0)
    expected = torch.autograd.grad(reference, list(model.parameters()))
    ours = lm_loss(0, chunk=5)(model, tokens)
    got = torch.autograd.grad(ours, list(model.parameters()))
    assert abs(ours.item() - reference.item()) < 1e-12
    for a, b in zip(got, expected):
        assert (a - b).abs().max().item() < 1e-12


def test_bf16_stays_near_float32_at_the_initialisation():
    model, tokens = _gpt_and_tokens(torch.float32)
    full = lm_loss(0)(model, tokens).item()
    half = lm_loss(0, precision="bf16")(model, tokens)
    assert half.dtype == torch.float32  # the loss itself is float32
    assert abs(half.item() - full) < 0.01  # measured: about 1e-5 at the initialisation


def test_train_lm_takes_the_cheaper_loss():
    poems = ["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。", "春眠不觉晓，处处闻啼鸟。"]
    vocab = PoemVocabulary.from_poems(poems)
    runs = []
    for loss_of in (None, lm_loss(vocab.pad_id, chunk=4)):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=len(vocab), max_len=16, d_model=16, heads=2, layers=1))
        model = model.double()
        runs.append(train_lm(model, vocab, poems, steps=3, batch_size=2, loss_of=loss_of))
    assert max(abs(a - b) for a, b in zip(*runs)) < 1e-9


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda h, w, t: chunked_cross_entropy(h, w, t, chunk=0), "chunk"),
        (lambda h, w, t: chunked_cross_entropy(h, w[:, :3], t), "must agree on d"),
        (lambda h, w, t: chunked_cross_entropy(h[0], w, t), "must agree on d"),
        (lambda h, w, t: chunked_cross_entropy(h, w, t[:4]), r"targets must be a long tensor of shape \(50,\)"),
        (lambda h, w, t: chunked_cross_entropy(h, w, t.float()), "targets must be a long tensor"),
        (lambda h, w, t: lm_loss(0, precision="fp8"), "precision must be one of"),
        (lambda h, w, t: lm_loss(0, chunk=-1), "chunk"),
    ],
)
def test_bad_arguments_are_named(call, message):
    hidden, weight, targets = _inputs()
    with pytest.raises(ValueError, match=message):
        call(hidden, weight, targets)
