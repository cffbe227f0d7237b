"""Shared test set-up. (The tools/ scripts, tools/notebooks.py among them, are importable as modules:
pytest's ``pythonpath`` setting in pyproject.toml puts tools/ on the path.)"""

# One PyTorch thread per test process, as scripts/test.sh sets it, also when pytest is run by hand:
# the tensors are small and extra threads only contend with other jobs on a shared CPU.
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest


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
