#!/usr/bin/env bash
# Install what the browser test needs; safe to run again (does nothing new the second time).
#   - Debian's Chromium at /usr/bin/chromium (apt-get, only if it is missing);
#   - JupyterLab, Voila and Playwright into the project venv, with aklab's constraints.
# Never `playwright install`: Playwright drives /usr/bin/chromium (see test_browser.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"

if [ ! -x /usr/bin/chromium ]; then
    echo "== installing Debian's chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version 2>/dev/null || true

if [ ! -x "$VENV/bin/python" ]; then
    echo "no $VENV: run 'make demo' (or the Makefile's install step) first" >&2
    exit 1
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c constraints.txt -r browser/requirements.txt
