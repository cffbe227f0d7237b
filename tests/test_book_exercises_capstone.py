"""The capstone chapters' exercise checkers (book_exercises.ch09 to ch12): each accepts its solution, says
"not attempted" for its stub, and rejects typical wrong answers (the solution with one realistic
edit) with the matching hint. Same style as tests/test_book_exercises.py."""

import importlib

import pytest

from book_exercises.core import load_solution

MODULES = {
    name: importlib.import_module(f"book_exercises.{name}") for name in ("ch09", "ch10", "ch11", "ch12")
}
EXERCISES = [
    (chapter, name) for chapter, module in MODULES.items() for name in module.SOLUTIONS
]

# (chapter, exercise, text in the solution, replacement, words the printed hint must contain);
# the same shape as MUTATIONS in tests/test_book_exercises.py, which can extend its own with these
MUTATIONS = [
    (
        "ch09",
        "warmup_rate",
        "d_model ** -0.5 * min(",
        "min(",
        "lacks the factor d_model^-0.5",
    ),
    ("ch09", "warmup_rate", "* min(", "* max(", "took the max"),
    (
        "ch09",
        "warmup_rate",
        "warmup_steps ** -1.5",
        "warmup_steps ** -0.5",
        "another power",
    ),
    (
        "ch09",
        "parameter_count",
        "norm = 2 * d_model ",
        "norm = 0 ",
        "left out the layer norms",
    ),
    (
        "ch09",
        "parameter_count",
        "+ vocab * d_model + vocab",
        "+ 3 * vocab * d_model + vocab",
        "count it once",
    ),
    (
        "ch09",
        "teacher_forced_exact_match",
        " | (labels == pad_id)",
        "",
        "padding positions",
    ),
    (
        "ch09",
        "teacher_forced_exact_match",
        "return right.all(dim=1)",
        "return right",
        "one boolean per sequence",
    ),
    (
        "ch09",
        "teacher_forced_exact_match",
        "(log_probs.argmax(dim=-1) == labels) | (labels == pad_id)",
        "(log_probs[:, :-1].argmax(dim=-1) == labels[:, :-1]) | (labels[:, :-1] == pad_id)",
        "the last position",
    ),
    (
        "ch10",
        "greedy_step",
        "    next_token = next_token.masked_fill(tokens[:, -1] == end_id, end_id)\n",
        "",
        "has ended",
    ),
    (
        "ch10",
        "greedy_step",
        "torch.cat([tokens, next_token.unsqueeze(1)], dim=1)",
        "torch.cat([next_token.unsqueeze(1), tokens], dim=1)",
        "append the new token at the end",
    ),
    (
        "ch10",
        "greedy_step",
        "return torch.cat([tokens, next_token.unsqueeze(1)], dim=1)",
        "return next_token",
        "return the whole sequences",
    ),
    (
        "ch10",
        "length_penalized",
        "scores / ((5 + lengths) / 6) ** alpha",
        "scores / lengths ** alpha",
        "plain length normalisation",
    ),
    (
        "ch10",
        "length_penalized",
        "scores / ((5 + lengths) / 6) ** alpha",
        "scores * ((5 + lengths) / 6) ** alpha",
        "divide the score by the penalty",
    ),
    (
        "ch10",
        "length_penalized",
        "scores / ((5 + lengths) / 6) ** alpha",
        "scores / ((5 + lengths) / 6)",
        "to the power alpha",
    ),
    (
        "ch10",
        "top_p_filter",
        "drop_sorted = mass_before >= top_p",
        "drop_sorted = probabilities.cumsum(dim=-1) > top_p",
        "carries the sum past top_p",
    ),
    (
        "ch10",
        "top_p_filter",
        "sorted_logits, order = logits.sort(dim=-1, descending=True)",
        "sorted_logits, order = logits, torch.arange(logits.size(-1)).expand_as(logits)",
        "sort the probabilities",
    ),
    (
        "ch10",
        "top_p_filter",
        'return logits.masked_fill(drop, float("-inf"))',
        'return sorted_logits.masked_fill(drop_sorted, float("-inf"))',
        "original order",
    ),
    (
        "ch11",
        "attention_entropy",
        "torch.special.entr(weights).sum(dim=-1)",
        "(-(weights * weights.log())).sum(dim=-1)",
        "0 * log 0 = nan",
    ),
    (
        "ch11",
        "attention_entropy",
        "torch.special.entr(weights).sum(dim=-1)",
        "torch.special.entr(weights).sum(dim=-2)",
        "sum over the keys",
    ),
    (
        "ch11",
        "attention_entropy",
        "torch.special.entr(weights).sum(dim=-1)",
        "(torch.special.entr(weights) / torch.log(torch.tensor(2.0))).sum(dim=-1)",
        "natural logarithm",
    ),
    (
        "ch11",
        "alignment_hit_rate",
        "return hit[counted].float().mean()",
        "return hit.float().mean()",
        "leave them out of the average",
    ),
    (
        "ch11",
        "alignment_hit_rate",
        "weights.argmax(dim=-1, keepdim=True)",
        "weights.transpose(-1, -2).argmax(dim=-1, keepdim=True)",
        "argmax over the keys",
    ),
    (
        "ch11",
        "alignment_hit_rate",
        "return hit[counted].float().mean()",
        "return hit[counted].sum()",
        "return a fraction",
    ),
    (
        "ch11",
        "ablate_head",
        "reshape(batch, seq, heads, width // heads).clone()\n    per_head[:, :, head] = 0.0",
        "reshape(batch, seq, width // heads, heads).clone()\n    per_head[..., head] = 0.0",
        "concatenated one after another",
    ),
    (
        "ch11",
        "ablate_head",
        "    return per_head.reshape(batch, seq, width)",
        "    return concatenated - per_head.reshape(batch, seq, width)",
        "kept only that head",
    ),
    (
        "ch12",
        "chinese_numeral",
        '            text += "零"  # one 零 for a whole run of zeros\n',
        "            pass\n",
        "which English never says",
    ),
    (
        "ch12",
        "chinese_numeral",
        'text += "零"  # one 零',
        'text += "零" * zeros_before  # one 零',
        "a whole run of zeros",
    ),
    (
        "ch12",
        "chinese_numeral",
        'if not (character == "1" and place == 1 and not text):',
        "if True:",
        "12 is 十二",
    ),
    (
        "ch12",
        "chinese_numeral",
        'if not (character == "1" and place == 1 and not text):',
        'if not (character == "1" and place == 1):',
        "110 is 一百一十",
    ),
    (
        "ch12",
        "chinese_numeral",
        "            zeros_before += 1  # zeros at the end are never written\n            continue",
        '            text += "零"\n            continue',
        "zeros at the end",
    ),
    ("ch12", "search_error", ".sum(dim=-1) >", ".sum(dim=-1) >=", "a tie is no search error"),
    ("ch12", "search_error", ".sum(dim=-1)", ".mean(dim=-1)", "compare total log-probabilities"),
    ("ch12", "search_error", ".sum(dim=-1) >", ".sum(dim=-1) <", "MORE probable"),
    (
        "ch12",
        "beam_step",
        "candidates = scores.unsqueeze(-1) + log_probs",
        "candidates = log_probs",
        "add each prefix's score",
    ),
    (
        "ch12",
        "beam_step",
        "return best_scores, best // vocab, best % vocab",
        "return best_scores, best % vocab, best // vocab",
        "beam * vocab + token",
    ),
    (
        "ch12",
        "beam_step",
        "candidates.flatten(1).topk(beam_size, dim=-1)",
        "candidates.max(dim=-1)",
        "flatten them",
    ),
]


def output_of(checker, function, capsys):
    result = checker(function)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"a checker prints exactly one line; got {out!r}"
    return result, out.strip()


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_solution_passes_its_checker(chapter, name, capsys):
    module = MODULES[chapter]
    result, out = output_of(
        module.CHECKERS[name], load_solution(module.SOLUTIONS[name], name), capsys
    )
    assert out.startswith("Correct:") and result.passed, out


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_stub_is_not_attempted_yet(chapter, name, capsys):
    module = MODULES[chapter]
    result, out = output_of(
        module.CHECKERS[name], load_solution(module.STUBS[name], name), capsys
    )
    assert (
        out.startswith("Not attempted yet:") and name in out and not result.attempted
    ), out
    _, again = output_of(
        module.CHECKERS[name], load_solution(module.STUBS[name], name), capsys
    )
    assert again == out


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_a_function_returning_none_is_not_attempted(chapter, name, capsys):
    _, out = output_of(
        MODULES[chapter].CHECKERS[name], lambda *args, **kwargs: None, capsys
    )
    assert out.startswith("Not attempted yet:") and "returns None" in out


@pytest.mark.parametrize("index", range(len(MUTATIONS)))
def test_typical_mistake_gets_its_hint(index, capsys):
    chapter, name, before, after, expected_hint = MUTATIONS[index]
    source = MODULES[chapter].SOLUTIONS[name]
    assert before in source, (
        f"mutation {index} no longer applies to the solution of {name}"
    )
    result, out = output_of(
        MODULES[chapter].CHECKERS[name],
        load_solution(source.replace(before, after), name),
        capsys,
    )
    assert out.startswith("Not quite:") and not result.passed, out
    assert expected_hint in out, out


def test_every_exercise_has_two_hinted_mistakes_tested():
    tested = {}
    for chapter, name, _before, _after, hint in MUTATIONS:
        if hint is not None:
            tested[(chapter, name)] = tested.get((chapter, name), 0) + 1
    assert all(tested.get(exercise, 0) >= 2 for exercise in EXERCISES), tested


def test_three_exercises_and_a_question_per_chapter():
    for module in MODULES.values():
        assert len(module.SOLUTIONS) >= 3
        assert module.SOLUTIONS.keys() == module.STUBS.keys() == module.CHECKERS.keys()
        assert module.QUESTION.strip() and len(module.ANSWER) > 100
