"""The exercise checkers (src/book_exercises): each accepts its solution, says "not attempted" for its
stub, and rejects typical wrong answers with the matching hint. The wrong answers are the reference
solutions with one realistic edit (the `mutations` below), executed as a reader's cell would be."""

import importlib

import pytest
import torch

from book_exercises import CHAPTERS
from book_exercises.core import CheckResult, load_solution

MODULES = {name: importlib.import_module(f"book_exercises.{name}") for name in CHAPTERS}
EXERCISES = [(chapter, name) for chapter, module in MODULES.items() for name in module.SOLUTIONS]

# (chapter, exercise, text in the solution, replacement (or a list of (text, replacement)), words the
# printed hint must contain; None: an equivalent rewrite that must still pass)
MUTATIONS = [
    ("ch01", "sinusoidal_table", [("torch.sin(position", "SWAP"), ("torch.cos(position", "torch.sin(position"),
                                  ("SWAP", "torch.cos(position")], "sin and cos are swapped"),
    ("ch01", "sinusoidal_table", [  # the source notes' NumPy version: 2j/d_model, j the dimension index
        ("torch.sin(position * frequency)", "torch.sin(position / 10000 ** (2 * pair_start / d_model))"),
        ("torch.cos(position * frequency)", "torch.cos(position / 10000 ** (2 * (pair_start + 1) / d_model))")],
     "source notes' NumPy version"),
    ("ch01", "sinusoidal_table", "torch.arange(max_len, dtype", "torch.arange(1, max_len + 1, dtype",
     "positions start at 1"),
    ("ch01", "shift_matrix", [("matrix[pair, pair], matrix[pair, pair + 1] = cos_k, sin_k",
                               "matrix[pair, pair], matrix[pair, pair + 1] = cos_k, -sin_k"),
                              ("matrix[pair + 1, pair], matrix[pair + 1, pair + 1] = -sin_k",
                               "matrix[pair + 1, pair], matrix[pair + 1, pair + 1] = sin_k")],
     "rotates backwards"),
    ("ch01", "shift_matrix", "sinusoidal_table(k + 1, d_model)[k]", "sinusoidal_table(2, d_model)[1]",
     "position 1 instead of position k"),
    ("ch01", "embed_with_positions", "weight[tokens] * math.sqrt(d_model)", "weight[tokens]",
     "not multiplied by sqrt(d_model)"),
    ("ch01", "embed_with_positions", "return vectors + positions", "return vectors",
     "positional encodings are missing"),
    ("ch02", "attention", " / math.sqrt(query.size(-1))", "", "not divided by sqrt(d_k)"),
    ("ch02", "attention", "dim=-1", "dim=-2", "softmax(dim=-1)"),
    ("ch02", "attention", "weights @ value,", "weights * value,", "not an element-wise product"),
    ("ch02", "attention", "key.transpose(-2, -1)", "key.transpose(1, 2)", "key.transpose(-2, -1)"),
    ("ch02", "masked_attention", "~mask", "mask", "wrong way round"),
    ("ch02", "masked_attention", 'float("-inf")', "-100", "masked with -100 instead of -inf"),
    ("ch02", "masked_softmax", "    return weights.masked_fill(nothing_allowed, 0.0)", "    return weights",
     "gives NaN"),
    ("ch02", "masked_softmax", 'scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, -1e9)",
     None),  # still correct: the empty rows are zeroed afterwards
    ("ch02", "masked_softmax", [('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, -1e9)"),
                                ("    return weights.masked_fill(nothing_allowed, 0.0)", "    return weights")],
     "uniform weights"),
    ("ch02", "masked_softmax", "~mask, float", "mask, float", "wrong way round"),
    ("ch03", "split_heads", "x.view(batch, seq, heads, d_model // heads).transpose(1, 2)",
     "x.view(batch, heads, seq, d_model // heads)", "cuts the sequence"),
    ("ch03", "split_heads", ".transpose(1, 2)", "", "add .transpose(1, 2)"),
    ("ch03", "merge_heads", "x.transpose(1, 2).reshape", "x.reshape", "without first moving the heads axis"),
    ("ch03", "merge_heads", ".reshape(batch, seq, heads * d_k)", ".view(batch, seq, heads * d_k)",
     "not contiguous"),
    ("ch03", "multi_head_attention", "return layer.output_proj(merged)", "return merged",
     "output projection W^O is missing"),
    ("ch03", "multi_head_attention", "~mask.unsqueeze(1)", "~mask", "not given a heads axis"),
    ("ch03", "multi_head_attention", "math.sqrt(d_k)", "math.sqrt(d_model)", "not sqrt(d_model)"),
    ("ch04", "layer_norm", "unbiased=False", "unbiased=True", "unbiased variance (divides by n-1)"),
    ("ch04", "layer_norm", "return gamma * normalized + beta", "return normalized",
     "gamma and beta are not applied"),
    ("ch04", "layer_norm", "dim=-1", "dim=0", "batch statistics"),
    ("ch04", "layer_norm", "(x - mean) / torch.sqrt(variance + eps)",
     "(x - mean) / (x.std(dim=-1, keepdim=True) + eps)", "Annotated Transformer"),
    ("ch04", "sublayer_connection", "norm(x + sublayer(x))", "x + sublayer(norm(x))", "pre-norm"),
    ("ch04", "sublayer_connection", "norm(x + sublayer(x))", "norm(sublayer(x))", "residual is missing"),
    ("ch04", "pre_norm_stack", "return final_norm(x)", "return x", "final norm is missing"),
    ("ch04", "pre_norm_stack", "x = x + sublayer(norm(x))", "x = norm(x + sublayer(x))",
     "post-norm sublayers"),
    ("ch05", "feed_forward", "torch.relu(x @ w1 + b1)", "(x @ w1 + b1)", "ReLU is missing"),
    ("ch05", "feed_forward", "torch.relu(x @ w1 + b1)", "torch.relu(x @ w1) + b1", "b1 is added after"),
    ("ch05", "encoder_layer_parameters", "    return attention + feed_forward + norms",
     "    return attention + feed_forward", "forgot the two layer norms"),
    ("ch05", "encoder_layer_parameters", "d_model * d_model + d_model)", "d_model * d_model + d_model) * heads",
     "number of heads does not multiply"),
    ("ch05", "encoder_layer", "self_attn(x, x, x, mask)[0]", "self_attn(x, x, x)[0]",
     "padding mask is not passed"),
    ("ch05", "encoder_layer", "self_attn(x, x, x, mask)[0]", "self_attn(x, x, x, mask)", "take [0]"),
    ("ch05", "encoder_layer", "norm1(x + self_attn", "norm2(x + self_attn", "its own norm"),
    ("ch06", "look_ahead_mask", "return torch.ones(size, size, dtype=torch.bool).tril()",
     "return torch.triu(torch.ones(size, size), diagonal=0) == 0", "hides the diagonal"),
    ("ch06", "look_ahead_mask", ".tril()", ".tril(1)", "lets position 0 see position 1"),
    ("ch06", "look_ahead_mask", "return torch.ones(size, size, dtype=torch.bool).tril()",
     "return torch.ones(size, size, dtype=torch.bool).triu(1)", "wrong way round"),
    ("ch06", "look_ahead_mask", "dtype=torch.bool", "dtype=torch.float32", "return a boolean mask"),
    ("ch06", "padding_mask", "(tokens != pad_id).unsqueeze(1)", "tokens != pad_id", "add the query axis"),
    ("ch06", "padding_mask", "tokens != pad_id", "tokens == pad_id", "wrong way round"),
    ("ch06", "padding_mask", "tokens != pad_id", "tokens != 0", "not with pad_id"),
    ("ch06", "target_mask", "real_keys & no_future", "real_keys | no_future", "| (or)"),
    ("ch06", "target_mask", "return real_keys & no_future", "return real_keys", "look-ahead mask is missing"),
    ("ch07", "cross_attention", "attention(x, memory, memory, source_mask)",
     "attention(x, x, x, source_mask)", "decoder's own states"),
    ("ch07", "cross_attention", "attention(x, memory, memory, source_mask)",
     "attention(memory, x, x, source_mask)", "queries come from the decoder"),
    ("ch07", "decoder_layer", "self_attn(x, x, x, target_mask)", "self_attn(x, x, x)",
     "target mask is missing"),
    ("ch07", "decoder_layer", [("(x, x, x, target_mask)[0]", "(x, x, x, MASK_B)[0]"),
                               ("(x, memory, memory, source_mask)[0]", "(x, memory, memory, target_mask)[0]"),
                               ("MASK_B", "source_mask")], "masks are swapped"),
    ("ch07", "teacher_forcing", "target[:, :-1], target[:, 1:]", "target[:, :-1], target[:, :-1]",
     "learn to copy"),
    ("ch07", "teacher_forcing", "target[:, :-1], target[:, 1:]", "target[:, 1:], target[:, :-1]", "swapped"),
    ("ch08", "generator", "torch.log_softmax(logits, dim=-1)", "torch.softmax(logits, dim=-1)",
     "returned probabilities"),
    ("ch08", "generator", "torch.log_softmax(logits, dim=-1)", "torch.log(torch.softmax(logits, dim=-1))",
     "underflows"),
    ("ch08", "generator", "torch.log_softmax(logits, dim=-1)",
     "torch.log(logits.exp() / logits.exp().sum(-1, keepdim=True))", "overflows"),
    ("ch08", "smoothed_targets", "(vocab_size - 2)", "(vocab_size - 1)", "divided by vocab - 1"),
    ("ch08", "smoothed_targets", "    distribution[targets == pad_id] = 0.0  # padding positions are not scored\n", "",
     "rows whose target is padding"),
    ("ch08", "top_k_probabilities", "logits / temperature", "logits * temperature", "multiplied the logits"),
    ("ch08", "top_k_probabilities", 'float("-inf")', "0.0", "set to 0, not -inf"),
    # The capstone chapters (9 to 12).
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
    # Chapter 13: one byte-pair merge step, batches of similar length, encoding a word by rank.
    ("ch13", "bpe_step", "pairs[pair] += count", "pairs[pair] += 1", "weight each pair by its word's count"),
    ("ch13", "bpe_step", "i += 2  # both", "i += 1  # both", "skip both symbols"),
    ("ch13", "bpe_step", "merged[tuple(new)] = count", "merged[tuple(new)] = 1", "keep each word's count"),
    ("ch13", "bpe_step",
     ("        new, i = [], 0\n        while i < len(symbols):\n            if symbols[i : i + 2] == best:\n"
      "                new.append(symbols[i] + symbols[i + 1])\n                i += 2  # both symbols are used up\n"
      "            else:\n                new.append(symbols[i])\n                i += 1\n"),
     '        new = " ".join(symbols).replace(" ".join(best), "".join(best)).split(" ")\n',
     "match whole symbols"),
    ("ch13", "length_buckets", "longest = lengths[index]",
     "longest = lengths[batch[0]] if batch else lengths[index]", "not batch size x shortest"),
    ("ch13", "length_buckets", "if batch and (len(batch) + 1) * longest > max_tokens:",
     "if batch and sum(lengths[i] for i in batch) + lengths[index] > max_tokens:", "padding counts too"),
    ("ch13", "length_buckets", [("order = sorted(range(len(lengths)), key=lambda i: lengths[i])",
                                 "order = range(len(lengths))"),
                                ("longest = lengths[index]", "longest = max(lengths[i] for i in [*batch, index])")],
     "sort the examples by length first"),
    ("ch13", "length_buckets", "* longest > max_tokens", "* longest >= max_tokens", "exactly max_tokens"),
    ("ch13", "encode_word", 'symbols = (*word[:-1], word[-1] + "</w>")', "symbols = tuple(word)",
     "the last one marked"),
    ("ch13", "encode_word", "min(pairs", "max(pairs", "LOWEST rank"),
    ("ch13", "encode_word", 'min(pairs, key=lambda pair: rank.get(pair, float("inf")))',
     "next((pair for pair in pairs if pair in rank), None)", "by rank, not by position"),
    ("ch13", "encode_word",  # the simplest faithful way: every merge in rank order
     [("    while len(symbols) > 1:\n", "    for best in sorted(rank, key=rank.get):\n"),
      ("        pairs = zip(symbols, symbols[1:])\n", ""),
      ('        best = min(pairs, key=lambda pair: rank.get(pair, float("inf")))\n', ""),
      ("        if best not in rank:\n            break  # no pair of the word was ever merged\n", "")],
     None),
    # Chapter 14: BLEU's brevity penalty, averaging checkpoints, clipped n-gram matches.
    ("ch14", "brevity_penalty", "math.exp(1 - r / c)", "math.exp(1 - c / r)", "ratio is inverted"),
    ("ch14", "brevity_penalty", "return 1.0 if c >= r else math.exp(1 - r / c)",
     "return math.exp(1 - r / c)", "never above 1"),
    ("ch14", "brevity_penalty", "return 1.0 if c >= r else math.exp(1 - r / c)",
     "return math.exp(1 - max(c, r) / min(c, r))", "only outputs that are too short"),
    ("ch14", "brevity_penalty", "min(lengths, key=lambda length: (abs(length - output), length))",
     "max(lengths)", "not the longest reference"),
    ("ch14", "brevity_penalty", "(abs(length - output), length)", "(abs(length - output), -length)",
     "take the shorter"),
    ("ch14", "average_checkpoints", " / len(checkpoints)", "", "divide the sum by the number"),
    ("ch14", "average_checkpoints", " / len(checkpoints)", " / 5", "not by 5"),
    ("ch14", "average_checkpoints", "for name in checkpoints[0]",
     'for name in checkpoints[0] if name.endswith("weight")', "biases and norms included"),
    ("ch14", "clipped_matches", "min(count, allowed[gram])", "count * (gram in allowed)",
     "clip the matches"),
    ("ch14", "clipped_matches", "allowed |= ngrams(reference)", "allowed += ngrams(reference)",
     "any ONE reference"),
    ("ch14", "clipped_matches", "for reference in references:", "for reference in references[:1]:",
     "use every reference"),
    ("ch15", "next_token_loss", [("logits[:, :-1].reshape", "logits.reshape"), ("tokens[:, 1:].reshape", "tokens.reshape")],
     "shift by one"),
    ("ch15", "next_token_loss", ", ignore_index=0", "", "leave the padding targets out"),
    ("ch15", "acrostic_logits", 'torch.full_like(logits, float("-inf"))', "torch.zeros_like(logits)",
     "not to 0"),
    ("ch15", "acrostic_logits", "    return kept", "    return logits.clone()", "every other character must become impossible"),
    ("ch15", "top_p", "drop[order] = before >= top_p", "drop[order] = sorted_probabilities.cumsum(-1) > top_p",
     "keep the token that brings the mass over top_p"),
    ("ch15", "top_p", "argsort(descending=True)", "argsort(descending=False)", "the nucleus holds the LIKELIEST"),
    ("ch16", "unrotate", "rotated * cos - turned * sin", "rotated * cos + turned * sin",
     "you rotated forwards again"),
    ("ch16", "unrotate", [("first, second = rotated.chunk(2, dim=-1)", "first, second = rotated[..., 0::2], rotated[..., 1::2]"),
                          ("turned = torch.cat([-second, first], dim=-1)", "turned = torch.stack([-second, first], dim=-1).flatten(-2)")],
     "the pairs are the halves"),
    ("ch16", "kv_cache_bytes", "2 * layers * kv_heads * d_k", "2 * layers * heads * d_k", "the key/value heads only"),
    ("ch16", "kv_cache_bytes", "2 * layers * kv_heads", "layers * kv_heads", "keys AND values"),
    ("ch16", "swiglu_size", "budget // (3 * d_model)", "budget // (2 * d_model)", "THREE"),
    ("ch16", "swiglu_size", "return largest - largest % multiple_of", "return largest", "must be a multiple"),
    # Chapter 17: the bytes of an FSDP shard, fp16's loss scale, where a resumed run starts.
    ("ch17", "shard_bytes", "piece = -(-rows // world_size)", "piece = rows // world_size",
     "drops the remainder rows"),
    ("ch17", "shard_bytes", "return total * bytes_per_value", "return total", "count bytes, not values"),
    ("ch17", "update_scale", "return scale * 2.0, 0", "return scale * 2.0, good_steps",
     "after the scale grows, the count starts again"),
    ("ch17", "update_scale", "return scale * 0.5, 0", "return scale * 0.5, good_steps",
     "count of good steps starts again at 0"),
    ("ch17", "resume_position", "index = step * world_size * accumulate", "index = step * accumulate",
     "one per process per micro-batch"),
    ("ch17", "resume_position", "index // batches_per_epoch + 1", "index // batches_per_epoch",
     "epochs count from 1"),
]

def output_of(checker, function, capsys, **kwargs):
    result = checker(function, **kwargs)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"a checker prints exactly one line; got {out!r}"
    return result, out.strip()


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_solution_passes_its_checker(chapter, name, capsys):
    module = MODULES[chapter]
    result, out = output_of(module.CHECKERS[name], load_solution(module.SOLUTIONS[name], name), capsys)
    assert out.startswith("Correct:") and result.passed and bool(result), out


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_stub_is_not_attempted_yet(chapter, name, capsys):
    module = MODULES[chapter]
    result, out = output_of(module.CHECKERS[name], load_solution(module.STUBS[name], name), capsys)
    assert out.startswith("Not attempted yet:") and name in out and not result.attempted, out
    _, again = output_of(module.CHECKERS[name], load_solution(module.STUBS[name], name), capsys)
    assert again == out  # deterministic, so nbval can compare it


@pytest.mark.parametrize("chapter, name", EXERCISES)
def test_a_function_returning_none_is_not_attempted(chapter, name, capsys):
    _, out = output_of(MODULES[chapter].CHECKERS[name], lambda *args, **kwargs: None, capsys)
    assert out.startswith("Not attempted yet:") and "returns None" in out


@pytest.mark.parametrize("index", range(len(MUTATIONS)), ids=lambda i: f"{MUTATIONS[i][0]}-{MUTATIONS[i][1]}-{i}")
def test_typical_mistake_gets_its_hint(index, capsys):
    chapter, name, *edits, expected_hint = MUTATIONS[index]
    replacements = edits[0] if len(edits) == 1 else [tuple(edits)]
    source = MODULES[chapter].SOLUTIONS[name]
    for before, after in replacements:
        assert before in source, f"mutation {index} no longer applies to the solution of {name}"
        source = source.replace(before, after)
    result, out = output_of(MODULES[chapter].CHECKERS[name], load_solution(source, name), capsys)
    if expected_hint is None:  # an equivalent rewrite: still correct
        assert out.startswith("Correct:"), out
        return
    assert out.startswith("Not quite:") and not result.passed, out
    assert expected_hint in out, out


def test_every_exercise_has_two_hinted_mistakes_tested():
    tested = {}
    for chapter, name, *_edits, hint in MUTATIONS:
        if hint is not None:
            tested[(chapter, name)] = tested.get((chapter, name), 0) + 1
    assert all(tested.get(exercise, 0) >= 2 for exercise in EXERCISES), tested


def test_three_exercises_and_a_question_per_chapter():
    for module in MODULES.values():
        assert len(module.SOLUTIONS) >= 3 and module.SOLUTIONS.keys() == module.STUBS.keys() == module.CHECKERS.keys()
        assert module.QUESTION.strip() and len(module.ANSWER) > 100


def test_generic_message_names_the_first_difference(capsys):
    from book_exercises.ch04 import check_layer_norm
    _, out = output_of(check_layer_norm, lambda x, gamma, beta, eps=1e-5: x * 0 + 7.0, capsys)
    assert out.startswith("Not quite: on x (2, 3, 8)") and "first difference at index (0, 0, 0)" in out


def test_shape_and_error_messages(capsys):
    from book_exercises.ch02 import check_attention
    _, out = output_of(check_attention, lambda q, k, v: (q, q[..., :1]), capsys)
    assert "shape" in out
    _, out = output_of(check_attention, lambda q, k, v: 1 / 0, capsys)
    assert out == "Not quite: your function raised ZeroDivisionError on query (2, 3, 4), key (2, 3, 4), value (2, 3, 6): division by zero"


def test_device_argument_moves_inputs(capsys):
    from book_exercises.ch06 import SOLUTIONS, check_target_mask
    seen = []

    def spy(tokens, pad_id):
        seen.append(tokens.device.type)
        return load_solution(SOLUTIONS["target_mask"], "target_mask")(tokens, pad_id)

    result, _ = output_of(check_target_mask, spy, capsys, device="cpu")
    assert result.passed and set(seen) == {"cpu"}
    if torch.cuda.is_available():  # pragma: no cover - only on a GPU machine
        seen.clear()
        result, _ = output_of(check_target_mask, spy, capsys, device="cuda")
        assert result.passed and set(seen) == {"cuda"}


def test_checking_does_not_change_the_readers_random_state(capsys):
    from book_exercises.ch03 import SOLUTIONS, check_multi_head_attention
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check_multi_head_attention(load_solution(SOLUTIONS["multi_head_attention"], "multi_head_attention"))
    capsys.readouterr()
    assert torch.equal(torch.rand(3), expected)


def test_result_displays_nothing_in_a_notebook():
    result = CheckResult("Correct", "x")
    assert result._ipython_display_() is None and "Correct" in repr(result)
