"""tools/build_poems.py: its msgpack reader, the normalisation, and --check against the shipped
corpus (where the t2s source is beside the repository: ../shared/data/tang-poems/)."""

import lzma
import shutil

import pytest

import build_poems as tool


def packed(text: str) -> bytes:
    raw = text.encode("utf-8")
    return bytes([0xA0 | len(raw)]) + raw if len(raw) < 32 else bytes([0xD9, len(raw)]) + raw


def test_read_msgpack_reads_a_map_of_string_arrays():
    small = (
        bytes([0x82])
        + packed("疎")
        + bytes([0x91])
        + packed("疏")
        + packed("乾")
        + bytes([0x92])
        + packed("干")
        + packed("乾")
    )
    assert tool.read_msgpack(small) == {"疎": ["疏"], "乾": ["干", "乾"]}
    wide = bytes([0xDE, 0x00, 0x01]) + packed("x" * 40) + bytes([0xDC, 0x00, 0x01, 0xC0])
    assert tool.read_msgpack(wide) == {"x" * 40: [None]}
    with pytest.raises(ValueError, match="bytes after the value"):
        tool.read_msgpack(packed("a") + b"\x00")
    with pytest.raises(ValueError, match="type 0xca"):
        tool.read_msgpack(b"\xca\x00\x00\x00\x00")


def test_normalise_replaces_the_table_characters_only():
    table = {"疎": "疏", "鴈": "雁"}
    assert tool.normalise("春深坐又疎，旅鴈春风迥。", table) == "春深坐又疏，旅雁春风迥。"
    assert tool.in_gb2312("疏") and not tool.in_gb2312("疎")
    found = tool.counts("疎疏，鴈。\n")
    assert found["characters"] == 3 and found["types"] == 3 and dict(found["outside"]) == {"疎": 1, "鴈": 1}


@pytest.mark.skipif(not tool.SOURCE.exists(), reason="the t2s source is not on this machine")
def test_check_passes_on_the_shipped_files_and_fails_when_one_changed(tmp_path, monkeypatch):
    assert tool.main(["--check"]) == 0
    corpus = tmp_path / tool.CORPUS.name
    text = lzma.decompress(tool.CORPUS.read_bytes()).decode("utf-8")
    corpus.write_bytes(lzma.compress(text.replace("疏", "疎", 1).encode("utf-8")))
    shipped = tool.CORPUS
    monkeypatch.setattr(tool, "CORPUS", corpus)
    assert tool.main(["--check"]) == 1
    monkeypatch.setattr(tool, "CORPUS", shipped)
    readme = tmp_path / tool.README.name
    shutil.copy(tool.README, readme)
    monkeypatch.setattr(tool, "README", readme)
    readme.write_text(readme.read_text(encoding="utf-8").replace("1,102 types", "941 types"), encoding="utf-8")
    assert tool.main(["--check"]) == 1
