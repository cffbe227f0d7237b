"""Chapter 17 exercises: the bytes one process holds under FSDP, the loss scale of fp16
training, and where a resumed run picks up the batch stream.

    from book_exercises.ch17 import check_shard_bytes
    check_shard_bytes(shard_bytes)

Every checker calls the reader's function on fixed inputs and compares it with a formula
written here: ``torch.chunk``'s split of a parameter's rows (what FSDP2 does), the update
rule of ``torch.amp.GradScaler``, and the order of ``micro_batch_index``.
"""

from __future__ import annotations

import math

from book_exercises.core import Case, Exercise, Mistake, run
from transformer_book.translation import TRANSLATION_CONFIG

# Exercise 1: the parameter bytes one process holds under FSDP


def _shard_reference(shapes, world_size, rank, bytes_per_value):
    total = 0
    for shape in shapes:
        rows, rest = shape[0], math.prod(shape[1:])
        piece = -(-rows // world_size)  # torch.chunk: pieces of ceil(rows / world_size)
        total += max(0, min(piece, rows - rank * piece)) * rest
    return total * bytes_per_value


def _translator_shapes():
    from transformer_book.model import make_model

    model = make_model(2139, 2810, **TRANSLATION_CONFIG)  # chapter 14's vocabularies
    return [tuple(p.shape) for p in model.parameters()]


def _shard_cases():
    shapes = _translator_shapes()
    return [
        Case((shapes, 2, 0, 4), "the translator's 88 tensors, 2 processes, rank 0, float32"),
        Case((shapes, 2, 1, 4), "the translator, 2 processes, rank 1, float32"),
        Case(([(5, 3), (7,), (2, 2)], 4, 3, 2), "shapes (5, 3), (7,), (2, 2); 4 processes, "
             "rank 3, 2 bytes a value"),
        Case(([(8, 8), (3,)], 4, 1, 4), "shapes (8, 8), (3,); 4 processes, rank 1, float32"),
    ]


SHARD_BYTES = Exercise(
    name="shard_bytes",
    task="the bytes of parameters that process `rank` holds when FSDP cuts every tensor's "
    "rows like torch.chunk.",
    cases=_shard_cases,
    reference=_shard_reference,
    mistakes=[
        Mistake("FSDP cuts each tensor, not the total: every tensor's rows go in pieces of "
                "ceil(rows / world_size) (torch.chunk), so the first ranks hold a little "
                "more and the last ones less, or nothing.",
                lambda shapes, w, r, b: sum(math.prod(s) for s in shapes) * b // w),
        Mistake("rows // world_size drops the remainder rows: a piece holds "
                "ceil(rows / world_size) rows, -(-rows // world_size), and the last ranks "
                "hold what is left.",
                lambda shapes, w, r, b: sum(s[0] // w * math.prod(s[1:]) for s in shapes) * b),
        Mistake("count bytes, not values: multiply by bytes_per_value.",
                lambda shapes, w, r, b: _shard_reference(shapes, w, r, 1)),
    ],
)


def check_shard_bytes(function, device=None):
    """Check ``function(shapes, world_size, rank, bytes_per_value) -> int``."""
    return run(SHARD_BYTES, function, device)


# Exercise 2: the loss scale of fp16 training


def _scale_reference(scale, found_inf, good_steps, growth_interval):
    if found_inf:
        return scale * 0.5, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


def _scale_cases():
    return [
        Case((65536.0, True, 17, 2000), "an overflow after 17 good steps"),
        Case((65536.0, False, 17, 2000), "a good step, the 18th"),
        Case((1024.0, False, 1999, 2000), "the 2,000th good step in a row"),
        Case((8.0, False, 2, 3), "the 3rd good step, growth_interval 3"),
        Case((8.0, True, 0, 3), "an overflow right after another"),
    ]


UPDATE_SCALE = Exercise(
    name="update_scale",
    task="(the next scale, the next count of good steps), as GradScaler.update does.",
    cases=_scale_cases,
    reference=_scale_reference,
    mistakes=[
        Mistake("after an overflow the count of good steps starts again at 0: the scale "
                "grows only after growth_interval good steps IN A ROW.",
                lambda s, inf, g, n: (s * 0.5, g) if inf else _scale_reference(s, inf, g, n)),
        Mistake("after the scale grows, the count starts again at 0, or it would double at "
                "every later step.",
                lambda s, inf, g, n: (s * 0.5, 0) if inf else
                ((s * 2.0, g + 1) if g + 1 >= n else (s, g + 1))),
        Mistake("an overflow halves the scale (backoff 0.5); it does not leave it as it is.",
                lambda s, inf, g, n: (s, 0) if inf else _scale_reference(s, inf, g, n)),
    ],
)


def check_update_scale(function, device=None):
    """Check ``function(scale, found_inf, good_steps, growth_interval) -> (scale, steps)``."""
    return run(UPDATE_SCALE, function, device)


# Exercise 3: where a resumed run picks up the stream


def _resume_reference(step, world_size, accumulate, batches_per_epoch):
    index = step * world_size * accumulate
    return index // batches_per_epoch + 1, index % batches_per_epoch


def _resume_cases():
    return [
        Case((10, 2, 1, 1177), "step 10, 2 processes, no accumulation, 1,177 batches an epoch"),
        Case((10, 1, 2, 1177), "step 10, 1 process accumulating 2"),
        Case((700, 4, 2, 1177), "step 700, 4 processes accumulating 2"),
        Case((147, 8, 1, 1176), "step 147, 8 processes: the start of epoch 2"),
    ]


RESUME_POSITION = Exercise(
    name="resume_position",
    task="(the epoch, counted from 1, and the index within it) of the first batch step "
    "`step` reads.",
    cases=_resume_cases,
    reference=_resume_reference,
    mistakes=[
        Mistake("a step reads world_size × accumulate batches: one per process per "
                "micro-batch, so step s starts at batch s · world_size · accumulate.",
                lambda s, w, k, n: _resume_reference(s, 1, k, n)),
        Mistake("accumulation reads batches too: step s starts at s · world_size · "
                "accumulate, not s · world_size.",
                lambda s, w, k, n: _resume_reference(s, w, 1, n)),
        Mistake("epochs count from 1 (the seed of epoch e is seed · 1000 + e): add 1 to "
                "index // batches_per_epoch.",
                lambda s, w, k, n: ((s * w * k) // n, (s * w * k) % n)),
    ],
)


def check_resume_position(function, device=None):
    """Check ``function(step, world_size, accumulate, batches_per_epoch) -> (epoch, i)``."""
    return run(RESUME_POSITION, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "shard_bytes": '''def shard_bytes(shapes, world_size, rank, bytes_per_value):
    """The bytes of the parameters (of these shapes) that process `rank` holds."""
    # Your code here (about 6 lines).
    raise NotImplementedError
''',
    "update_scale": '''def update_scale(scale, found_inf, good_steps, growth_interval):
    """(next scale, next count of good steps) after one step of fp16 training."""
    # Your code here (about 6 lines).
    raise NotImplementedError
''',
    "resume_position": '''def resume_position(step, world_size, accumulate, batches_per_epoch):
    """(epoch from 1, index in the epoch) of the first batch of step `step`."""
    # Your code here (about 2 lines).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "shard_bytes": '''import math


def shard_bytes(shapes, world_size, rank, bytes_per_value):
    """The bytes of the parameters (of these shapes) that process `rank` holds."""
    total = 0
    for shape in shapes:
        rows, rest = shape[0], math.prod(shape[1:])
        piece = -(-rows // world_size)  # ceil: torch.chunk's piece
        total += max(0, min(piece, rows - rank * piece)) * rest
    return total * bytes_per_value
''',
    "update_scale": '''def update_scale(scale, found_inf, good_steps, growth_interval):
    """(next scale, next count of good steps) after one step of fp16 training."""
    if found_inf:  # the step was skipped: back off
        return scale * 0.5, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps
''',
    "resume_position": '''def resume_position(step, world_size, accumulate, batches_per_epoch):
    """(epoch from 1, index in the epoch) of the first batch of step `step`."""
    index = step * world_size * accumulate
    return index // batches_per_epoch + 1, index % batches_per_epoch
''',
}

CHECKERS = {
    "shard_bytes": check_shard_bytes,
    "update_scale": check_update_scale,
    "resume_position": check_resume_position,
}

QUESTION = (
    "Every process of a DDP run must shuffle the batch stream with the same seed, yet each "
    "must read different batches. What goes wrong if each process seeds its shuffle with "
    "its own rank, and what if all of them read the same batches?"
)
ANSWER = (
    "With a seed per rank, each process draws its own order of the same batches: over an "
    "epoch some batches are read by two processes in one step and others by none, so the "
    "run no longer sees each example once an epoch, and no single process's order tells "
    "which batches made a step (a resumed run cannot find its place). With the same "
    "batches in every process, the all-reduce averages identical gradients: the update is "
    "that of one process, and the others only burn power. The stream must be one, shared "
    "by all (the same seed), and dealt out: process r takes every world_size-th batch."
)
