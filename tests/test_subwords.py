"""Tests for transformer_book.subwords (chapter 13): byte-pair encoding, vocabularies."""

from collections import Counter

import pytest
import torch

from transformer_book import (
    BYTE_SYMBOLS,
    BytePairEncoding,
    SubwordVocabulary,
    byte_symbols,
    chinese_vocabulary,
    count_pairs,
    english_vocabulary,
    learn_bpe,
    merge_pair,
    pre_tokenize,
    pre_tokenize_bytes,
    read_merges,
    tatoeba_split,
    text_from_bytes,
    word_symbols,
)

TOY = ["low low low low low", "lower lower", "newest newest newest newest newest newest", "widest widest widest"]


def test_pre_tokenize_and_word_symbols():
    assert pre_tokenize("Tom's here, isn't he?") == ["Tom", "'", "s", "here", ",", "isn", "'", "t", "he", "?"]
    assert pre_tokenize("  ") == []
    assert pre_tokenize("Wait...!") == ["Wait", "...!"]
    assert word_symbols("cat") == ("c", "a", "t</w>")
    assert word_symbols("a") == ("a</w>",)


def test_count_and_merge_pairs():
    words = Counter({("l", "o", "w</w>"): 5, ("l", "o", "w", "e", "r</w>"): 2})
    pairs = count_pairs(words)
    assert pairs[("l", "o")] == 7 and pairs[("o", "w</w>")] == 5 and pairs[("w", "e")] == 2
    assert merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")  # left to right, no overlap
    assert merge_pair(("a", "b", "a", "b</w>"), ("a", "b")) == ("ab", "a", "b</w>")
    assert merge_pair(("x",), ("x", "y")) == ("x",)


def test_learn_bpe_on_the_classic_toy_corpus():
    merges = learn_bpe(TOY, 10)
    # Sennrich et al.'s example: "es", "est", "est</w>" come first (counts 9, 9, 9)
    assert merges[:3] == [("e", "s"), ("es", "t</w>"), ("l", "o")]
    assert len(merges) == 10
    assert learn_bpe(TOY, 0) == []
    assert len(learn_bpe(["ab"], 50)) == 1  # stops when no pair is left
    with pytest.raises(ValueError, match="num_merges must be >= 0; got -1"):
        learn_bpe(TOY, -1)


def test_rank_order_equals_applying_every_merge_in_order():
    merges = read_merges()
    bpe = BytePairEncoding(merges)
    words = sorted({w for english, _ in tatoeba_split("dev") for w in pre_tokenize(english)})
    for word in words:
        symbols = word_symbols(word)
        for pair in merges:
            symbols = merge_pair(symbols, pair)
        assert bpe.encode_word(word) == symbols, word


def test_shipped_merges_are_learn_bpe_of_the_training_english():
    merges = read_merges()
    assert len(merges) == 2000
    english = [sentence for sentence, _ in tatoeba_split("train")]
    assert learn_bpe(english, 40) == merges[:40]  # all 2,000: tools/train_translator.py --check


def test_read_merges_refuses_a_bad_line(tmp_path):
    path = tmp_path / "merges.txt"
    path.write_text("t h\nth e</w>\nbad\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt, line 3: expected two symbols.*'bad'"):
        read_merges(path)


def test_subword_vocabulary_ids_unknowns_and_decoding():
    vocab = SubwordVocabulary(["你", "好"])
    assert (vocab.pad_id, vocab.start_id, vocab.end_id, vocab.unk_id) == (0, 1, 2, 3)
    assert vocab.tokens[:4] == ["<pad>", "<s>", "</s>", "<unk>"] and len(vocab) == 6
    assert vocab.encode("你好吗") == [4, 5, 3]
    assert vocab.decode([1, 4, 0, 5, 2, 4]) == ["你", "好"]  # a list of tokens
    assert vocab.decode(torch.tensor([1, 3, 5, 2])) == ["<unk>", "好"]
    with pytest.raises(ValueError, match=r"SubwordVocabulary tokens .* special: \['<unk>'\]"):
        SubwordVocabulary(["<unk>"])


def test_english_and_chinese_vocabularies():
    english = english_vocabulary(["low lower"], [("l", "o"), ("lo", "w</w>")])
    assert english.tokens[4:] == ["e", "l", "o", "r</w>", "w", "w</w>", "lo", "low</w>"]
    # two merges that spell the same token give one id
    same = english_vocabulary(["abc"], [("a", "b"), ("ab", "c</w>")])
    assert len(same.tokens) == len(set(same.tokens))
    chinese = chinese_vocabulary(["好好", "你好"])
    assert chinese.tokens[4:] == ["好", "你"]  # most frequent first


def test_unknown_characters_become_unk_tokens():
    bpe = BytePairEncoding(read_merges())
    vocab = english_vocabulary([english for english, _ in tatoeba_split("train")], read_merges())
    tokens = bpe.tokenize("I like 😀 and 你好.")
    ids = vocab.encode(tokens)
    # one "<unk>" per unknown symbol: the emoji, then 你 and 好 (a two-character word)
    assert ids.count(vocab.unk_id) == 3
    assert tokens[2:5] == ["😀</w>", "and</w>", "你"]
    assert tokens[0] == "I</w>"


def test_byte_level_bpe_spells_any_text_and_gives_it_back():
    assert len(set(BYTE_SYMBOLS)) == 256
    assert (BYTE_SYMBOLS[ord(" ")], BYTE_SYMBOLS[ord("a")], BYTE_SYMBOLS[0xA9]) == ("Ġ", "a", "©")
    # a word keeps the space before it; a second space is a word of its own
    assert pre_tokenize_bytes("Tom's  here.") == ["Tom", "'", "s", " ", " here", "."]
    assert byte_symbols(" ☕") == ("Ġ", "â", "ĺ", "ķ")  # the space, then U+2615's three bytes
    as_bytes = {"split": pre_tokenize_bytes, "spell": byte_symbols}
    merges = learn_bpe(TOY, 10, **as_bytes)
    assert merges[:2] == [("e", "s"), ("es", "t")]  # the same counts as with characters
    assert merges != learn_bpe(TOY, 10)  # no </w>: the space marks words instead
    bpe = BytePairEncoding(merges, **as_bytes)
    assert bpe.tokenize(" newest widest") == ["Ġnewest", "Ġ", "wi", "d", "est"]
    for text in ["lowest newer", "Tom's café ☕.", "他说：「你好」", "  a\tb \n", ""]:
        assert text_from_bytes(bpe.tokenize(text)) == text


def test_text_from_bytes_refuses_other_symbols_and_marks_broken_utf8():
    assert text_from_bytes(["â", "ĺ"]) == "\ufffd"  # two of ☕'s three bytes
    with pytest.raises(ValueError, match=r"token 'Ġ☕' holds '☕', which is not one of the 256"):
        text_from_bytes(["Ġthe", "Ġ☕"])  # a character, not its bytes
