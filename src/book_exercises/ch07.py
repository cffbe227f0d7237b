"""Chapter 7 exercises: cross-attention and the decoder layer.

    from book_exercises import check
    check(cross_attention, device=device)

Each check calls the reader's function on CPU tensors and modules (pass ``device=`` to move them)
and compares its output, moved to the CPU, with transformer_book's MultiHeadAttention and
DecoderLayer.
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import DecoderLayer, MultiHeadAttention, padding_mask, target_mask

# ---------------------------------------------------------------------------------------------
# Exercise 1: cross-attention


def _attention(d_model, heads, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MultiHeadAttention(d_model, heads).eval()


def _cross_cases():
    source_mask = torch.ones(2, 1, 6, dtype=torch.bool)
    source_mask[0, :, 4:] = False
    return [
        Case(
            (randn(2, 3, 16, seed=130), randn(2, 6, 16, seed=131), _attention(16, 4, 1), None),
            "target length 3, source length 6, no mask",
        ),
        Case(
            (randn(2, 3, 16, seed=132), randn(2, 6, 16, seed=133), _attention(16, 4, 2), source_mask),
            "target length 3, source length 6, a (batch, 1, source) padding mask",
        ),
        Case(
            (randn(1, 4, 8, seed=134), randn(1, 4, 8, seed=135), _attention(8, 2, 3), None),
            "target and source of the same length 4",
        ),
    ]


def _describe_cross(got, expected, case):
    decoder_states, memory = case.args[0], case.args[1]
    if isinstance(got, tuple):
        return "MultiHeadAttention returns (output, weights): return only the output, [0]."
    if got.shape[:2] == memory.shape[:2] and memory.size(1) != decoder_states.size(1):
        return (
            "your output has one row per source position: the queries come from the decoder, "
            "the keys and values from the encoder's output: attention(x, memory, memory, mask)."
        )
    return None


@exercise(
    cases=_cross_cases,
    describe=_describe_cross,
    mistakes=[
        Mistake(
            "you attended over the decoder's own states (self-attention): the keys and values of "
            "cross-attention come from the encoder's output, attention(x, memory, memory, mask).",
            lambda x, memory, attention, mask: attention(x, x, x)[0],
        ),
        Mistake(
            "the source mask is ignored: pass it, so that no query reads the source's padding.",
            lambda x, memory, attention, mask: attention(x, memory, memory)[0],
        ),
        Mistake(
            "queries and keys/values are swapped: the queries come from the decoder (x), the "
            "keys and values from the encoder's output: attention(x, memory, memory, mask).",
            lambda x, memory, attention, mask: attention(memory, x, x, mask)[0],
        ),
    ],
)
def cross_attention(x, memory, attention, mask):
    """Queries from the decoder, keys and values from the encoder's output (memory)."""
    return attention(x, memory, memory, mask)[0]


# ---------------------------------------------------------------------------------------------
# Exercise 2: the decoder layer


def _decoder(d_model, heads, d_ff, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = DecoderLayer(d_model, heads, d_ff, dropout=0.0).eval()
        with torch.no_grad():
            for sublayer in layer.sublayers:
                sublayer.norm.gamma.add_(0.2 * torch.randn(d_model))
                sublayer.norm.beta.add_(0.2 * torch.randn(d_model))
    return layer


def _decoder_case(target_tokens, source_tokens, layer, label, seed):
    x = randn(target_tokens.size(0), target_tokens.size(1), layer.d_model, seed=seed)
    memory = randn(source_tokens.size(0), source_tokens.size(1), layer.d_model, seed=seed + 1)
    norms = [sublayer.norm for sublayer in layer.sublayers]
    return Case(
        (
            x,
            memory,
            padding_mask(source_tokens, 0),
            target_mask(target_tokens, 0),
            layer.self_attn,
            layer.cross_attn,
            layer.feed_forward,
            norms,
        ),
        label,
    )


def _decoder_cases():
    return [
        _decoder_case(
            torch.tensor([[1, 4, 5, 0], [1, 6, 7, 8]]),
            torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]]),
            _decoder(16, 4, 32, 1),
            "target and source of length 4, padded",
            140,
        ),
        _decoder_case(
            torch.tensor([[1, 5, 6]]),
            torch.tensor([[2, 3, 4, 5, 6]]),
            _decoder(8, 2, 16, 2),
            "target length 3, source length 5",
            142,
        ),
    ]


def _decoder_variant(self_mask="target", cross_mask="source", order="self-cross", pre=False, output=0):
    def compute(x, memory, source_mask, target_mask_, self_attn, cross_attn, ffn, norms):
        masks = {"target": target_mask_, "source": source_mask, None: None}
        attend_self = lambda h: self_attn(h, h, h, masks[self_mask])[output]
        attend_cross = lambda h: cross_attn(h, memory, memory, masks[cross_mask])[0]
        first, second = (attend_self, attend_cross) if order == "self-cross" else (attend_cross, attend_self)
        for sublayer, norm in zip((first, second, ffn), norms):
            x = x + sublayer(norm(x)) if pre else norm(x + sublayer(x))
        return x

    return compute


@exercise(
    cases=_decoder_cases,
    atol=1e-4,
    mistakes=[
        Mistake(
            "the target mask is missing from the self-attention: without it position i reads the "
            "later target tokens it must predict.",
            _decoder_variant(self_mask=None),
        ),
        Mistake(
            "the masks are swapped: the target mask (padding + look-ahead) goes to the "
            "self-attention, the source mask to the cross-attention. Pass them by keyword.",
            _decoder_variant(self_mask="source", cross_mask="target"),
        ),
        Mistake(
            "the source mask is missing from the cross-attention: queries would read the source's padding.",
            _decoder_variant(cross_mask=None),
        ),
        Mistake(
            "the sublayers are in the wrong order: masked self-attention first, then cross-attention, then the FFN.",
            _decoder_variant(order="cross-self"),
        ),
        Mistake(
            "you used pre-norm, x + sublayer(norm(x)); this decoder layer is post-norm, norm(x + sublayer(x)).",
            _decoder_variant(pre=True),
        ),
        Mistake("MultiHeadAttention returns (output, weights): take [0].", _decoder_variant(output=slice(None))),
    ],
)
def decoder_layer(x, memory, source_mask, target_mask_, self_attn, cross_attn, ffn, norms):
    """Masked self-attention, cross-attention, FFN, each inside a post-norm Add & Norm."""
    layer = DecoderLayer(x.size(-1), self_attn.heads, ffn.d_ff, dropout=0.0).eval()
    layer.self_attn, layer.cross_attn, layer.feed_forward = self_attn, cross_attn, ffn
    for sublayer, norm in zip(layer.sublayers, norms):
        sublayer.norm = norm
    return layer(x, memory, source_mask, target_mask_)


# ---------------------------------------------------------------------------------------------
# Exercise 3: teacher forcing, decoder input and labels


def _teacher_cases():
    return [
        Case((torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]]),), "two targets of length 5"),
        Case((torch.tensor([[1, 2]]),), "a target of two tokens (start, end)"),
    ]


@exercise(
    cases=_teacher_cases,
    mistakes=[
        Mistake(
            "your labels are the decoder input itself: the model would learn to copy its input. "
            "The label at position i is the NEXT token, target[:, 1:].",
            lambda target: (target[:, :-1], target[:, :-1]),
        ),
        Mistake(
            "decoder input and labels are swapped: the decoder reads target[:, :-1] (starting "
            "with the start token) and predicts target[:, 1:].",
            lambda target: (target[:, 1:], target[:, :-1]),
        ),
        Mistake(
            "the decoder input must drop the last token, so that input and labels have the same "
            "length: target[:, :-1].",
            lambda target: (target, target[:, 1:]),
        ),
    ],
)
def teacher_forcing(target):
    """(batch, seq) targets starting with the start token -> (decoder input, labels)."""
    return (target[:, :-1], target[:, 1:])  # as transformer_book.sequence_loss
