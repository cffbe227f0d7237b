"""Write the rhyme table that chapter 19's checker reads (data/rhyme_finals.tsv) from pypinyin.

Every character of the shipped poems, with its Mandarin final as ``pypinyin`` gives it (``Style.FINALS``,
strict: ü written v; the most common reading, no heteronyms), one ``character<TAB>final`` line each,
sorted. The book reads the table, so that neither a chapter nor the poem page needs pypinyin.

    python tools/export_rhyme_table.py          # write it
    python tools/export_rhyme_table.py --check  # exit 1 unless the shipped table equals pypinyin's
"""

from __future__ import annotations

import argparse
import sys

from pypinyin import Style, lazy_pinyin

from notebooks import DATA_DIR
from transformer_book import FINALS_FILE, read_poems

TABLE = DATA_DIR / FINALS_FILE
MARKS = "，。？"


def table_text() -> str:
    characters = sorted(set("".join(read_poems())) - set(MARKS))
    finals = [lazy_pinyin(c, style=Style.FINALS, strict=True)[0] for c in characters]
    return "".join(f"{c}\t{f}\n" for c, f in zip(characters, finals) if f and f != c)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped table")
    args = parser.parse_args(argv)
    text = table_text()
    if args.check:
        same = TABLE.read_text(encoding="utf-8") == text
        print(f"{TABLE.name}: {'equal to' if same else 'DIFFERS from'} pypinyin's finals")
        return 0 if same else 1
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE} ({text.count(chr(10))} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
