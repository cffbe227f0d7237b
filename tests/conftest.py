"""Shared test set-up: the repository's tools/ scripts are importable as modules."""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tools"))

# One PyTorch thread per test process, as scripts/test.sh sets it, also when pytest is run by hand:
# the tensors are small and extra threads only contend with other jobs on a shared CPU.
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's binary, driven by Playwright), for the browser tests."""
    from playwright.sync_api import sync_playwright

    from browser_support import CHROMIUM_FLAGS, chromium_path

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS
        )
        yield instance
        instance.close()
