"""The data files the package ships (src/transformer_book/data): each is the documented one, by its
SHA-256, and data/README.md credits its source, its licence and that hash."""

import hashlib
import lzma
from importlib.resources import files

import pytest

DATA = files("transformer_book") / "data"
SHIPPED = {  # file: (SHA-256 of the decompressed text, what the README must credit)
    "tang_poems.txt.xz": (
        "0da0e5f1677fe0675eb64b7ccd062f57c62e69f9f1039f88361f1e13d6a7151d",
        (
            "chinese-poetry",
            "JackeyGao",
            "MIT",
            "tang_poems_LICENSE.txt",
            "OpenCC",
            "tang_poems_variants.tsv",
            "char-converter 0.51",
            "creativecommons.org/licenses/by-sa/4.0",
        ),
    ),
    "tatoeba_cmn.tsv.xz": (
        "56541140bd3d99109f7dbba6c4407564223af5e31842865ceaae434ad7a264df",
        ("Tatoeba", "ManyThings.org", "creativecommons.org/licenses/by/2.0/fr", "Simplified"),
    ),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_file_is_the_documented_one_with_its_credits(name):
    sha256, credits = SHIPPED[name]
    raw = lzma.decompress((DATA / name).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == sha256
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for credit in (*credits, sha256):
        assert credit in readme, (name, credit)


def test_the_poems_licence_is_shipped_beside_them():
    licence = (DATA / "tang_poems_LICENSE.txt").read_text(encoding="utf-8")
    assert "Copyright (c) 2016 JackeyGao" in licence and "MIT License" in licence
