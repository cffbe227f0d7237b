#!/usr/bin/env bash
# Set up and run every test: unit tests of the package, notebook/package agreement, conventions,
# nbval on every chapter, the book build, and the headless-browser test of the built pages.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

# One PyTorch thread per process (notebook kernels inherit it): the book's tensors are small, and
# when other jobs share the CPU, more threads than free cores make every step wait (MAINTAINING.md: Under load).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}

# The browser test drives Debian's Chromium (Playwright's own browser download is not used).
if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "Chromium is needed for tests/test_browser.py: install Debian's 'chromium' package or set CHROMIUM" >&2
    exit 1
  fi
fi

# nbval runs each chapter once, on a simulated GPU (CUDA, or MPS where the chapter uses float64) and
# with an AMD EPYC's kernels (AVX2), so the stored outputs, made on the author's CPU, are compared
# with another CPU's numerics (tests/simulated_nbval.py; BOOK_NBVAL_KERNELS=default takes PyTorch's
# portable kernels, BOOK_NBVAL_KERNELS= runs nbval as a reader would).
export BOOK_NBVAL_KERNELS=${BOOK_NBVAL_KERNELS-avx2}

.venv/bin/jupyter-book build . --warningiserror --nitpick --keep-going --quiet
# Two pytest workers (pytest-xdist), one per core; --dist loadfile keeps each file, so each
# notebook's cells and each module's fixtures, on one worker. PYTEST_WORKERS=0 runs in one process.
.venv/bin/python -m pytest tests book -n "${PYTEST_WORKERS:-2}" --dist loadfile \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg "$@"
