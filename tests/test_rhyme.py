"""The rhyme checker (chapter 19): its shipped table is pypinyin's, its classes partition the finals,
and it reads known poems as a reader would; the rates of the shipped poet and of real poems."""

from __future__ import annotations

import pytest

import export_rhyme_table
from transformer_book import (
    CLASS_OF_FINAL,
    RHYME_CLASSES,
    poem_split,
    poet_history,
    repeats_rhyme,
    rhyme_characters,
    rhyme_class,
    rhyme_finals,
    rhyme_report,
    rhymes,
)

pytest.importorskip("pypinyin")


def test_the_shipped_table_is_pypinyin_s():
    assert export_rhyme_table.main(["--check"]) == 0


def test_thirteen_classes_partition_every_final_of_the_table():
    assert len(RHYME_CLASSES) == 13
    finals = [f for group in RHYME_CLASSES.values() for f in group]
    assert len(finals) == len(set(finals)) == len(CLASS_OF_FINAL)
    # every final of the poems' characters has a class, but the syllabic ng/m/n of a few interjections
    assert set(rhyme_finals().values()) - set(CLASS_OF_FINAL) <= {"ng", "m", "n"}


def test_known_poems():
    quiet_night = "床前明月光，疑是地上霜。举头望明月，低头思故乡。"
    assert rhyme_characters(quiet_night) == ["霜", "乡"]
    assert rhyme_class("霜") == rhyme_class("乡") == "江阳"
    assert rhymes(quiet_night) and not repeats_rhyme(quiet_night)
    # 春晓: 晓 (iao), 鸟 (iao), 少 (ao): one class, 遥条
    assert rhymes("春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。")
    assert not rhymes("床前明月光，疑是地上霜。举头望明月，低头思故月。")
    assert repeats_rhyme("白日依山尽，黄河入海流。欲穷千里目，更上一层流。")
    assert not rhymes("一句。")  # one verse: no even verse pair


def test_rates_of_the_shipped_poet_and_of_real_poems():
    # the poet's 200 seeded poems (T 0.8, top-p 0.9) rhyme far less often and repeat a rhyme
    # character far more often than the held-out real poems (chapter 19's figures)
    poet = rhyme_report(poet_history()["samples"])
    real = rhyme_report(poem_split("held-out"))
    assert poet["poems"] == 200 and real["poems"] == 1000
    assert poet["rhyme"] < real["rhyme"] - 0.2
    assert poet["repeated"] > 10 * real["repeated"]


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="one character"):
        rhyme_class("月光")
    with pytest.raises(TypeError, match="poem must be a str"):
        rhyme_characters(3)
    with pytest.raises(ValueError, match="poems is empty"):
        rhyme_report([])
