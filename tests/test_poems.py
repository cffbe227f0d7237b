"""Tests for transformer_book.poems (chapter 15): the shipped Tang poems, their split, the
character vocabulary; the poems' variant characters normalised (data/tang_poems_variants.tsv)."""

import lzma
import re
from collections import Counter
from importlib.resources import files

import pytest
import torch

from build_poems import in_gb2312
from transformer_book import (
    HELD_OUT,
    PoemVocabulary,
    poem_split,
    read_poems,
    split_verses,
    twin_poems,
    verse_keys,
)


def test_every_line_is_a_poem():
    poems = read_poems()
    assert len(poems) == 18_409 and len(set(poems)) == 18_003
    assert poems[0].startswith("秦川雄帝宅，函谷壮皇居。")
    assert all(len(poem) % 6 == 0 for poem in poems)


def test_no_poem_on_two_sides_and_every_poem_on_one():
    train, held_out = poem_split("train"), poem_split("held-out")
    assert len(held_out) == HELD_OUT == 1000
    assert not set(train) & set(held_out)
    assert len(set(train)) == len(train) and len(set(held_out)) == len(held_out)
    assert set(train) | set(held_out) == set(read_poems())


def test_split_is_fixed():
    # recorded once: a change to the seed, the sort or the file changes the split
    assert poem_split("held-out") == poem_split("held-out")
    assert poem_split("train", by="poem")[0].startswith("雨声传两夜，寒事飒高秋。")
    assert poem_split("held-out", by="poem")[0].startswith("雨歇万井春，柔条已含绿。")
    # split by meaning (the default): the same sizes, other poems
    train, held_out = poem_split("train", by="meaning"), poem_split("held-out", by="meaning")
    assert (train, held_out) == (poem_split("train"), poem_split("held-out"))
    assert (len(train), len(held_out)) == (17_003, 1000)
    assert train[0].startswith("宓子昔为政，鸣琴登此台。")
    assert held_out[0].startswith("疏鼓应繁丝，送神归九疑。")


def crossing_twins(held_out: list[str], train: list[str]) -> list[str]:
    """Held-out poems with at least half their verses (or half the other's, if it is
    shorter) in one training poem, up to one character a verse; computed pair by pair
    from the verses, not from the groups."""
    in_train: dict[str, set[int]] = {}
    for index, poem in enumerate(train):
        for verse in split_verses(poem):
            for key in verse_keys(verse):
                in_train.setdefault(key, set()).add(index)
    found = []
    for poem in held_out:
        own = set(split_verses(poem))
        shared = Counter()
        for verse in own:
            shared.update(set().union(*(in_train.get(key, set()) for key in verse_keys(verse))))
        if any(2 * n >= min(len(own), len(set(split_verses(train[i])))) for i, n in shared.items()):
            found.append(poem)
    return found


def test_verse_keys_match_a_variant_character():
    assert split_verses("白日依山尽，黄河入海流。") == ["白日依山尽", "黄河入海流"]
    assert set(verse_keys("凤凰台上游")) & set(verse_keys("凤皇台上游"))
    assert not set(verse_keys("凤凰台上游")) & set(verse_keys("凤皇台下游"))


def test_no_near_twin_crosses_sides_of_the_split_by_meaning():
    held_out, train = poem_split("held-out", by="meaning"), poem_split("train", by="meaning")
    assert crossing_twins(held_out, train) == []
    assert sorted(p for group in twin_poems() for p in group) == sorted(held_out + train)


def test_the_twin_check_fails_on_the_split_by_poem():
    """The split by poem (exact repeats only; the shipped poet's until it was retrained on the split
    by meaning) leaves near-twins on both sides: the check above must see them (chapter 15 counts
    them)."""
    crossing = crossing_twins(poem_split("held-out", by="poem"), poem_split("train", by="poem"))
    assert len(crossing) == 72


def test_bad_split_name_is_refused():
    with pytest.raises(ValueError, match="'test'"):
        poem_split("test")
    with pytest.raises(ValueError, match=r'by must be "poem" or "meaning"; got by=\'verse\''):
        poem_split("train", by="verse")


def test_a_corrupt_file_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "poems.txt.xz"
    path.write_bytes(lzma.compress("白日依山尽，黄河入海流。\n白日依山，黄河入海流。\n".encode()))
    with pytest.raises(ValueError, match=r"poems.txt.xz, line 2: .*'白日依山，黄河入海流。'"):
        read_poems(path)
    path.write_bytes(b"not xz")
    with pytest.raises(ValueError, match="not xz-compressed"):
        read_poems(path)


def test_vocabulary_round_trip_and_unknown_characters():
    vocab = PoemVocabulary.from_poems(["白日依山尽，", "黄河入海流。"])
    ids = vocab.encode("白日，黄河。")
    assert ids[0] == ids[-1] == vocab.boundary_id
    assert vocab.decode(ids) == "白日，黄河。"
    assert vocab.tokens == ["<pad>", "<s>", "<unk>", *sorted(set("白日依山尽，黄河入海流。"))]
    assert vocab.end_id is None and vocab.boundary_id == vocab.start_id == 1
    assert vocab.decode([1, 2, *ids[1:3], 0]) == "白日"  # <pad>, <s>, <unk> left out
    assert vocab.encode("月", boundaries=False) == [vocab.unk_id]
    assert vocab.unknown("月白风清") == ["月", "风", "清"]
    batch = vocab.batch(["白日，", "黄河入海流。"])
    assert batch.shape == (2, 8) and batch.dtype == torch.long
    assert batch[0, 5:].tolist() == [vocab.pad_id] * 3
    with pytest.raises(TypeError, match="str"):
        vocab.encode(["白"])


DATA = files("transformer_book") / "data"


def variant_table() -> dict[str, str]:
    text = (DATA / "tang_poems_variants.tsv").read_text(encoding="utf-8")
    return dict(line.split("\t") for line in text.splitlines() if not line.startswith("#"))


def test_the_variant_table_maps_a_character_outside_gb2312_to_one_in_it():
    table = variant_table()
    assert len(table) == 4506 and table["疎"] == "疏" and table["鴈"] == "雁" and table["劒"] == "剑"
    assert all(len(v) == len(f) == 1 and not in_gb2312(v) and in_gb2312(f) for v, f in table.items())
    assert "祇" not in table and "籹" not in table  # a Simplified character (OpenCC); a wrong row


def test_the_poems_hold_no_variant_the_table_maps():
    table = variant_table()
    found = Counter(c for poem in read_poems() for c in poem if c in table)
    assert not found, f"variants left in the poems: {found.most_common(10)}"


def test_the_readme_counts_after_are_the_shipped_poems():
    """The line "After" of data/README.md (written by tools/build_poems.py), counted again here."""
    characters = Counter(c for poem in read_poems() for c in poem if c not in "，。？")
    outside = {c: n for c, n in characters.items() if not in_gb2312(c)}
    basic = {c: n for c, n in outside.items() if "\u4e00" <= c <= "\u9fff"}
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    after = re.search(r"^\* After \(the shipped file\): (.*)$", readme, flags=re.MULTILINE).group(1)
    total = sum(characters.values())
    assert after.startswith(
        f"{total:,} characters of {len(characters):,} types; {len(outside):,} types "
        f"outside GB2312, {sum(outside.values()):,} characters "
        f"({100 * sum(outside.values()) / total:.2f}%); "
    )
    assert f"{len(basic):,} types, {sum(basic.values()):,} characters " in after
    top = sorted(outside.items(), key=lambda item: (-item[1], item[0]))[:10]
    assert after.endswith("Most frequent: " + ", ".join(f"{c} {n}" for c, n in top) + ".")
