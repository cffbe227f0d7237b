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

# The book is built beside the tests, not before them: the build writes its exit status to
# BOOK_BUILD_STATUS when it ends, and the tests that open the built pages wait for it (tests/conftest.py).
build_log=$(mktemp)
BOOK_BUILD_STATUS=$(mktemp -u)
export BOOK_BUILD_STATUS
(
  set +e
  .venv/bin/jupyter-book build . --warningiserror --nitpick --keep-going --quiet >"$build_log" 2>&1
  echo $? >"$BOOK_BUILD_STATUS.part" && mv "$BOOK_BUILD_STATUS.part" "$BOOK_BUILD_STATUS"
) &
build=$!
# Two pytest workers (pytest-xdist), one per core; --dist loadfile keeps each file, so each
# notebook's cells and each module's fixtures, on one worker. PYTEST_WORKERS=0 runs in one process.
# The chapters come first: the page tests, later, then rarely wait for the build.
tests=0
.venv/bin/python -m pytest book tests -n "${PYTEST_WORKERS:-2}" --dist loadfile \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg "$@" || tests=$?
wait "$build" || true
built=$(cat "$BOOK_BUILD_STATUS" 2>/dev/null || echo "did not end")
if [ "$built" != 0 ]; then
  echo "The book build (exit status $built):" >&2
  cat "$build_log" >&2
fi
rm -f "$build_log" "$BOOK_BUILD_STATUS"
[ "$built" = 0 ] || exit 1
exit "$tests"
