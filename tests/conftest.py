"""Shared test set-up: the repository's tools/ scripts are importable as modules."""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tools"))

# One PyTorch thread per test process, as scripts/test.sh sets it, also when pytest is run by hand:
# the tensors are small and extra threads only contend with other jobs on a shared CPU.
import os  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
