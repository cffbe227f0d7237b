"""Unit tests of transformer_book.model (chapter 9: assembly, parity with nn.Transformer) and
transformer_book.decoding (chapter 10: greedy, key/value cache, beam search, sampling)."""

import itertools
import math
import warnings

import pytest
import torch
from torch import nn

import transformer_book
from transformer_book import (
    EmbeddingWithPositions,
    LabelSmoothingLoss,
    LayerNorm,
    MultiHeadAttention,
    Transformer,
    beam_search,
    greedy_decode,
    length_penalized,
    load_torch_transformer,
    make_model,
    padding_mask,
    sample_decode,
    sequence_log_prob,
    sequence_loss,
    subsequent_mask,
    target_mask,
    top_p_filter,
    warmup_rate,
)

PAD, START, END = 0, 1, 2
SMALL = dict(num_layers=2, d_model=32, d_ff=64, heads=4)


def small_model(vocab=13, **options) -> Transformer:
    torch.manual_seed(0)
    return make_model(vocab, vocab, **(SMALL | options))


def padded_batch(vocab=13, batch=3, source_len=7, target_len=6):
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(3, vocab, (batch, source_len), generator=generator)
    target = torch.randint(3, vocab, (batch, target_len), generator=generator)
    target[:, 0] = START
    source[0, source_len - 2 :] = PAD
    target[1, target_len - 2 :] = PAD
    return source, target


# --- assembly ---------------------------------------------------------------------------------


def test_shapes_through_encode_decode_and_generator():
    model = make_model(11, 17, **SMALL).eval()
    source, target = torch.randint(3, 11, (2, 9)), torch.randint(3, 17, (2, 5))
    source_mask = padding_mask(source, PAD)
    memory = model.encode(source, source_mask)
    assert memory.shape == (2, 9, 32)
    hidden = model.decode(memory, source_mask, target, target_mask(target, PAD))
    assert hidden.shape == (2, 5, 32)
    assert torch.equal(hidden, model(source, target, source_mask, target_mask(target, PAD)))
    log_probs = model.generator(hidden)
    assert log_probs.shape == (2, 5, 17)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(2, 5), atol=1e-5)


def test_base_model_parameter_count_matches_the_formula():
    with torch.device("meta"):
        tied = make_model(37000, 37000, tie_weights=True)
        untied = make_model(37000, 37000)
    count = lambda model: sum(p.numel() for p in model.parameters())
    encoder_layer = 4 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 4 * 512
    decoder_layer = 8 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 6 * 512
    assert count(tied) == 6 * encoder_layer + 6 * decoder_layer + 37000 * 512 + 37000 == 63_119_496
    assert count(untied) == count(tied) + 2 * 37000 * 512
    assert all(p.device.type == "meta" for p in tied.parameters())


def test_defaults_are_the_paper_base_model():
    with torch.device("meta"):
        model = make_model(100, 100)
    assert len(model.encoder.layers) == len(model.decoder.layers) == 6
    attention = model.encoder.layers[0].self_attn
    assert (attention.d_model, attention.heads, attention.scale) == (512, 8, None)
    assert model.encoder.layers[0].feed_forward.expand.out_features == 2048
    assert not model.encoder.layers[0].sublayers[0].norm_first
    assert isinstance(model.encoder.norm, nn.Identity) and isinstance(model.decoder.norm, nn.Identity)
    assert {m.p for m in model.modules() if isinstance(m, nn.Dropout)} == {0.1}


def test_final_norm_follows_norm_first_unless_given():
    assert isinstance(small_model(norm_first=True).encoder.norm, LayerNorm)
    assert isinstance(small_model(norm_first=True).decoder.norm, LayerNorm)
    assert isinstance(small_model(final_norm=True).decoder.norm, LayerNorm)
    assert isinstance(small_model(norm_first=True, final_norm=False).encoder.norm, nn.Identity)


def test_xavier_uniform_bounds_every_matrix():
    model = small_model()
    for name, parameter in model.named_parameters():
        if parameter.dim() > 1:
            fan_out, fan_in = parameter.shape
            bound = math.sqrt(6 / (fan_in + fan_out))
            assert parameter.abs().max() <= bound + 1e-6, name
            assert parameter.std() > bound / 3, name  # uniform on [-a, a] has std a / sqrt(3)


def test_dropout_argument_reaches_every_dropout():
    model = small_model(dropout=0.0)
    assert {m.p for m in model.modules() if isinstance(m, nn.Dropout)} == {0.0}
    model = small_model(dropout=0.3)
    assert {m.p for m in model.modules() if isinstance(m, nn.Dropout)} == {0.3}


def test_tie_weights_shares_one_matrix():
    model = small_model(tie_weights=True)
    shared = model.generator.proj.weight
    assert model.source_embed.embeddings.lookup.weight is shared
    assert model.target_embed.embeddings.lookup.weight is shared
    untied = small_model()
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in model.parameters()) == 2 * 13 * 32


def test_attention_scale_reaches_every_attention():
    model = small_model(attention_scale=1.0)
    scales = [m.scale for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(scales) == 2 + 2 * 2 and set(scales) == {1.0}


def test_without_positions_the_encoder_is_permutation_equivariant():
    model = small_model(positional=False).eval()
    source = torch.tensor([[3, 4, 5, 6, 7]])
    shuffle = torch.tensor([4, 2, 0, 3, 1])
    memory = model.encode(source)
    assert torch.allclose(model.encode(source[:, shuffle]), memory[:, shuffle], atol=1e-5)
    with_positions = small_model().eval()
    assert not torch.allclose(
        with_positions.encode(source[:, shuffle]), with_positions.encode(source)[:, shuffle], atol=1e-3
    )


def test_embedding_with_positions_adds_the_table():
    layer = EmbeddingWithPositions(10, 8, dropout=0.0, max_len=20)
    tokens = torch.tensor([[3, 4, 5]])
    scaled = layer.embeddings(tokens)
    assert torch.allclose(layer(tokens), scaled + layer.positional_encoding.table[:3])
    bare = EmbeddingWithPositions(10, 8, dropout=0.0, positional=False)
    assert bare.positional_encoding is None
    assert torch.equal(bare(tokens), bare.embeddings(tokens))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_layers": 0}, r"num_layers=0"),
        ({"source_vocab": 0}, r"source_vocab=0"),
        ({"target_vocab": -3}, r"target_vocab=-3"),
        ({"dropout": 1.0}, r"dropout=1.0"),
        ({"attention_scale": 0.0}, r"attention_scale=0.0"),
        ({"target_vocab": 12, "tie_weights": True}, r"source_vocab=11, target_vocab=12"),
        ({"d_model": 30, "heads": 4}, r"d_model=30, heads=4"),
        ({"d_model": 15, "heads": 5}, r"d_model=15"),
    ],
)
def test_bad_configurations_name_the_values(options, message):
    arguments = {"source_vocab": 11, "target_vocab": 11} | SMALL | options
    with pytest.raises(ValueError, match=message):
        make_model(**arguments)


def test_float_masks_are_refused():
    model = small_model().eval()
    with pytest.raises(ValueError, match="boolean"):
        model.encode(torch.tensor([[3, 4, 5]]), torch.ones(1, 1, 3))


def test_follows_dtype_and_device():
    model = small_model().to(torch.float64).eval()
    source, target = padded_batch()
    assert model(source, target, padding_mask(source, PAD), target_mask(target, PAD)).dtype == torch.float64
    meta_model = small_model().to("meta")
    out = meta_model(source.to("meta"), target.to("meta"))
    assert out.device.type == "meta" and out.shape == (3, 6, 32)


def test_gradients_reach_every_parameter():
    model = small_model()
    source, target = padded_batch()
    loss = sequence_loss(model, source, target, PAD, LabelSmoothingLoss(13, PAD, 0.1))
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


# --- parity with nn.Transformer ---------------------------------------------------------------


def torch_pair(norm_first: bool):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = make_model(13, 13, **SMALL, dropout=0.0, norm_first=norm_first, final_norm=True)
    return load_torch_transformer(ours, theirs), theirs


@pytest.mark.parametrize("norm_first", [False, True])
def test_same_outputs_as_nn_transformer(norm_first):
    ours, theirs = torch_pair(norm_first)
    source, target = padded_batch()
    source_mask = padding_mask(source, PAD)
    look_ahead = subsequent_mask(target.size(1))
    mine = ours(source, target, source_mask, padding_mask(target, PAD) & look_ahead)
    their = theirs(
        ours.source_embed(source),
        ours.target_embed(target),
        tgt_mask=~look_ahead[0],
        src_key_padding_mask=~source_mask[:, 0],
        tgt_key_padding_mask=target == PAD,
        memory_key_padding_mask=~source_mask[:, 0],
    )
    assert torch.allclose(mine, their, atol=1e-5)
    # and gradients agree too: the same function, not just the same values
    mine.square().sum().backward()
    their.square().sum().backward()
    assert torch.allclose(
        ours.encoder.layers[0].feed_forward.expand.weight.grad, theirs.encoder.layers[0].linear1.weight.grad, atol=1e-4
    )


def test_loading_refuses_a_different_model_and_names_the_difference():
    _, theirs = torch_pair(norm_first=False)
    with pytest.raises(
        ValueError,
        match=r"encoder final norm \(ours False, theirs True\), decoder final norm \(ours False, theirs True\)",
    ):
        load_torch_transformer(small_model(), theirs)
    with pytest.raises(ValueError, match=r"encoder layers \(ours 3, theirs 2\).*decoder layers \(ours 3, theirs 2\)"):
        load_torch_transformer(small_model(num_layers=3, final_norm=True), theirs)
    with pytest.raises(ValueError, match=r"norm_first \(ours True, theirs False\)"):
        load_torch_transformer(small_model(norm_first=True), theirs)


# --- training helpers -------------------------------------------------------------------------


def test_warmup_rate_rises_linearly_then_decays_as_inverse_sqrt():
    d_model, warmup = 512, 4000
    assert warmup_rate(0, d_model, warmup) == warmup_rate(1, d_model, warmup) > 0
    assert warmup_rate(2000, d_model, warmup) == pytest.approx(warmup_rate(1000, d_model, warmup) * 2)
    assert warmup_rate(16000, d_model, warmup) == pytest.approx(warmup_rate(4000, d_model, warmup) / 2)
    assert warmup_rate(4000, d_model, warmup) == pytest.approx((d_model * warmup) ** -0.5)
    rates = [warmup_rate(step, d_model, warmup) for step in range(1, 12000)]
    assert rates.index(max(rates)) + 1 == warmup
    assert warmup_rate(4000, d_model, warmup, factor=2.0) == pytest.approx(2 * warmup_rate(4000, d_model, warmup))


@pytest.mark.parametrize(("d_model", "warmup"), [(512, 0), (0, 4000)])
def test_warmup_rate_refuses_nonpositive_sizes(d_model, warmup):
    with pytest.raises(ValueError, match=f"d_model={d_model}, warmup_steps={warmup}"):
        warmup_rate(10, d_model, warmup)


def test_sequence_loss_is_teacher_forcing_over_real_tokens():
    model = small_model().eval()
    source, target = padded_batch()
    loss_fn = nn.NLLLoss(ignore_index=PAD)
    loss = sequence_loss(model, source, target, PAD, loss_fn)
    source_mask = padding_mask(source, PAD)
    log_probs = model.generator(model(source, target[:, :-1], source_mask, target_mask(target[:, :-1], PAD)))
    picked = log_probs.gather(-1, target[:, 1:].unsqueeze(-1)).squeeze(-1)
    real = target[:, 1:] != PAD
    assert torch.allclose(loss, -picked[real].mean())


def test_a_few_steps_of_training_reduce_the_loss_on_copying():
    torch.manual_seed(0)
    model = make_model(8, 8, num_layers=1, d_model=32, d_ff=64, heads=2, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = LabelSmoothingLoss(8, PAD, 0.0)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(60):
        source = torch.randint(3, 8, (32, 5), generator=generator)
        target = torch.cat([torch.full((32, 1), START), source], dim=1)
        loss = sequence_loss(model, source, target, PAD, loss_fn)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


# --- decoding ---------------------------------------------------------------------------------


def test_cached_greedy_equals_plain_greedy():
    model = small_model(vocab=50).eval()
    source, _ = padded_batch(vocab=50, batch=4)
    source_mask = padding_mask(source, PAD)
    plain = greedy_decode(model, source, source_mask, START, 20, use_cache=False)
    cached = greedy_decode(model, source, source_mask, START, 20, use_cache=True)
    assert plain.shape == (4, 21) and torch.equal(plain, cached)
    assert (plain[:, 0] == START).all()


def test_greedy_repeats_the_end_token_and_stops_when_all_have_ended():
    model = small_model().eval()
    source, _ = padded_batch()
    free = greedy_decode(model, source, padding_mask(source, PAD), START, 12)
    end_id = int(free[0, 3])  # a token that sequence 0 emits at step 3 becomes "the end"
    stopped = greedy_decode(model, source, padding_mask(source, PAD), START, 12, end_id=end_id)
    for row in stopped:
        ends = (row[1:] == end_id).nonzero()
        if len(ends):
            assert (row[1 + ends[0, 0] :] == end_id).all()
    if all((row[1:] == end_id).any() for row in stopped):
        assert stopped.size(1) <= 13


def test_greedy_in_training_mode_is_random():
    model = small_model(vocab=50, dropout=0.5)
    source, _ = padded_batch(vocab=50, batch=8)
    torch.manual_seed(0)
    runs = [greedy_decode(model, source, None, START, 15) for _ in range(2)]
    assert not torch.equal(*runs)
    model.eval()
    assert torch.equal(greedy_decode(model, source, None, START, 15), greedy_decode(model, source, None, START, 15))


def test_beam_of_one_is_greedy():
    model = small_model(vocab=50).eval()
    source, _ = padded_batch(vocab=50, batch=4)
    source_mask = padding_mask(source, PAD)
    tokens, scores = beam_search(model, source, source_mask, START, 10, beam_size=1)
    greedy = greedy_decode(model, source, source_mask, START, 10)
    assert torch.equal(tokens, greedy)
    assert torch.allclose(scores, sequence_log_prob(model, source, source_mask, greedy), atol=1e-4)


@pytest.mark.parametrize("end_id", [None, 5])
def test_beam_search_cached_equals_plain_and_scores_are_log_probs(end_id):
    model = small_model(vocab=9).eval()
    source, _ = padded_batch(vocab=9, batch=4)
    source_mask = padding_mask(source, PAD)
    cached, cached_scores = beam_search(model, source, source_mask, START, 8, beam_size=3, end_id=end_id)
    plain, plain_scores = beam_search(model, source, source_mask, START, 8, beam_size=3, end_id=end_id, use_cache=False)
    assert torch.equal(cached, plain) and torch.allclose(cached_scores, plain_scores, atol=1e-5)
    recomputed = sequence_log_prob(model, source, source_mask, cached, end_id=end_id)
    assert torch.allclose(cached_scores, recomputed, atol=1e-4)


def test_a_beam_holding_every_prefix_is_exhaustive_search():
    torch.manual_seed(3)
    model = make_model(5, 5, num_layers=1, d_model=16, d_ff=32, heads=2).eval()
    source = torch.randint(0, 5, (1, 6))
    every = torch.tensor([[START, *rest] for rest in itertools.product(range(5), repeat=3)])
    scores = sequence_log_prob(model, source.expand(len(every), -1), None, every)
    tokens, score = beam_search(model, source, None, START, 3, beam_size=25)
    assert torch.equal(tokens[0], every[scores.argmax()])
    assert score.item() == pytest.approx(scores.max().item(), abs=1e-5)


def test_length_penalty_prefers_longer_finished_hypotheses():
    # The search is the same whatever the penalty; only the final choice among the beams changes, and a
    # larger penalty can only move it to a hypothesis that ends later.
    model = small_model(vocab=9).eval()
    source, _ = padded_batch(vocab=9, batch=2)
    plain, _ = beam_search(model, source, None, START, 6, beam_size=3, end_id=5)
    long, _ = beam_search(model, source, None, START, 6, beam_size=3, end_id=5, length_penalty=2.0)
    ended_at = lambda row: int((row[1:] == 5).nonzero()[0, 0]) if (row[1:] == 5).any() else row.numel()
    assert all(ended_at(b) >= ended_at(a) for a, b in zip(plain, long))


def test_sequence_log_prob_ignores_tokens_after_the_end():
    model = small_model().eval()
    source, _ = padded_batch()
    tokens = torch.tensor([[START, 4, END, 7, 8]] * 3)
    other = torch.tensor([[START, 4, END, 9, 3]] * 3)
    assert torch.allclose(
        sequence_log_prob(model, source, None, tokens, end_id=END),
        sequence_log_prob(model, source, None, other, end_id=END),
    )
    assert not torch.allclose(
        sequence_log_prob(model, source, None, tokens), sequence_log_prob(model, source, None, other)
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m, s: greedy_decode(m, s, None, START, 0), r"max_new_tokens=0"),
        (lambda m, s: beam_search(m, s, None, START, 5, beam_size=0), r"beam_size=0, max_new_tokens=5"),
        (lambda m, s: beam_search(m, s, None, START, -1), r"max_new_tokens=-1"),
    ],
)
def test_decoders_refuse_bad_lengths_by_name(call, message):
    model = small_model().eval()
    with pytest.raises(ValueError, match=message):
        call(model, torch.tensor([[3, 4, 5]]))


def test_decoding_past_the_positional_table_names_max_len():
    model = small_model(max_len=8).eval()
    with pytest.raises(ValueError, match="max_len=8"):
        greedy_decode(model, torch.tensor([[3, 4, 5]]), None, START, 10)


# --- chapter 10's additions ---------------------------------------------------------------------


def test_public_api_still_exports_the_decoders():
    for name in (
        "greedy_decode",
        "beam_search",
        "sequence_log_prob",
        "length_penalized",
        "top_p_filter",
        "sample_decode",
    ):
        assert getattr(transformer_book, name) is globals()[name]


def test_length_penalized_is_wu_et_al():
    scores = torch.tensor([-3.0, -6.0])
    lengths = torch.tensor([1.0, 7.0])
    assert torch.equal(length_penalized(scores, lengths, 0.0), scores)
    assert torch.allclose(length_penalized(scores, lengths, 1.0), torch.tensor([-3.0, -3.0]))
    with pytest.raises(ValueError, match="alpha=-1"):
        length_penalized(scores, lengths, -1)


def test_beam_search_with_length_penalty_is_exhaustive_with_a_full_beam():
    model = small_model(vocab=5, num_layers=1, d_model=16, d_ff=32, heads=2).eval()
    source = torch.tensor([[3, 4, 2, 1, 0, 4]])
    candidates = set()
    for rest in itertools.product(range(5), repeat=3):
        if END in rest:
            cut = rest.index(END) + 1
            rest = rest[:cut] + (END,) * (3 - cut)
        candidates.add(rest)
    candidates = sorted(candidates)
    sequences = torch.tensor([[START, *rest] for rest in candidates])
    lengths = torch.tensor([rest.index(END) + 1 if END in rest else 3 for rest in candidates], dtype=torch.float32)
    scores = sequence_log_prob(model, source.expand(len(sequences), -1), None, sequences, end_id=END)
    for alpha in (0.0, 0.6, 2.0):
        best = sequences[length_penalized(scores, lengths, alpha).argmax()]
        found, _ = beam_search(model, source, None, START, 3, 125, END, alpha)
        assert torch.equal(found[0], best), alpha


def test_top_p_filter_keeps_the_smallest_nucleus():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 5.0, 0.0]]).log_softmax(-1)
    probabilities = logits.exp()
    for top_p in (0.05, 0.5, 0.7, 0.9, 0.99, 1.0):
        kept = top_p_filter(logits, top_p).isfinite()
        for row in range(2):
            order = probabilities[row].argsort(descending=True)
            mass = probabilities[row][order].cumsum(0)
            size = int((mass < top_p).sum()) + 1  # the fewest tokens that reach top_p
            assert kept[row].sum() == min(size, 4)
            assert kept[row][order[:size]].all()
    with pytest.raises(ValueError, match="top_p=0"):
        top_p_filter(logits, 0)


def test_sample_decode_at_temperature_zero_or_top_k_one_is_greedy():
    model = small_model().eval()
    source, _ = padded_batch()
    mask = padding_mask(source, PAD)
    greedy = greedy_decode(model, source, mask, START, 8, END)
    assert torch.equal(sample_decode(model, source, mask, START, 8, 0.0, end_id=END), greedy)
    generator = torch.Generator().manual_seed(0)
    assert torch.equal(
        sample_decode(model, source, mask, START, 8, 1.0, top_k=1, end_id=END, generator=generator), greedy
    )
    assert torch.equal(
        sample_decode(model, source, mask, START, 8, 1.0, top_p=1e-6, end_id=END, generator=generator), greedy
    )


def test_sample_decode_is_reproducible_with_a_seeded_generator():
    model = small_model().eval()
    source, _ = padded_batch()
    runs = [
        sample_decode(model, source, None, START, 8, 1.5, generator=torch.Generator().manual_seed(3)) for _ in range(2)
    ]
    assert torch.equal(*runs)
    with pytest.raises(ValueError, match="temperature=-1"):
        sample_decode(model, source, None, START, 8, -1)
