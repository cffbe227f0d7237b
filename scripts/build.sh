#!/usr/bin/env bash
# Set up (scripts/setup.sh) and build the HTML book into _build/html, warnings as errors.
# The chapters' stored outputs are rendered as they are: nothing is re-executed at build time, so the
# set-up leaves torch out (`setup.sh --book`); scripts/test.sh installs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --book
.venv/bin/jupyter-book build . --warningiserror --nitpick --keep-going
echo "Book built: open _build/html/index.html, or serve it with"
echo "  .venv/bin/python -m http.server --bind 127.0.0.1 --directory _build/html 8000"
