#!/usr/bin/env bash
# Create the virtual environment .venv (once) and install the pinned requirements and the companion
# package into it. Run by build.sh and test.sh; safe to run again (pip skips what is installed).
#
#   bash scripts/setup.sh          # everything in requirements.txt (what test.sh needs)
#   bash scripts/setup.sh --book   # all but torch: building the book renders the stored outputs and
#                                  # runs no chapter, so build.sh does not download torch
#
# The interpreter is $PYTHON (default python3). It is checked first: the lock installs on the
# versions below only (README.md and pyproject.toml say the same; tests/test_setup.py checks it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SUPPORTED="3.11 3.12 3.13"
MINIMUM="3.11.5"  # the lock's soupsieve needs 3.11.5 (Debian 12's python3 is 3.11.2)
SUPPORTED_TEXT="Python 3.11 (3.11.5 or newer), 3.12, 3.13"
HOW_TO_PICK="pick one with e.g. PYTHON=python3.12 bash scripts/build.sh (or scripts/test.sh)"

fail() {
  echo "setup.sh: $*" >&2
  exit 1
}

version_of() {  # "3.12.1" for a working interpreter, nothing otherwise
  "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true
}

supported() {  # is version $1 one of SUPPORTED, and at least MINIMUM?
  case " $SUPPORTED " in
    *" ${1%.*} "*) [ "$(printf '%s\n' "$MINIMUM" "$1" | sort -V | head -n 1)" = "$MINIMUM" ] ;;
    *) return 1 ;;
  esac
}

if [ -x .venv/bin/python ]; then
  version=$(version_of .venv/bin/python)
  if [ -n "${PYTHON:-}" ] && [ "$(version_of "$PYTHON")" != "$version" ]; then
    fail ".venv was made with Python ${version:-unknown}, not with $PYTHON: delete it (rm -rf .venv) and run again"
  fi
  supported "$version" || fail ".venv has Python ${version:-unknown}; supported: $SUPPORTED_TEXT: delete .venv and $HOW_TO_PICK"
else
  python=${PYTHON:-python3}
  command -v "$python" >/dev/null 2>&1 || fail "no '$python' found; supported: $SUPPORTED_TEXT: $HOW_TO_PICK"
  version=$(version_of "$python")
  if [ -z "$version" ]; then
    why=$("$python" -c pass 2>&1 | head -n 1 || true)
    fail "'$python' does not run (${why:-no output}); supported: $SUPPORTED_TEXT: $HOW_TO_PICK"
  fi
  supported "$version" || fail "$python is Python ${version:-unknown}; supported: $SUPPORTED_TEXT: $HOW_TO_PICK"
  if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    fail "$python (Python $version) has no venv module: on Debian/Ubuntu, sudo apt-get install python3-venv (or python${version%.*}-venv), then run again"
  fi
  "$python" -m venv .venv >/dev/null || { rm -rf .venv; fail "could not create .venv with $python"; }
fi

pip_install() {
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@"
}

if [ "${1:-}" = "--book" ]; then
  requirements=$(mktemp)
  trap 'rm -f "$requirements"' EXIT
  grep -v '^torch==' requirements.txt >"$requirements"
  pip_install -r "$requirements"
else
  pip_install -r requirements.txt
fi
pip_install --no-deps --editable .
