"""scripts/test.sh builds the book beside the tests: the tests that open the built pages wait for the
build's exit status (tests/conftest.py), and fail, naming it, when the build failed or never ended."""

import re
from pathlib import Path

import pytest

from conftest import BUILT_BOOK_NAMES, wait_for_the_book

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_a_finished_build_lets_the_page_tests_run(tmp_path):
    status = tmp_path / "status"
    status.write_text("0\n", encoding="utf-8")
    wait_for_the_book(status, timeout=0)


def test_a_failed_build_fails_the_page_tests_with_its_status(tmp_path):
    status = tmp_path / "status"
    status.write_text("2\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match="the book build failed \\(exit status 2\\)"):
        wait_for_the_book(status, timeout=0)


def test_a_build_that_never_ends_fails_the_page_tests(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="did not end within 0 s"):
        wait_for_the_book(tmp_path / "never written", timeout=0)


def test_every_module_that_opens_the_built_book_waits_for_it():
    # what the wait looks for (conftest.BUILT_BOOK_NAMES) is how every page test reaches the book
    opens_the_book = re.compile(r"""["']_build["']|\bserve\(""")  # the built folder, or serving it
    for path in sorted((REPO_ROOT / "tests").glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "test_test_command.py" and opens_the_book.search(text):
            assert any(re.search(rf"\b{name}\b", text) for name in BUILT_BOOK_NAMES), path.name


def test_the_test_command_builds_beside_the_tests_and_fails_when_the_build_fails():
    script = (REPO_ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "export BOOK_BUILD_STATUS" in script
    assert script.index("jupyter-book build") < script.index("-m pytest")  # started first, in the background
    assert '[ "$built" = 0 ] || exit 1' in script
