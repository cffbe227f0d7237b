"""Unit tests of chapter 8's code: the generator and label smoothing (``generator``), sampling (``decoding``)."""

import math
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_book
from transformer_book import Embeddings, LabelSmoothingLoss, OutputLayer, make_model, sample_next_token

PAD = 0

# --- OutputLayer ----------------------------------------------------------------------------------


def test_output_layer_is_log_softmax_of_a_linear_layer():
    torch.manual_seed(0)
    generator = OutputLayer(16, 11)
    x = torch.randn(2, 5, 16)
    out = generator(x)
    assert out.shape == (2, 5, 11)
    assert torch.allclose(out, torch.log_softmax(x @ generator.proj.weight.T + generator.proj.bias, -1), atol=1e-6)
    assert torch.allclose(out.exp().sum(-1), torch.ones(2, 5), atol=1e-6)


def test_output_layer_is_stable_for_large_logits():
    generator = OutputLayer(2, 3)
    with torch.no_grad():
        generator.proj.weight.copy_(torch.tensor([[1000.0, 0.0], [999.0, 0.0], [0.0, 0.0]]))
        generator.proj.bias.zero_()
        out = generator(torch.tensor([[1.0, 0.0]]))
    assert torch.isfinite(out).all()
    assert out[0, 2].item() == pytest.approx(-1000.3133, abs=1e-3)


def test_output_layer_nll_equals_cross_entropy_of_its_logits():
    torch.manual_seed(1)
    generator = OutputLayer(8, 7)
    x, targets = torch.randn(6, 8), torch.randint(7, (6,))
    assert torch.allclose(F.nll_loss(generator(x), targets), F.cross_entropy(generator.proj(x), targets))


def test_output_layer_refuses_the_wrong_width_by_name():
    with pytest.raises(ValueError, match=re.escape("d_model=16); got shape (2, 5, 11)")):
        OutputLayer(16, 11)(torch.zeros(2, 5, 11))


@pytest.mark.parametrize(("d_model", "vocab_size"), [(0, 5), (4, 0)])
def test_output_layer_refuses_nonpositive_sizes(d_model, vocab_size):
    with pytest.raises(ValueError, match=f"d_model={d_model}, vocab_size={vocab_size}"):
        OutputLayer(d_model, vocab_size)


def test_output_layer_can_be_tied_to_embeddings():
    embeddings, generator = Embeddings(9, 4), OutputLayer(4, 9)
    generator.proj.weight = embeddings.lookup.weight
    both = nn.ModuleList([embeddings, generator])
    assert sum(p.numel() for p in both.parameters()) == 9 * 4 + 9
    generator(embeddings(torch.tensor([[1, 2]]))).sum().backward()
    assert embeddings.lookup.weight.grad is generator.proj.weight.grad
    both.double()  # a device or dtype move keeps one shared tensor
    assert generator.proj.weight is embeddings.lookup.weight and generator.proj.weight.dtype == torch.float64


def test_output_layer_follows_dtype_and_device():
    assert OutputLayer(4, 6).double()(torch.zeros(2, 4, dtype=torch.float64)).dtype == torch.float64
    out = OutputLayer(4, 6).to("meta")(torch.zeros(2, 3, 4, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 3, 6)


def test_the_annotated_transformers_name_is_an_alias_and_the_attribute_keeps_it():
    # The class was renamed from Generator (confused with torch.Generator); the old name is kept,
    # and the model's attribute stays `generator`, so saved state dicts keep their keys.
    assert transformer_book.Generator is OutputLayer
    with torch.device("meta"):
        model = make_model(7, 9, num_layers=1, d_model=8, d_ff=16, heads=2)
    assert type(model.generator) is OutputLayer
    assert {"generator.proj.weight", "generator.proj.bias"} <= set(model.state_dict())


# --- sample_next_token ----------------------------------------------------------------------------


LOGITS = torch.tensor([[-4.0, -3.0, 0.5, -1.0, -0.5, 0.2, 3.0, 2.4, 1.6, -0.8]])


def test_temperature_zero_is_greedy():
    logits = torch.randn(5, 12)
    assert torch.equal(sample_next_token(logits, temperature=0.0), logits.argmax(-1))


def test_top_k_one_is_greedy_at_any_temperature():
    logits = torch.randn(50, 12)
    generator = torch.Generator().manual_seed(0)
    assert torch.equal(sample_next_token(logits, 3.0, top_k=1, generator=generator), logits.argmax(-1))


def test_seeded_sampling_is_reproducible():
    draws = [sample_next_token(LOGITS.expand(500, -1), generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(*draws)
    assert not torch.equal(
        draws[0], sample_next_token(LOGITS.expand(500, -1), generator=torch.Generator().manual_seed(8))
    )


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sample_frequencies_follow_softmax_of_scaled_logits(temperature):
    tokens = sample_next_token(LOGITS.expand(20000, -1), temperature, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(tokens, minlength=10).float() / 20000
    assert (frequencies - torch.softmax(LOGITS[0] / temperature, -1)).abs().max() < 0.015


def test_top_k_never_samples_outside_the_top_k():
    tokens = sample_next_token(LOGITS.expand(5000, -1), 5.0, top_k=3, generator=torch.Generator().manual_seed(0))
    assert set(tokens.tolist()) == {6, 7, 8}


def test_top_k_keeps_ties():
    logits = torch.tensor([[1.0, 2.0, 2.0, 0.0]])
    tokens = sample_next_token(logits.expand(2000, -1), top_k=1, generator=torch.Generator().manual_seed(0))
    assert set(tokens.tolist()) == {1, 2}


def test_log_probabilities_give_the_same_draws_as_logits():
    log_probs = F.log_softmax(LOGITS, -1)
    draws = [
        sample_next_token(values.expand(1000, -1), 0.7, generator=torch.Generator().manual_seed(3))
        for values in (LOGITS, log_probs)
    ]
    assert torch.equal(*draws)


def test_one_dimensional_logits_give_a_scalar():
    token = sample_next_token(LOGITS[0], generator=torch.Generator().manual_seed(0))
    assert token.shape == () and 0 <= token.item() < 10
    assert sample_next_token(LOGITS[0], temperature=0).item() == 6


def test_masked_logits_are_never_sampled():
    logits = LOGITS.clone()
    logits[0, 6] = float("-inf")  # the favourite, forbidden
    tokens = sample_next_token(logits.expand(3000, -1), 2.0, generator=torch.Generator().manual_seed(0))
    assert 6 not in tokens.tolist()


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        (dict(temperature=-0.5), r"temperature=-0.5"),
        (dict(top_k=0), r"vocabulary size 10; got top_k=0"),
        (dict(top_k=11), r"vocabulary size 10; got top_k=11"),
    ],
)
def test_bad_sampling_options_are_refused_by_name(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        sample_next_token(LOGITS, **options)


def test_logits_of_the_wrong_rank_are_refused_naming_the_shape():
    with pytest.raises(ValueError, match=re.escape("got shape (1, 1, 10)")):
        sample_next_token(LOGITS.unsqueeze(0))


def test_sampling_follows_the_device():
    assert sample_next_token(torch.zeros(3, 5, device="meta"), temperature=0).device.type == "meta"


# --- LabelSmoothingLoss ---------------------------------------------------------------------------


def random_batch(vocab=9, n=12, seed=0):
    torch.manual_seed(seed)
    log_probs = F.log_softmax(torch.randn(n, vocab), -1)
    targets = torch.randint(1, vocab, (n,))
    targets[[2, 5]] = PAD
    return log_probs, targets


def test_smoothed_targets_are_the_papers_distribution():
    loss = LabelSmoothingLoss(vocab_size=6, pad_id=PAD, smoothing=0.2)
    q = loss.smoothed_targets(torch.tensor([3, 1, PAD]))
    assert q.shape == (3, 6)
    assert torch.allclose(q[0], torch.tensor([0.0, 0.05, 0.05, 0.8, 0.05, 0.05]))
    assert torch.allclose(q[1], torch.tensor([0.0, 0.8, 0.05, 0.05, 0.05, 0.05]))
    assert torch.all(q[2] == 0)
    assert torch.allclose(q[:2].sum(-1), torch.ones(2))


def test_smoothed_targets_follow_the_requested_dtype():
    q = LabelSmoothingLoss(5, PAD).smoothed_targets(torch.tensor([1, 2]), torch.float64)
    assert q.dtype == torch.float64


def test_loss_equals_kl_divergence_over_real_positions():
    log_probs, targets = random_batch()
    loss = LabelSmoothingLoss(9, PAD, smoothing=0.1)
    q = loss.smoothed_targets(targets)
    expected = nn.KLDivLoss(reduction="sum")(log_probs, q) / (targets != PAD).sum()
    assert torch.allclose(loss(log_probs, targets), expected, atol=1e-6)


def test_no_smoothing_is_the_nll_loss_ignoring_padding():
    log_probs, targets = random_batch()
    assert torch.allclose(
        LabelSmoothingLoss(9, PAD, smoothing=0.0)(log_probs, targets),
        F.nll_loss(log_probs, targets, ignore_index=PAD),
        atol=1e-6,
    )


def test_padding_positions_do_not_matter():
    log_probs, targets = random_batch()
    loss = LabelSmoothingLoss(9, PAD)
    changed = log_probs.clone()
    changed[[2, 5]] = F.log_softmax(torch.randn(2, 9) * 10, -1)
    assert torch.equal(loss(log_probs, targets), loss(changed, targets))


def test_minus_infinity_where_the_target_is_zero_gives_no_nan():
    log_probs, targets = random_batch()
    logits = log_probs.clone()
    logits[:, PAD] = float("-inf")  # padding can never be predicted
    never_pad = F.log_softmax(logits, -1).requires_grad_()
    value = LabelSmoothingLoss(9, PAD)(never_pad, targets)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(never_pad.grad).all()
    assert torch.isnan(
        nn.KLDivLoss(reduction="sum")(never_pad.detach(), LabelSmoothingLoss(9, PAD).smoothed_targets(targets))
    )


def test_a_batch_of_only_padding_gives_zero_not_nan():
    log_probs, _ = random_batch()
    log_probs.requires_grad_(True)
    value = LabelSmoothingLoss(9, PAD)(log_probs, torch.zeros(12, dtype=torch.long))
    value.backward()
    assert value.item() == 0.0 and torch.all(log_probs.grad == 0)


@pytest.mark.parametrize("smoothing", [0.1, 0.3])
def test_minimum_is_at_the_smoothed_distribution(smoothing):
    loss = LabelSmoothingLoss(10, PAD, smoothing)
    target = torch.tensor([4])
    q = loss.smoothed_targets(target)
    assert loss(q.log(), target).item() == pytest.approx(0.0, abs=1e-6)  # log 0 = -inf at padding: still 0
    confident = torch.full((1, 10), 1e-4)
    confident[0, 4] = 1 - 8e-4
    assert loss(confident.log(), target) > 0.05  # over-confidence costs


def test_closed_form_against_the_predicted_probability():
    epsilon, vocab = 0.1, 10
    loss = LabelSmoothingLoss(vocab, PAD, epsilon)
    for p in (0.2, 0.9, 0.99):
        predicted = torch.full((1, vocab), (1 - p) / (vocab - 2), dtype=torch.float64)
        predicted[0, PAD], predicted[0, 1] = 0.0, p
        expected = (1 - epsilon) * math.log((1 - epsilon) / p) + epsilon * math.log(epsilon / (1 - p))
        assert loss(predicted.log(), torch.tensor([1])).item() == pytest.approx(expected, abs=1e-9)


def test_gradient_is_prediction_minus_target():
    log_probs, targets = random_batch()
    logits = log_probs.clone().requires_grad_(True)
    loss = LabelSmoothingLoss(9, PAD, 0.1)
    loss(F.log_softmax(logits, -1), targets).backward()
    real = targets != PAD
    expected = (torch.softmax(logits.detach(), -1) - loss.smoothed_targets(targets)) / real.sum()
    assert torch.allclose(logits.grad[real], expected[real], atol=1e-6)


def test_loss_follows_dtype_and_device():
    log_probs, targets = random_batch()
    assert LabelSmoothingLoss(9, PAD)(log_probs.double(), targets).dtype == torch.float64
    meta = LabelSmoothingLoss(9, PAD).smoothed_targets(torch.zeros(4, dtype=torch.long, device="meta"))
    assert meta.device.type == "meta"


@pytest.mark.parametrize(
    ("arguments", "pattern"),
    [
        (dict(vocab_size=9, pad_id=0, smoothing=1.0), "smoothing=1.0"),
        (dict(vocab_size=9, pad_id=0, smoothing=-0.1), "smoothing=-0.1"),
        (dict(vocab_size=2, pad_id=0), "vocab_size=2"),
        (dict(vocab_size=9, pad_id=9), re.escape("[0, 9); got pad_id=9")),
    ],
)
def test_bad_settings_are_refused_by_name(arguments, pattern):
    with pytest.raises(ValueError, match=pattern):
        LabelSmoothingLoss(**arguments)


def test_shape_mismatches_are_refused_naming_both_shapes():
    log_probs, targets = random_batch()
    loss = LabelSmoothingLoss(9, PAD)
    with pytest.raises(ValueError, match=re.escape("got (12, 9) and (11,)")):
        loss(log_probs, targets[:11])
    with pytest.raises(ValueError, match=re.escape("vocab_size=9) and targets (N,); got (2, 6, 9)")):
        loss(log_probs.view(2, 6, 9), targets)


def test_out_of_range_targets_are_refused_naming_the_values():
    log_probs, targets = random_batch()
    targets[0] = 9
    with pytest.raises(
        ValueError, match=re.escape("targets must be token ids in [0, vocab_size=9); got values from 0 to 9")
    ):
        LabelSmoothingLoss(9, PAD)(log_probs, targets)


def test_non_tensor_and_wrong_dtype_inputs_are_refused_by_name():
    generator = OutputLayer(16, 11)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor; got list"):
        generator([[0.0] * 16])
    with pytest.raises(
        ValueError, match=r"x has dtype torch\.float64, not torch\.float32 like the module's parameters"
    ):
        generator(torch.zeros(2, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"logits must be a floating-point tensor; got dtype torch\.int64"):
        sample_next_token(torch.ones(2, 11, dtype=torch.long))
    loss = LabelSmoothingLoss(9, PAD)
    log_probs, targets = random_batch()
    with pytest.raises(TypeError, match=r"targets must be a torch\.Tensor; got list"):
        loss(log_probs, targets.tolist())
    with pytest.raises(ValueError, match=r"targets must be integer token ids; got dtype torch\.float32"):
        loss(log_probs, targets.float())


def test_empty_batches_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OutputLayer(16, 11)(torch.randn(0, 5, 16)).shape == (0, 5, 11)
        assert sample_next_token(torch.randn(0, 11), temperature=0.7).shape == (0,)
        loss = LabelSmoothingLoss(9, PAD)(torch.randn(0, 9).log_softmax(-1), torch.zeros(0, dtype=torch.long))
    assert loss.item() == 0.0
