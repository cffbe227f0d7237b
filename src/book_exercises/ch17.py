"""Chapter 17 exercises: the global gradient norm of FSDP's clipping, the loss scale of fp16
training, DDP's gradient buckets, and the ring all-reduce.

    from book_exercises import check
    check(clip_sharded, device=device)

Each check calls the reader's function on fixed inputs and compares it with what torch does:
``torch.nn.utils.clip_grad_norm_`` on the whole gradients that the shards were cut from, the
scale update ``torch.amp.GradScaler`` calls, DDP's own bucket assignment
(``torch.distributed._compute_bucket_assignment_by_size``, which needs no process group), and a
ring all-reduce simulated step by step (its sums, and the values each process sends).
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from book_exercises.core import Case, Mistake, exercise, same, seeded
from transformer_book import TRANSLATION_CONFIG

# ---------------------------------------------------------------------------------------------
# Exercise 1: the global gradient norm under FSDP


def _cut(gradients, world_size):
    """Process r's piece of every gradient, its rows cut like torch.chunk (empty past the pieces)."""
    shards = [[] for _ in range(world_size)]
    for gradient in gradients:
        pieces = gradient.chunk(world_size)
        for rank, shard in enumerate(shards):
            shard.append((pieces[rank] if rank < len(pieces) else gradient[:0]).clone())
    return shards


def _clip_cases():
    generator = seeded(17)

    def shards(world_size, shapes, scales):
        gradients = [torch.randn(shape, generator=generator) * scale for shape, scale in zip(shapes, scales)]
        return _cut(gradients, world_size)

    return [
        Case((shards(2, [(6, 4), (6,), (3, 5)], [1.0, 1.0, 1.0]), 1.0), "2 processes, 3 gradients, max_norm 1"),
        Case(
            (shards(3, [(7, 3), (2,), (1, 4)], [0.5, 4.0, 2.0]), 2.0),
            "3 processes, gradients of 7, 2 and 1 rows (process 2 holds no row of the last two), max_norm 2",
        ),
        Case((shards(4, [(10, 2), (5,)], [3.0, 0.1]), 0.5), "4 processes, a large and a small gradient, max_norm 0.5"),
        Case((shards(2, [(4, 3), (4,)], [0.01, 0.01]), 1.0), "2 processes, a norm below max_norm 1"),
    ]


def _clip_by(shards, norms, max_norm, clamp=True):
    """Every process's shards times min(1, max_norm / (its norm + 1e-6)) (no min without clamp)."""
    factors = [max_norm / (norm + 1e-6) for norm in norms]
    factors = [torch.clamp(factor, max=1.0) if clamp else factor for factor in factors]
    return [[shard * factor for shard in mine] for mine, factor in zip(shards, factors)]


def _squares(shards):
    """Each process's sum of the squares of its shards."""
    return [torch.stack([shard.pow(2).sum() for shard in mine]).sum() for mine in shards]


def _with_norm(shards, max_norm, total):
    """Clipped by one shared norm, ``total``, which is also returned."""
    return _clip_by(shards, [total] * len(shards), max_norm), total


def _as_clipped(got):
    """The reader's (shards, norm), the norm as a 0-d float64 tensor."""
    if isinstance(got, (tuple, list)) and len(got) == 2:
        norm = got[1]
        if isinstance(norm, (int, float)) or (isinstance(norm, torch.Tensor) and norm.numel() == 1):
            return got[0], torch.tensor(float(norm), dtype=torch.float64)
    return got


def _describe_clipping(got, expected, case):
    """Clipped by each process's own norm (whatever norm returned), or one of the two parts right."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return "return a pair: (the clipped shards, the total norm)"
    shards, max_norm = case.args
    if same(got[0], _clip_by(shards, [square.sqrt() for square in _squares(shards)], max_norm)):
        return _LOCAL
    if same(got[0], expected[0]):
        return f"on {case.label}, the shards are right but the norm is not: torch's is {float(expected[1]):.4f}"
    if same(got[1], expected[1]):
        return (
            f"on {case.label}, the norm is right but the shards are not: every shard of every "
            "process is multiplied by min(1, max_norm / (norm + 1e-6))"
        )
    return None


_LOCAL = (
    "each process clipped by the norm of its own shards: the norm is that of the whole "
    "gradients, so each process sums the squares of its shards, an all-reduce adds the N "
    "sums, and every process scales its shards by the same factor."
)


@exercise(
    cases=_clip_cases,
    success="matches clip_grad_norm_ on the whole gradients",
    normalize=_as_clipped,
    describe=_describe_clipping,
    adapt=lambda function: lambda shards, max_norm: function([[s.clone() for s in mine] for mine in shards], max_norm),
    mistakes=[
        Mistake(
            _LOCAL,
            lambda shards, max_norm: (
                _clip_by(shards, [square.sqrt() for square in _squares(shards)], max_norm),
                torch.stack(_squares(shards)).sum().sqrt(),
            ),
        ),
        Mistake(
            "the mean of the processes' norms is not the norm of the whole: norms do not "
            "add, squares do. Sum the squares over every shard of every process, then take "
            "the square root.",
            lambda shards, max_norm: _with_norm(
                shards, max_norm, torch.stack([square.sqrt() for square in _squares(shards)]).mean()
            ),
        ),
        Mistake(
            "the sum of the processes' norms is too large (the triangle inequality): norms do "
            "not add, squares do. Sum the squares over every shard of every process, then "
            "take the square root.",
            lambda shards, max_norm: _with_norm(
                shards, max_norm, torch.stack([square.sqrt() for square in _squares(shards)]).sum()
            ),
        ),
        Mistake(
            "the all-reduced sum is of squares: take its square root before comparing it "
            "with max_norm (and return the norm, not its square).",
            lambda shards, max_norm: _with_norm(shards, max_norm, torch.stack(_squares(shards)).sum()),
        ),
        Mistake(
            "clipping only shrinks: the factor is min(1, max_norm / (norm + 1e-6)), so "
            "gradients whose norm is below max_norm are left as they are.",
            lambda shards, max_norm: (
                _clip_by(
                    shards,
                    [torch.stack(_squares(shards)).sum().sqrt()] * len(shards),
                    max_norm,
                    clamp=False,
                ),
                torch.stack(_squares(shards)).sum().sqrt(),
            ),
        ),
    ],
)
def clip_sharded(shards, max_norm):
    """(the clipped shards, the total norm) of N processes' shards, as clip_grad_norm_ on the whole gradients.

    ``shards[r][i]``: process r's piece of gradient i, its rows cut like torch.chunk (empty past
    the pieces). The reference joins each gradient's pieces, calls torch.nn.utils.clip_grad_norm_
    on the whole gradients, and cuts the clipped gradients again."""
    world_size, count = len(shards), len(shards[0])
    parameters = []
    for i in range(count):
        whole = torch.cat([shards[rank][i] for rank in range(world_size)])
        parameter = torch.nn.Parameter(torch.empty_like(whole))
        parameter.grad = whole.clone()
        parameters.append(parameter)
    norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    clipped = [[None] * count for _ in range(world_size)]
    for i, parameter in enumerate(parameters):
        rows = [shards[rank][i].shape[0] for rank in range(world_size)]
        for rank, piece in enumerate(parameter.grad.split(rows)):
            clipped[rank][i] = piece
    return clipped, norm.double()


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
# Exercise 3: DDP's gradient buckets

MIB = 2**20


@functools.cache
def _translator_shapes():
    from transformer_book import make_model

    model = make_model(2139, 2810, **TRANSLATION_CONFIG)  # chapter 14's vocabularies
    return [tuple(parameter.shape) for parameter in model.parameters()]


def _translator_parameters():
    """Zeros of the translator's 88 shapes (new ones each time: a reader's code may change them)."""
    return [torch.zeros(shape) for shape in _translator_shapes()]


def _bucket_cases():
    translator = _translator_parameters()
    small = [torch.zeros(shape, dtype=torch.bfloat16) for shape in [(8, 4), (8,), (4, 4), (16,), (8, 8), (8,)]]
    vectors = [torch.zeros(n) for n in (5, 3, 2, 6, 1, 2, 4)]
    return [
        Case(
            (translator, 25 * MIB, MIB),
            "the translator's 88 tensors, DDP's default caps (1 MiB, then 25 MiB)",
        ),
        Case((translator, MIB, MIB), "the translator, every cap 1 MiB (bucket_cap_mb=1)"),
        Case(
            (small, 64, 16),
            "6 bfloat16 tensors (2 bytes a value), caps 16 then 64 bytes",
        ),
        Case(
            (vectors, 24, 16),
            "7 float32 vectors of 5, 3, 2, 6, 1, 2, 4 values, caps 16 then 24 bytes",
        ),
    ]


def _buckets(
    parameters,
    bucket_cap,
    first_bucket_cap,
    last_first=True,
    size=lambda p: p.numel() * p.element_size(),
    close=lambda held, cap: held >= cap,
    before=False,
    first=True,
):
    """Mistaken rules, one switch each: the order, a tensor's size, when a bucket closes, the first cap."""
    order = range(len(parameters) - 1, -1, -1) if last_first else range(len(parameters))
    buckets, held, cap = [[]], 0, first_bucket_cap if first else bucket_cap
    for index in order:
        if before and buckets[-1] and held + size(parameters[index]) > cap:  # the wrapper's rule
            buckets, held, cap = [*buckets, []], 0, bucket_cap
        buckets[-1].append(index)
        held += size(parameters[index])
        if not before and close(held, cap):
            buckets, held, cap = [*buckets, []], 0, bucket_cap
    return [bucket for bucket in buckets if bucket]


def _as_buckets(got):
    """The reader's buckets as lists of ints."""
    try:
        return [[int(index) for index in bucket] for bucket in got]
    except (TypeError, ValueError):
        return got


def _describe_buckets(got, expected, case):
    if not isinstance(got, list) or not all(isinstance(bucket, list) for bucket in got):
        return "return a list of buckets, each a list of parameter indices"
    for number, (mine, theirs) in enumerate(zip(got, expected)):
        if mine != theirs:
            return f"on {case.label}, DDP's bucket {number} holds parameters {theirs}; yours holds {mine}"
    return f"on {case.label}, DDP makes {len(expected)} buckets; you made {len(got)}"


_WRAPPER = (
    "that is the chapter's wrapper's rule (a new bucket before a tensor that would pass the "
    "cap). DDP adds the tensor first and closes the bucket as soon as it holds cap bytes or "
    "more, so a bucket passes its cap by its last tensor; and the first bucket's cap is "
    "first_bucket_cap."
)


@exercise(
    cases=_bucket_cases,
    success="matches torch's bucket assignment",
    normalize=_as_buckets,
    describe=_describe_buckets,
    mistakes=[
        Mistake(
            "gradients become ready from the last layer back: DDP fills its buckets from the "
            "last parameter registered to the first, so the first bucket holds the last "
            "parameters (listed last first).",
            lambda parameters, cap, first: _buckets(parameters, cap, first, last_first=False),
        ),
        Mistake(
            _WRAPPER,
            lambda parameters, cap, first: _buckets(parameters, cap, first, before=True, first=False),
        ),
        Mistake(
            _WRAPPER,
            lambda parameters, cap, first: _buckets(parameters, cap, first, before=True),
        ),
        Mistake(
            "the caps are bytes: a tensor takes numel() × element_size() bytes, not numel().",
            lambda parameters, cap, first: _buckets(parameters, cap, first, size=lambda p: p.numel()),
        ),
        Mistake(
            "the first bucket has its own, smaller cap (first_bucket_cap, 1 MiB by default), so "
            "that the first all-reduce starts early; bucket_cap applies from the second bucket on.",
            lambda parameters, cap, first: _buckets(parameters, cap, first, first=False),
        ),
        Mistake(
            "a bucket that reaches its cap exactly is full: DDP closes it when it holds cap bytes or more (>=, not >).",
            lambda parameters, cap, first: _buckets(parameters, cap, first, close=lambda held, cap: held > cap),
        ),
    ],
)
def ddp_buckets(parameters, bucket_cap, first_bucket_cap):
    """DDP's gradient buckets, in the order their all-reduces start: lists of parameter indices.

    torch's own assignment, ``torch.distributed._compute_bucket_assignment_by_size``, given the
    parameters last first (the order DDP's Reducer rebuilds its buckets in after the first step)
    and the caps [first_bucket_cap, bucket_cap]."""
    order = list(range(len(parameters) - 1, -1, -1))
    buckets, _ = dist._compute_bucket_assignment_by_size(
        [parameters[index] for index in order],
        [first_bucket_cap, bucket_cap],
        [False] * len(order),
        order,
    )
    return [list(bucket) for bucket in buckets]


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
