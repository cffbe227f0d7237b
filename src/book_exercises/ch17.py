"""Chapter 17 exercises: the bytes one process holds under FSDP, the loss scale of fp16
training, where a resumed run picks up the batch stream, and the ring all-reduce.

    from book_exercises import check
    check(shard_bytes, device=device)

Each check calls the reader's function on fixed inputs and compares it with what torch or the
companion package does: ``torch.chunk``'s split of a parameter's rows (what FSDP2 does), the
scale update ``torch.amp.GradScaler`` calls, ``micro_batch_index``'s order of the stream, and a
ring all-reduce simulated step by step (its sums, and the values each process sends).
"""

from __future__ import annotations

import math

import torch

from book_exercises.core import Case, Mistake, exercise
from transformer_book import TRANSLATION_CONFIG, micro_batch_index

# ---------------------------------------------------------------------------------------------
# Exercise 1: the parameter bytes one process holds under FSDP


def _cut(
    shapes,
    world_size,
    rank,
    bytes_per_value,
    rows=lambda shape: shape[0],
    held=lambda piece, left: max(0, min(piece, left)),
):
    """Mistaken cuts: the axis cut (``rows``) and the rows a rank holds (``held``)."""
    total = 0
    for shape in shapes:
        count = rows(shape)
        piece = -(-count // world_size)
        total += held(piece, count - rank * piece) * math.prod(shape) // count
    return total * bytes_per_value


def _split_evenly(shapes, world_size, rank, bytes_per_value):
    """numpy.array_split / torch.tensor_split: the first rows % N ranks hold one row more."""
    total = 0
    for shape in shapes:
        rows = shape[0]
        held = rows // world_size + (rank < rows % world_size)
        total += held * math.prod(shape[1:])
    return total * bytes_per_value


def _translator_shapes():
    from transformer_book import make_model

    model = make_model(2139, 2810, **TRANSLATION_CONFIG)  # chapter 14's vocabularies
    return [tuple(p.shape) for p in model.parameters()]


def _shard_cases():
    shapes = _translator_shapes()
    return [
        Case((shapes, 2, 0, 4), "the translator's 88 tensors, 2 processes, rank 0, float32"),
        Case((shapes, 2, 1, 4), "the translator, 2 processes, rank 1, float32"),
        Case(([(5, 3), (7,), (2, 2)], 4, 3, 2), "shapes (5, 3), (7,), (2, 2); 4 processes, rank 3, 2 bytes a value"),
        Case(([(8, 8), (3,)], 4, 1, 4), "shapes (8, 8), (3,); 4 processes, rank 1, float32"),
    ]


@exercise(
    cases=_shard_cases,
    success="matches torch.chunk's pieces",
    mistakes=[
        Mistake(
            "FSDP cuts each tensor, not the total: every tensor's rows go in pieces of "
            "ceil(rows / world_size) (torch.chunk), so the first ranks hold a little "
            "more and the last ones less, or nothing.",
            lambda shapes, w, r, b: sum(math.prod(s) for s in shapes) * b // w,
        ),
        Mistake(
            "rows // world_size drops the remainder rows: a piece holds "
            "ceil(rows / world_size) rows, -(-rows // world_size), and the last ranks "
            "hold what is left.",
            lambda shapes, w, r, b: sum(s[0] // w * math.prod(s[1:]) for s in shapes) * b,
        ),
        Mistake(
            "count bytes, not values: multiply by bytes_per_value.",
            lambda shapes, w, r, b: shard_bytes(shapes, w, r, 1),
        ),
        Mistake(
            "torch.chunk does not spread the remainder one row each over the first ranks "
            "(that is torch.tensor_split): every piece but the last holds "
            "ceil(rows / world_size) rows, and the last ones hold what is left, or nothing.",
            _split_evenly,
        ),
        Mistake(
            "the last pieces are smaller or empty: a rank holds min(piece, rows - rank · "
            "piece) rows, not a whole piece.",
            lambda shapes, w, r, b: _cut(shapes, w, r, b, held=lambda piece, left: piece),
        ),
        Mistake(
            "a rank past the end of a small tensor holds no rows, not a negative number: max(0, rows - rank · piece).",
            lambda shapes, w, r, b: _cut(shapes, w, r, b, held=min),
        ),
        Mistake(
            "FSDP cuts a tensor's first axis, its rows (shape[0]), not its last.",
            lambda shapes, w, r, b: _cut(shapes, w, r, b, rows=lambda shape: shape[-1]),
        ),
    ],
)
def shard_bytes(shapes, world_size, rank, bytes_per_value):
    """The bytes of parameters that process `rank` holds when FSDP cuts every tensor's rows like torch.chunk.

    torch.chunk's piece ``rank`` of each tensor (none past the pieces it returns)."""
    total = 0
    for shape in shapes:
        pieces = torch.empty(shape, device="meta").chunk(world_size)
        total += pieces[rank].numel() if rank < len(pieces) else 0
    return total * bytes_per_value


# ---------------------------------------------------------------------------------------------
# Exercise 2: the loss scale of fp16 training


def _rule(
    scale,
    found_inf,
    good_steps,
    growth_interval,
    reset_after_inf=True,
    reset_after_growth=True,
    backoff=0.5,
    count_first=True,
):
    """Mistaken versions of the rule, one switch each."""
    if found_inf:
        return scale * backoff, 0 if reset_after_inf else good_steps
    if count_first:
        good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0 if reset_after_growth else good_steps
    return scale, good_steps + (not count_first)


def _scale_cases():
    return [
        Case((65536.0, True, 17, 2000), "an overflow after 17 good steps"),
        Case((65536.0, False, 17, 2000), "a good step, the 18th"),
        Case((1024.0, False, 1999, 2000), "the 2,000th good step in a row"),
        Case((8.0, False, 2, 3), "the 3rd good step, growth_interval 3"),
        Case((8.0, True, 0, 3), "an overflow right after another"),
    ]


@exercise(
    cases=_scale_cases,
    success="matches torch's GradScaler update",
    mistakes=[
        Mistake(
            "after an overflow the count of good steps starts again at 0: the scale "
            "grows only after growth_interval good steps IN A ROW.",
            lambda s, inf, g, n: _rule(s, inf, g, n, reset_after_inf=False),
        ),
        Mistake(
            "after the scale grows, the count starts again at 0, or it would double at every later step.",
            lambda s, inf, g, n: _rule(s, inf, g, n, reset_after_growth=False),
        ),
        Mistake(
            "an overflow halves the scale (backoff 0.5); it does not leave it as it is.",
            lambda s, inf, g, n: _rule(s, inf, g, n, backoff=1.0),
        ),
        Mistake(
            "count this good step before comparing: the scale doubles at the step that "
            "brings the count to growth_interval, not one step later.",
            lambda s, inf, g, n: _rule(s, inf, g, n, count_first=False),
        ),
    ],
)
def update_scale(scale, found_inf, good_steps, growth_interval):
    """(the next scale, the next count of good steps), as GradScaler.update does.

    What GradScaler.update does: torch's own in-place update of the scale and count."""
    scale_ = torch.tensor([scale], dtype=torch.float32)
    steps_ = torch.tensor([good_steps], dtype=torch.int32)
    inf_ = torch.tensor([float(found_inf)])
    torch._amp_update_scale_(scale_, steps_, inf_, 2.0, 0.5, growth_interval)
    return float(scale_), int(steps_)


# ---------------------------------------------------------------------------------------------
# Exercise 3: where a resumed run picks up the stream


def _resume_cases():
    return [
        Case((10, 2, 1, 1177), "step 10, 2 processes, no accumulation, 1,177 batches an epoch"),
        Case((10, 1, 2, 1177), "step 10, 1 process accumulating 2"),
        Case((700, 4, 2, 1177), "step 700, 4 processes accumulating 2"),
        Case((147, 8, 1, 1176), "step 147, 8 processes: the start of epoch 2"),
    ]


@exercise(
    cases=_resume_cases,
    success="matches micro_batch_index's stream",
    mistakes=[
        Mistake(
            "a step reads world_size × accumulate batches: one per process per "
            "micro-batch, so step s starts at batch s · world_size · accumulate.",
            lambda s, w, k, n: resume_position(s, 1, k, n),
        ),
        Mistake(
            "accumulation reads batches too: step s starts at s · world_size · accumulate, not s · world_size.",
            lambda s, w, k, n: resume_position(s, w, 1, n),
        ),
        Mistake(
            "epochs count from 1 (the seed of epoch e is seed · 1000 + e): add 1 to index // batches_per_epoch.",
            lambda s, w, k, n: ((s * w * k) // n, (s * w * k) % n),
        ),
        Mistake(
            "the index within the epoch is what is left after the whole epochs: "
            "index % batches_per_epoch, not the index in the whole stream.",
            lambda s, w, k, n: ((s * w * k) // n + 1, s * w * k),
        ),
    ],
)
def resume_position(step, world_size, accumulate, batches_per_epoch):
    """(the epoch, counted from 1, and the index within it) of the first batch step `step` reads.

    The epoch (from 1) and index in it of the stream's batch micro_batch_index gives first."""
    index = micro_batch_index(step, 0, 0, world_size, accumulate)
    return index // batches_per_epoch + 1, index % batches_per_epoch


# ---------------------------------------------------------------------------------------------
# Exercise 4: the ring all-reduce


def _ring(gradients, reduce_steps=None, gather=True, divide=False):
    """The ring, with the mistakes as options: ``reduce_steps`` (N - 1), the all-gather, a mean."""
    n = len(gradients)
    chunks = [list(g.clone().chunk(n)) for g in gradients]
    sent = [0] * n
    for step in range(n - 1 if reduce_steps is None else reduce_steps):  # reduce-scatter
        outgoing = [(r, (r - step) % n, chunks[r][(r - step) % n].clone()) for r in range(n)]
        for r, c, piece in outgoing:
            chunks[(r + 1) % n][c] += piece
            sent[r] += piece.numel()
    for step in range(n - 1 if gather else 0):  # all-gather: the finished chunks go round
        outgoing = [(r, (r + 1 - step) % n, chunks[r][(r + 1 - step) % n].clone()) for r in range(n)]
        for r, c, piece in outgoing:
            chunks[(r + 1) % n][c] = piece
            sent[r] += piece.numel()
    results = [torch.cat(c) / (n if divide else 1) for c in chunks]
    return results, sent


def _ring_cases():
    generator = torch.Generator().manual_seed(0)

    def gradients(n, size):  # whole numbers: every order of the additions gives the same sums, in float32
        return [torch.randint(-50, 50, (size,), generator=generator).float() for _ in range(n)]

    return [
        Case((gradients(2, 8),), "2 processes, 8 values each"),
        Case((gradients(3, 12),), "3 processes, 12 values"),
        Case((gradients(4, 10),), "4 processes, 10 values: chunks of 3, 3, 3, 1"),
        Case((gradients(5, 20),), "5 processes, 20 values"),
    ]


@exercise(
    cases=_ring_cases,
    success="matches the ring's sums and the values each process sends",
    mistakes=[
        Mistake(
            "every process sent its whole gradient to every other: correct sums, but (N - 1) × "
            "size values each. The ring sends one chunk a step, 2(N - 1) chunks in all.",
            lambda gradients: (
                [sum(gradients[1:], gradients[0].clone()) for _ in gradients],
                [(len(gradients) - 1) * g.numel() for g in gradients],
            ),
        ),
        Mistake(
            "after the reduce-scatter each process holds the sum of one chunk only: N - 1 more "
            "steps must pass the finished chunks round the ring (the all-gather).",
            lambda gradients: _ring(gradients, gather=False),
        ),
        Mistake(
            "the reduce-scatter takes N - 1 steps, not N: a chunk has N summands, so it needs "
            "N - 1 additions; one more adds a process's part twice.",
            lambda gradients: _ring(gradients, reduce_steps=len(gradients)),
        ),
        Mistake(
            "an all-reduce returns the sum; DDP divides by N itself (before or after), so return the sum.",
            lambda gradients: _ring(gradients, divide=True),
        ),
    ],
)
def ring_all_reduce(gradients):
    """(each process's result, the values each process sent) of a ring all-reduce (a sum).

    ``gradients``: one 1-D tensor per process, all of one length. Cut each into N chunks
    (``torch.chunk``). Reduce-scatter: for N - 1 steps, process r sends chunk (r - step) mod N
    to process r + 1 (mod N), which adds it to its own. All-gather: for N - 1 steps, process r
    sends chunk (r + 1 - step) mod N to process r + 1, which replaces its own with it."""
    return _ring(gradients)
