# This file is generated from book/12_search_matters.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""English number words -> Chinese numerals, where search matters (chapter 12)."""

from __future__ import annotations

import random

from transformer_book.tasks import Task, Vocabulary

ONES = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TEENS = (
    "ten", "eleven", "twelve", "thirteen", "fourteen",
    "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)
TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
ENGLISH_WORDS = ONES + TEENS + TENS + ("hundred", "and", "thousand", "million")
CHINESE_DIGITS = "零一二三四五六七八九"
CHINESE_CHARACTERS = CHINESE_DIGITS + "十百千万亿"
LARGEST = 999_999_999  # nine digits: the 亿 group holds one digit


def english_words(number: int) -> list[str]:
    """Spell out a number in British English words, one token per word.

    British English, one token per word: 12305 -> twelve thousand three hundred and
    five.

    "and" follows "hundred" when tens or units follow, and joins a last group below 100
    to a larger part (1005: one thousand and five). "twenty-five" is two tokens.
    """
    if not 1 <= number <= LARGEST:
        raise ValueError(f"number must be in 1..{LARGEST:,}; got {number}")

    def below_hundred(n: int) -> list[str]:
        if n < 10:
            return [ONES[n - 1]]
        if n < 20:
            return [TEENS[n - 10]]
        return [TENS[n // 10 - 2]] + ([ONES[n % 10 - 1]] if n % 10 else [])

    def below_thousand(n: int) -> list[str]:
        words = [ONES[n // 100 - 1], "hundred"] if n >= 100 else []
        if n % 100:
            words += (["and"] if words else []) + below_hundred(n % 100)
        return words

    millions, thousands, units = number // 10**6, number // 1000 % 1000, number % 1000
    words = []
    if millions:
        words += below_thousand(millions) + ["million"]
    if thousands:
        words += below_thousand(thousands) + ["thousand"]
    if units:
        words += (["and"] if words and units < 100 else []) + below_thousand(units)
    return words


def chinese_numeral(number: int) -> str:
    """Chinese numerals, in groups of four digits: 12305 -> 一万二千三百零五.

    Reading the digits from the highest: each inner run of zeros is one 零; the zeros
    that end a nonzero group are absorbed by its unit 万 or 亿 (10001000 -> 一千万一千)
    and those that end the number are dropped. The tens digit 1 is written 十 without
    一 only when it leads the number (十二, 十五万), 一十 elsewhere (一百一十).
    """
    if not 1 <= number <= LARGEST:
        raise ValueError(f"number must be in 1..{LARGEST:,}; got {number}")
    digits = str(number)
    pieces, pending_zero, group_has_digit = [], False, False
    for index, character in enumerate(digits):
        place = len(digits) - 1 - index  # 0 for units, 4 for 万, 8 for 亿
        digit = int(character)
        if digit == 0:
            pending_zero = True
        else:
            if pending_zero:
                pieces.append("零")
            pending_zero, group_has_digit = False, True
            leading_ten = not pieces and digit == 1 and place % 4 == 1
            if not leading_ten:
                pieces.append(CHINESE_DIGITS[digit])
            pieces.append(("", "十", "百", "千")[place % 4])
        if place % 4 == 0 and place > 0 and group_has_digit:
            pieces.append("万" if place == 4 else "亿")
            # the group's own trailing zeros end here
            pending_zero, group_has_digit = False, False
    return "".join(pieces)


MAX_DIGITS = 9
ZERO_CHANCE = 0.3  # each digit after the first is 0 with this probability: many 零
HELD_OUT_EVERY = 7  # multiples of 7 are held out (7 is coprime to 10)


def random_number(rng: random.Random) -> int:
    """A digit count uniform in 1..9, a nonzero first digit, then 0 with chance 0.3."""
    length = rng.randint(1, MAX_DIGITS)
    digits = [rng.randint(1, 9)]
    for _ in range(length - 1):
        digits.append(0 if rng.random() < ZERO_CHANCE else rng.randint(1, 9))
    return int("".join(map(str, digits)))


def number_is_held_out(number: int) -> bool:
    return number % HELD_OUT_EVERY == 0


def numbers_task(held_out: bool = False) -> Task:
    """English words -> Chinese numeral; ``held_out``: only the held-out numbers.

    Sources are word lists (a vocabulary of 31 words), targets strings of 15 characters.
    Training and held-out numbers are disjoint: the multiples of 7 are held out.
    """
    source_vocab = Vocabulary(list(ENGLISH_WORDS))
    target_vocab = Vocabulary(CHINESE_CHARACTERS)

    def generate(rng: random.Random) -> tuple[list[str], str]:
        while True:
            number = random_number(rng)
            if number_is_held_out(number) == held_out:
                return english_words(number), chinese_numeral(number)

    name = "number words (held out)" if held_out else "number words"
    return Task(
        name,
        source_vocab,
        target_vocab,
        max_source_len=17,
        max_target_len=17,
        generate=generate,
    )


# make_model keyword arguments: chapter 9's dates model, about 240,000 parameters
NUMBERS_CONFIG = dict(num_layers=2, d_model=64, d_ff=256, heads=4, dropout=0.1)
# train_model keyword arguments: the chapter's fixed, seeded training (no smoothing)
NUMBERS_TRAINING = dict(steps=120, batch_size=128, warmup_steps=100, smoothing=0.0)


# in transformer_book/weights/, written by tools/train_numbers.py
NUMBERS_WEIGHTS = "numbers.pt"


def pretrained_numbers_model(step: int | None = None, device="cpu"):
    """Load the longer-trained number model and its loss history.

    (model, history) of the number model trained longer by tools/train_numbers.py:
    the checkpoint after ``step`` steps (default: the last), in evaluation mode on
    ``device``, and the run's loss history up to that step."""
    from importlib.resources import files

    import torch

    from transformer_book.model import make_model

    weights = files("transformer_book") / "weights" / NUMBERS_WEIGHTS
    with weights.open("rb") as handle:
        saved = torch.load(handle, map_location="cpu", weights_only=True)
    checkpoints = saved["checkpoints"]
    step = max(checkpoints) if step is None else step
    if step not in checkpoints:
        raise ValueError(
            f"no checkpoint after step={step!r}; the package has {sorted(checkpoints)}"
        )
    config = dict(saved["config"])
    sizes = config.pop("source_vocab"), config.pop("target_vocab")
    model = make_model(*sizes, **config)
    state = {name: value.float() for name, value in checkpoints[step].items()}
    model.load_state_dict(state)
    return model.to(device).eval(), saved["history"][:step]
