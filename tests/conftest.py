"""Shared test set-up. (The tools/ scripts, tools/notebooks.py among them, are importable as modules:
pytest's ``pythonpath`` setting in pyproject.toml puts tools/ on the path.)"""

# One PyTorch thread per test process, as scripts/test.sh sets it, also when pytest is run by hand:
# the tensors are small and extra threads only contend with other jobs on a shared CPU.
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import time
from pathlib import Path

import pytest

# scripts/test.sh builds the book beside the tests, not before them: it names a file that the build
# writes its exit status to when it ends. Tests that open the built book wait for it.
BUILD_STATUS = os.environ.get("BOOK_BUILD_STATUS")
BUILD_WAIT_SECONDS = 1200
BUILT_BOOK_NAMES = ("SITE", "page_url")  # a test module naming one of these opens the built book


def wait_for_the_book(status: Path, timeout: float = BUILD_WAIT_SECONDS) -> None:
    """Return once the build beside the tests has ended well; fail the test if it failed or
    did not end within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the book build did not end within {timeout:.0f} s (no {status})")
        time.sleep(0.5)
    code = status.read_text(encoding="utf-8").strip()
    if code != "0":
        pytest.fail(f"the book build failed (exit status {code}): scripts/test.sh prints its log at the end")


def pytest_runtest_setup(item):
    if BUILD_STATUS and any(name in vars(item.module) for name in BUILT_BOOK_NAMES):
        wait_for_the_book(Path(BUILD_STATUS))


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (Debian's binary, driven by Playwright), for the browser tests:
    one per test process (each test opens its own context), not one per file (starting
    Chromium costs about 1.3 s of CPU)."""
    from playwright.sync_api import sync_playwright

    from browser_support import CHROMIUM_FLAGS, chromium_path

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield instance
        instance.close()


def pytest_configure(config):
    """With BOOK_NBVAL_KERNELS set (scripts/test.sh), nbval runs each chapter on a simulated
    device with another CPU's kernels (tests/simulated_nbval.py)."""
    from simulated_nbval import register

    register(config)
