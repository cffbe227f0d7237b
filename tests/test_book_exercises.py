"""The exercises: each chapter's notebook is the one source of its stubs and solutions, and each
typical mistake is written once, in its exercise (src/book_exercises). Every solution, read from its
notebook, passes its check; every stub is "not attempted yet"; every mistake, run as a reader's
function, gets its own hint; and every exercise of the package is one a chapter asks for."""

import importlib

import pytest
import torch

from book_exercises import CHAPTERS, check
from book_exercises.core import EXERCISES, Case, CheckResult, Mistake, exercise, load_solution
from notebooks import chapters, exercises
from transformer_book import apply_rotary, scaled_dot_product_attention

MODULES = {name: importlib.import_module(f"book_exercises.{name}") for name in CHAPTERS}
DEFINED = [(declared.chapter.rpartition(".")[2], declared) for declared in EXERCISES.values()]
EXERCISE = dict(EXERCISES)
WRITTEN = {f"ch{path.name[:2]}": exercises(path) for path in chapters()}  # chapter -> name -> (stub, solution)
ASKED = [(chapter, name) for chapter, found in WRITTEN.items() for name in found]
MISTAKES = [(declared.name, index) for _, declared in DEFINED for index in range(len(declared.mistakes))]


def output_of(function, capsys, name=None, **kwargs):
    result = check(function, exercise=name, **kwargs)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"a check prints exactly one line; got {out!r}"
    return result, out.strip()


def solution(name):
    chapter = next(chapter for chapter, found in WRITTEN.items() if name in found)
    return load_solution(WRITTEN[chapter][name][1], name)


def test_every_exercise_is_asked_for_by_its_chapter():
    assert sorted(WRITTEN) == sorted(MODULES), "one exercise module per chapter"
    for chapter, found in WRITTEN.items():
        defined = {declared.name for module, declared in DEFINED if module == chapter}
        assert set(found) == defined and len(found) >= 3, (chapter, sorted(found), sorted(defined))
        assert all(written_solution for _, written_solution in found.values()), f"{chapter}: a stub without solution"
    assert all(len(declared.mistakes) >= 2 for _, declared in DEFINED)


def test_no_module_copies_its_notebook():
    """The notebooks are the one source of stubs, solutions and questions; check() is the one checker."""
    for chapter, module in MODULES.items():
        copies = [
            name
            for name in vars(module)
            if name in {"STUBS", "SOLUTIONS", "CHECKERS", "QUESTION", "ANSWER"} or name.startswith("check_")
        ]
        assert not copies, f"book_exercises.{chapter} defines {copies}"


@pytest.mark.parametrize("chapter, name", ASKED)
def test_solution_passes_its_check(chapter, name, capsys):
    result, out = output_of(load_solution(WRITTEN[chapter][name][1], name), capsys)
    assert out.startswith("Correct:") and result.passed and bool(result), out


@pytest.mark.parametrize("chapter, name", ASKED)
def test_stub_is_not_attempted_yet(chapter, name, capsys):
    stub = WRITTEN[chapter][name][0]
    result, out = output_of(load_solution(stub, name), capsys)
    assert out.startswith("Not attempted yet:") and name in out and not result.attempted, out
    _, again = output_of(load_solution(stub, name), capsys)
    assert again == out  # deterministic, so the stored output holds on every run


@pytest.mark.parametrize("name", EXERCISE)
def test_a_function_returning_none_is_not_attempted(name, capsys):
    _, out = output_of(lambda *args, **kwargs: None, capsys, name=name)
    assert out.startswith("Not attempted yet:") and "returns None" in out


@pytest.mark.parametrize("name, index", MISTAKES, ids=lambda value: str(value))
def test_each_typical_mistake_gets_its_own_hint(name, index, capsys):
    """The mistake's code, run as the reader's function (on the CPU), is named by its hint: a mistake
    that no case tells apart from the solution, or from an earlier mistake, fails here."""
    mistake = EXERCISE[name].mistakes[index]
    result, out = output_of(mistake.compute, capsys, name=name)
    assert out == f"Not quite: {mistake.hint}" and not result.passed, out


# Answers that are right in another way, which the check must accept.
EQUIVALENT = {
    "masked_softmax": lambda scores, mask: torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1).masked_fill(
        ~mask.any(dim=-1, keepdim=True), 0.0
    ),  # a finite fill, the empty rows zeroed after
    "look_ahead_mask": lambda size: torch.ones(1, size, size).tril().bool(),  # a leading axis of 1
    "unrotate": lambda rotated, cos, sin: apply_rotary(rotated, cos, -sin),  # the package, angles negated
    "clip_sharded": lambda shards, max_norm: _clip_in_place(shards, max_norm),  # in place, a float norm
    "ddp_buckets": lambda parameters, cap, first: tuple(
        tuple(bucket) for bucket in MODULES["ch17"].ddp_buckets(parameters, cap, first)
    ),  # tuples
}


def _clip_in_place(shards, max_norm):
    """Clipped as clip_grad_norm_ does, in place, the norm returned as a float."""
    norm = float(torch.stack([piece.pow(2).sum() for mine in shards for piece in mine]).sum().sqrt())
    for mine in shards:
        torch._foreach_mul_(mine, min(1.0, max_norm / (norm + 1e-6)))
    return shards, norm


@pytest.mark.parametrize("name", EQUIVALENT)
def test_an_equivalent_answer_passes(name, capsys):
    _, out = output_of(EQUIVALENT[name], capsys, name=name)
    assert out.startswith("Correct:"), out


# Wrong answers that no mistake names: the exercise's own description of the difference.
DESCRIBED = [
    ("shift_matrix", lambda k, d_model: torch.eye(d_model), "M_k @ PE[pos] should equal PE[pos + k]"),
    ("attention", lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], "return both the output and the weights"),
    (
        "masked_attention",
        lambda q, k, v, mask: scaled_dot_product_attention(q, k, v, mask)[0],
        "return both the output and the weights",
    ),
    (
        "encoder_layer_parameters",
        lambda d_model, heads, d_ff: 0,
        "the layer has 3,152,384 parameters; your formula gives 0",
    ),
    (
        "look_ahead_mask",
        lambda size: torch.ones(size, size, dtype=torch.bool).tril(1),
        "your mask lets position 0 see position 1, which must be hidden",
    ),
    ("look_ahead_mask", lambda size: torch.ones(size, size).tril(), "return a boolean mask"),
    (
        "padding_mask",
        lambda tokens, pad_id: torch.zeros_like(tokens, dtype=torch.bool).unsqueeze(1),
        "stops position 0 from seeing position 0",
    ),
    (
        "target_mask",
        lambda tokens, pad_id: torch.ones(*tokens.shape, tokens.size(1), dtype=torch.bool),
        "lets position 0 see position 1 in sentence 0",
    ),
    (
        "cross_attention",
        lambda x, memory, attention, mask: attention(x, memory, memory, mask),
        "return only the output, [0]",
    ),
    (
        "cross_attention",
        lambda x, memory, attention, mask: attention(memory, memory, memory, mask)[0],
        "one row per source position",
    ),
    ("byte_fallback", lambda text, known: "".join(text), "return a list; got str"),
    ("wordpiece", lambda word, vocab: [word], "expected ['un', '##aff', '##able']; got ['unaffable']"),
    ("pack_rows", lambda lengths, row_tokens: [list(range(len(lengths)))], "expected [[2, 7], [6, 0], [4, 1, 3], [5]]"),
    ("brevity_penalty", lambda c, r: 0.5, "the penalty is 0.9001; got 0.5000"),
    ("brevity_penalty", lambda c, r: "short", "return the penalty as a number"),
    ("clipped_matches", lambda h, refs, n: (0, 0), "expected (matched, total) = (1, 4); got (0, 0)"),
    ("chrf", lambda h, r: 0.3171, "chrF is 31.7073; got 0.3171"),
    ("chrf", lambda h, r: [31.7], "return chrF as a number"),
    ("clip_sharded", lambda shards, max_norm: _ch17_solution(shards, max_norm)[1], "return a pair: (the clipped"),
    (
        "clip_sharded",  # each process clips by its own norm, and returns the largest of them
        lambda shards, max_norm: (
            MODULES["ch17"]._clip_by(shards, [s.sqrt() for s in MODULES["ch17"]._squares(shards)], max_norm),
            max(s.sqrt() for s in MODULES["ch17"]._squares(shards)),
        ),
        "each process clipped by the norm of its own shards",
    ),
    (
        "clip_sharded",
        lambda shards, max_norm: (_ch17_solution(shards, max_norm)[0], 0.0),
        "the shards are right but the norm is not: torch's is 6.4444",
    ),
    (
        "clip_sharded",
        lambda shards, max_norm: (shards, _ch17_solution(shards, max_norm)[1]),
        "the norm is right but the shards are not",
    ),
    (
        "ddp_buckets",
        lambda parameters, cap, first: [[index] for index in reversed(range(len(parameters)))],
        "DDP's bucket 0 holds parameters [87, 86]; yours holds [87]",
    ),
    (
        "ddp_buckets",
        lambda parameters, cap, first: MODULES["ch17"].ddp_buckets(parameters, cap, first)[:1],
        "DDP makes 2 buckets; you made 1",
    ),
    ("ddp_buckets", lambda parameters, cap, first: len(parameters), "return a list of buckets"),
]


def _ch17_solution(shards, max_norm):
    return MODULES["ch17"].clip_sharded(shards, max_norm)


@pytest.mark.parametrize("name, function, words", DESCRIBED, ids=[row[0] for row in DESCRIBED])
def test_a_wrong_answer_no_mistake_names_is_described(name, function, words, capsys):
    _, out = output_of(function, capsys, name=name)
    assert out.startswith("Not quite:") and words in out, out


def test_every_description_is_tested():
    described = {name for name, _, _ in DESCRIBED}
    for _, declared in DEFINED:
        if declared.describe is not None:
            assert declared.name in described, f"{declared.name}: no test of its description"


def test_an_exercise_is_named_by_its_reference_and_asks_its_docstring():
    layer_norm = EXERCISE["layer_norm"]
    assert layer_norm.reference is MODULES["ch04"].layer_norm and layer_norm.chapter == "book_exercises.ch04"
    assert layer_norm.task.startswith("Normalize each token over its features")
    assert EXERCISE["padding_mask"].task.startswith("(batch, seq) token ids")  # a package function: task=


def test_a_second_exercise_of_the_same_name_is_a_clear_error():
    def layer_norm(x, gamma, beta, eps=1e-5):
        """Another chapter's layer norm."""

    with pytest.raises(ValueError, match="two exercises are called 'layer_norm': in book_exercises.ch04 and in"):
        exercise(lambda: [Case((), "nothing")], [Mistake("a hint", lambda: None)])(layer_norm)
    assert EXERCISES["layer_norm"] is EXERCISE["layer_norm"]


def test_an_unknown_name_is_a_clear_error():
    def my_table(max_len, d_model):
        return None

    with pytest.raises(ValueError, match="no exercise is called 'my_table'.*exercise='sinusoidal_table'"):
        check(my_table)
    result = check(my_table, exercise="sinusoidal_table")
    assert not result.attempted


def test_generic_message_names_the_first_difference(capsys):
    _, out = output_of(lambda x, gamma, beta, eps=1e-5: x * 0 + 7.0, capsys, name="layer_norm")
    assert out.startswith("Not quite: on x (2, 3, 8)") and "first difference at index (0, 0, 0)" in out


def test_shape_and_error_messages(capsys):
    _, out = output_of(lambda q, k, v: (q, q[..., :1]), capsys, name="attention")
    assert "shape" in out
    _, out = output_of(lambda q, k, v: 1 / 0, capsys, name="attention")
    assert out == (
        "Not quite: your function raised ZeroDivisionError on query (2, 3, 4), key (2, 3, 4), "
        "value (2, 3, 6): division by zero"
    )


def test_device_argument_moves_inputs(capsys):
    seen = []

    def target_mask(tokens, pad_id):
        seen.append(tokens.device.type)
        return solution("target_mask")(tokens, pad_id)

    result, _ = output_of(target_mask, capsys, device="cpu")
    assert result.passed and set(seen) == {"cpu"}
    if torch.cuda.is_available():  # pragma: no cover - only on a GPU machine
        seen.clear()
        result, _ = output_of(target_mask, capsys, device="cuda")
        assert result.passed and set(seen) == {"cuda"}


def test_checking_does_not_change_the_readers_random_state(capsys):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check(solution("multi_head_attention"))
    capsys.readouterr()
    assert torch.equal(torch.rand(3), expected)


def test_result_displays_nothing_in_a_notebook():
    result = CheckResult("Correct", "x")
    assert result._ipython_display_() is None and "Correct" in repr(result)


def test_ddp_buckets_are_the_buckets_ddp_rebuilds():
    """Chapter 17's reference is what DistributedDataParallel does: one gloo process, the buckets it
    rebuilds after its first step, with its default caps (1 MiB, then 25 MiB) and with bucket_cap_mb."""
    import torch.distributed as dist

    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        for layers, cap_mb, caps in (
            ([(600, 600)] * 3, None, (25 * 2**20, 2**20)),
            ([(16, 8), (8, 24), (24, 4), (4, 2)], 0.0005, (524, 524)),  # 524 bytes, which buckets pass
        ):
            model = torch.nn.Sequential(*[torch.nn.Linear(*shape) for shape in layers])
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_mb)
            for _ in range(3):  # DDP rebuilds its buckets at the second step
                ddp(torch.randn(2, layers[0][0])).sum().backward()
            rebuilt = ddp._get_ddp_logging_data()["rebuilt_per_bucket_param_indices"]
            buckets = [[int(index) for index in bucket.split()] for bucket in rebuilt.split(",")]
            assert buckets == MODULES["ch17"].ddp_buckets(list(model.parameters()), *caps)
            assert len(buckets) > 1
    finally:
        dist.destroy_process_group()
