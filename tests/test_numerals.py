"""The number-words task of chapter 12 (transformer_book.numerals): English words -> Chinese numerals."""

import random

import pytest
import torch

from transformer_book import (
    CHINESE_CHARACTERS,
    ENGLISH_WORDS,
    LARGEST,
    NUMBERS_CONFIG,
    NUMBERS_TRAINING,
    chinese_numeral,
    english_words,
    number_is_held_out,
    numbers_task,
    random_number,
)

KNOWN = {
    1: ("one", "一"),
    10: ("ten", "十"),
    12: ("twelve", "十二"),
    20: ("twenty", "二十"),
    25: ("twenty five", "二十五"),
    100: ("one hundred", "一百"),
    101: ("one hundred and one", "一百零一"),
    110: ("one hundred and ten", "一百一十"),
    1000: ("one thousand", "一千"),
    1005: ("one thousand and five", "一千零五"),
    1050: ("one thousand and fifty", "一千零五十"),
    10000: ("ten thousand", "一万"),
    10010: ("ten thousand and ten", "一万零一十"),
    12305: ("twelve thousand three hundred and five", "一万二千三百零五"),
    100000: ("one hundred thousand", "十万"),
    150000: ("one hundred and fifty thousand", "十五万"),
    1000001: ("one million and one", "一百万零一"),
    10001000: ("ten million one thousand", "一千万一千"),
    20000300: ("twenty million three hundred", "二千万零三百"),
    100000000: ("one hundred million", "一亿"),
    100000001: ("one hundred million and one", "一亿零一"),
    100001000: ("one hundred million one thousand", "一亿零一千"),
    101000000: ("one hundred and one million", "一亿零一百万"),
    110000000: ("one hundred and ten million", "一亿一千万"),
}


@pytest.mark.parametrize("number", sorted(KNOWN))
def test_known_pairs(number):
    english, chinese = KNOWN[number]
    assert " ".join(english_words(number)) == english
    assert chinese_numeral(number) == chinese


def test_largest_and_range_errors():
    assert chinese_numeral(LARGEST) == "九亿九千九百九十九万九千九百九十九"
    assert len(english_words(LARGEST)) == 17
    for bad in (0, LARGEST + 1, -5):
        with pytest.raises(ValueError, match="must be in 1..999,999,999"):
            chinese_numeral(bad)
        with pytest.raises(ValueError, match="must be in 1..999,999,999"):
            english_words(bad)


def _value_of_chinese(text: str) -> int:
    """An independent reading: 亿 and 万 multiply what precedes them, 零 is silent."""
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")}
    total, section, digit = 0, 0, 0
    for character in text:
        if character in digits:
            digit = digits[character]
        elif character in "十百千":
            section += (digit or 1) * {"十": 10, "百": 100, "千": 1000}[character]
            digit = 0
        else:  # 万 or 亿
            total += (section + digit) * (10**4 if character == "万" else 10**8)
            section, digit = 0, 0
    return total + section + digit


def _value_of_english(words: list[str]) -> int:
    small = {w: i + 1 for i, w in enumerate(ENGLISH_WORDS[:9])}
    small |= {w: i + 10 for i, w in enumerate(ENGLISH_WORDS[9:19])}
    small |= {w: 10 * (i + 2) for i, w in enumerate(ENGLISH_WORDS[19:27])}
    total, group = 0, 0
    for word in words:
        if word in small:
            group += small[word]
        elif word == "hundred":
            group *= 100
        elif word in ("thousand", "million"):
            total += group * (1000 if word == "thousand" else 10**6)
            group = 0
    return total + group


def test_both_sides_read_back_to_the_number_and_follow_the_zero_rules():
    rng = random.Random(0)
    numbers = [random_number(rng) for _ in range(20000)] + list(range(1, 3000))
    for number in numbers:
        chinese = chinese_numeral(number)
        assert _value_of_chinese(chinese) == number, (number, chinese)
        assert _value_of_english(english_words(number)) == number
        assert "零零" not in chinese and not chinese.endswith("零")
        assert "零万" not in chinese and "零亿" not in chinese
        assert chinese.startswith("十") == (str(number)[0] == "1" and len(str(number)) in (2, 6))


def test_pairs_are_deterministic_and_correct():
    task = numbers_task()
    assert task.pairs(50, seed=3) == task.pairs(50, seed=3)
    assert task.pairs(50, seed=3) != task.pairs(50, seed=4)
    for source, target in task.pairs(2000, seed=0):
        number = _value_of_english(source)
        assert target == chinese_numeral(number) and not number_is_held_out(number)
        assert len(source) <= task.max_source_len and len(target) <= task.max_target_len


def test_held_out_numbers_are_disjoint_from_training():
    training = {tuple(s) for s, _ in numbers_task().pairs(20000, seed=0)}
    held_out = {tuple(s) for s, _ in numbers_task(held_out=True).pairs(3000, seed=0)}
    assert held_out and not training & held_out
    assert all(_value_of_english(list(s)) % 7 == 0 for s in held_out)


def test_vocabularies_round_trip_and_batch():
    task = numbers_task()
    assert len(task.source_vocab) == 3 + 31 and len(task.target_vocab) == 3 + 15
    assert task.target_vocab.tokens[3:] == list(CHINESE_CHARACTERS)
    pairs = task.pairs(64, seed=1)
    source, target = task.batch(pairs)
    assert source.shape == (64, 17) and target.shape == (64, 19)
    assert source.dtype == torch.long and target.dtype == torch.long
    for row, (words, chinese) in enumerate(pairs):
        assert task.source_vocab.decode(source[row]) == " ".join(words)
        assert task.target_vocab.decode(target[row]) == chinese


def test_every_digit_count_and_many_zeros_occur():
    rng = random.Random(5)
    numbers = [random_number(rng) for _ in range(5000)]
    assert {len(str(n)) for n in numbers} == set(range(1, 10))
    assert sum("零" in chinese_numeral(n) for n in numbers) > 1500


def test_the_fixed_training_and_config_are_the_chapters():
    assert NUMBERS_TRAINING == {"steps": 120, "batch_size": 128, "warmup_steps": 100, "smoothing": 0.0}
    assert NUMBERS_CONFIG == {"num_layers": 2, "d_model": 64, "d_ff": 256, "heads": 4, "dropout": 0.1}


def test_the_package_reexports_the_task():
    import transformer_book

    assert transformer_book.numbers_task is numbers_task
    assert transformer_book.chinese_numeral is chinese_numeral


# --- the model trained longer (tools/train_numbers.py) ---------------------------------------------


def test_trained_numbers_model_checkpoints_and_final_accuracy():
    from importlib.resources import files

    from transformer_book import exact_match_accuracy, pretrained_numbers_model

    weights = files("transformer_book") / "weights"
    assert (weights / "numbers.pt").stat().st_size < 3_000_000  # every checkpoint, half precision
    model, history = pretrained_numbers_model()
    assert not model.training and len(history) == 2000
    held_out = numbers_task(held_out=True)
    assert exact_match_accuracy(model, held_out, held_out.pairs(500, seed=2)) >= 0.97
    early, early_history = pretrained_numbers_model(120)
    assert early_history == history[:120]  # the same run, stopped earlier
    assert exact_match_accuracy(early, held_out, held_out.pairs(500, seed=2)) < 0.7


def test_trained_numbers_model_refuses_a_step_it_does_not_have():
    from transformer_book import pretrained_numbers_model

    with pytest.raises(
        ValueError, match=r"no checkpoint after step=300; the package has \[120, 250, 500, 1000, 2000\]"
    ):
        pretrained_numbers_model(300)
