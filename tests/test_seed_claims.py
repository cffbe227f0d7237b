"""What a chapter's prose says about other seeds is measured again here, with those seeds.

``tools/run_chapters_plain.py --seed N`` runs a chapter with its ``seed = 0`` cell set to N.
"""

import re

from notebooks import BOOK, run_plain, sources


def markdown(chapter: str) -> str:
    return "\n".join(sources(BOOK / chapter, "markdown"))


def test_chapter_4s_range_over_five_other_seeds_is_measured():
    chapter = "04_add_and_norm.ipynb"
    claimed = re.search(
        r"layer 12's gradient was (\d\.\d\d) to (\d\.\d\d) times layer 1's", " ".join(markdown(chapter).split())
    )
    assert claimed, "the prose no longer states the range over other seeds"
    ratios = []
    for seed in range(1, 6):
        report = run_plain(BOOK / chapter, [], seed=seed)
        assert not report["errors"], report["errors"]  # the cell's own asserts held
        printed = "".join(report["outputs"].values())
        ratios.append(re.search(r"post-norm: layer 12 / layer 1 = (\d\.\d\d)", printed).group(1))
    assert (min(ratios), max(ratios)) == claimed.groups()
