"""Tests for transformer_book.tasks (chapter 9): vocabulary, pairs, batches, exact match."""

import random

import pytest
import torch

from transformer_book import Task, Vocabulary, dates_task


def test_vocabulary_special_ids_and_round_trip():
    vocab = Vocabulary("abc")
    assert (vocab.pad_id, vocab.start_id, vocab.end_id, vocab.unk_id) == (0, 1, 2, None)
    assert vocab.tokens == ["<pad>", "<s>", "</s>", "a", "b", "c"]
    assert vocab.ids == {token: index for index, token in enumerate(vocab.tokens)}
    assert len(vocab) == 6
    assert vocab.encode("cab") == [5, 3, 4]
    assert vocab.decode([1, 5, 3, 0, 4, 2, 3]) == "cab"  # skips pad/start, stops at end
    assert vocab.decode_tokens([1, 5, 3, 0, 4, 2, 3]) == ["c", "a", "b"]
    assert vocab.decode(torch.tensor([1, 3, 2])) == "a"


def test_vocabulary_word_level():
    vocab = Vocabulary(["one", "two", "hundred"])
    ids = vocab.encode(["two", "hundred"])
    assert ids == [4, 5]
    assert vocab.decode([1, *ids, 2]) == "two hundred"


def test_vocabulary_errors_name_the_offending_values():
    """The checks every vocabulary inherits (chapters 13 and 15 subclass this one)."""
    vocab = Vocabulary("abc")
    with pytest.raises(ValueError, match=r"cannot encode \['x', 'z'\].*'a', 'b', 'c'"):
        vocab.encode("axz")
    with pytest.raises(ValueError, match=r"Vocabulary tokens must be unique.*repeated: \['a'\]"):
        Vocabulary("aab")
    with pytest.raises(ValueError, match=r"special: \['<s>'\]"):
        Vocabulary(["<s>", "a"])
    with pytest.raises(ValueError, match="Vocabulary needs at least one token; got none"):
        Vocabulary("")
    for bad in (6, -1):
        with pytest.raises(ValueError, match=f"no token has id {bad}; the ids are 0 to 5"):
            vocab.decode([3, bad])
    assert vocab.decode([3, 2, 6]) == "a"  # nothing after </s> is read


def test_subclasses_change_specials_and_name_themselves_in_errors():
    class WithUnknown(Vocabulary):
        specials = ("<pad>", "<s>", "</s>", "<unk>")

    vocab = WithUnknown("ab")
    assert (vocab.pad_id, vocab.start_id, vocab.end_id, vocab.unk_id) == (0, 1, 2, 3)
    assert vocab.encode("axb") == [4, 3, 5]  # an unknown token is "<unk>", not an error
    assert vocab.decode([1, 4, 3, 5, 2, 4]) == "a<unk>b"  # "<unk>" is not skipped
    with pytest.raises(ValueError, match=r"WithUnknown tokens .* special: \['<unk>'\]"):
        WithUnknown(["<unk>", "a"])

    class NoEnd(Vocabulary):
        specials = ("<pad>", "<s>")

    no_end = NoEnd("ab")
    assert no_end.end_id is None and no_end.decode([1, 2, 1, 3]) == "ab"  # nothing stops it
    plain = NoEnd(["</s>"])  # an ordinary token here: it ends nothing
    assert plain.tokens == ["<pad>", "<s>", "</s>"] and plain.end_id is None
    assert plain.decode([2, 1, 2]) == "</s> </s>"  # a word: joined with a space


def test_dates_pairs_are_deterministic_and_correct():
    task = dates_task()
    assert task.pairs(50, seed=3) == task.pairs(50, seed=3)
    assert task.pairs(50, seed=3) != task.pairs(50, seed=4)
    for source, target in task.pairs(200, seed=0):
        day, month, year = source.split(" ")
        assert target == f"{year}-{_month(month):02d}-{int(day):02d}"
        assert len(source) <= task.max_source_len and len(target) == task.max_target_len


def _month(name: str) -> int:
    from transformer_book import MONTHS

    return MONTHS.index(name) + 1


def test_held_out_dates_are_disjoint_from_training():
    training = {source for source, _ in dates_task().pairs(5000, seed=0)}
    held_out = {source for source, _ in dates_task(held_out=True).pairs(2000, seed=0)}
    assert held_out and not training & held_out


def test_batch_shapes_padding_and_start_end():
    task = dates_task()
    source, target = task.batch([("7 Mar 1987", "1987-03-07"), ("22 Nov 2026", "2026-11-22")])
    assert source.shape == (2, 11) and target.shape == (2, 12)
    assert source.dtype == torch.long and target.dtype == torch.long
    vocab = task.target_vocab
    assert target[0, 0].item() == vocab.start_id and target[0, 11].item() == vocab.end_id
    assert source[0, 10].item() == vocab.pad_id  # "7 Mar 1987" is 10 characters
    assert vocab.decode(target[0]) == "1987-03-07"
    assert task.source_vocab.decode(source[1]) == "22 Nov 2026"


def test_batch_rejects_too_long_input():
    task = dates_task()
    with pytest.raises(ValueError, match="allows 11"):
        task.batch([("22 Nov 20266", "2026-11-22")])
    word_task = Task("w", Vocabulary("ab"), Vocabulary("ab"), 2, 1, lambda rng: ("a", "b"))
    with pytest.raises(ValueError, match="allows 1"):
        word_task.batch([("a", "bb")])


def test_exact_match():
    assert Task.exact_match(["a", "b", "c", "d"], ["a", "x", "c", "d"]) == 0.75
    with pytest.raises(ValueError, match="3 predictions and 2 expected"):
        Task.exact_match(["a", "b", "c"], ["a", "b"])


def test_custom_task_generate_uses_the_seeded_rng():
    vocab = Vocabulary("0123456789")
    task = Task("copy", vocab, vocab, 3, 3, lambda rng: (str(rng.randrange(1000)),) * 2)
    assert task.pairs(5, seed=1) == [(str(n),) * 2 for n in _draws(1, 5)]
    with pytest.raises(ValueError, match="count must be >= 0"):
        task.pairs(-1, seed=0)


def _draws(seed, count):
    rng = random.Random(seed)
    return [rng.randrange(1000) for _ in range(count)]
