# aklab: `make demo` runs the main job offline; `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.aklab-installed

.PHONY: demo test lint typecheck unit notebooks test-binder test-browser bench clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "aklab needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name 'Python 3 (aklab)' >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m aklab demo

test: lint typecheck unit notebooks

lint: $(STAMP)
	$(VENV)/bin/ruff check aklab tests browser $(wildcard bench)
	$(VENV)/bin/ruff format --check aklab tests browser $(wildcard bench)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest -q tests

notebooks: $(STAMP)
	$(PY) -m pytest -q --nbval --nbval-sanitize-with notebooks/sanitize.cfg --nbval-kernel-name python3 notebooks

# A fresh environment built from binder/ alone runs every notebook (slow: a venv + install).
test-binder: $(STAMP)
	$(PY) -m pytest -q -m binder tests/binder

# JupyterLab and Voila in headless Chromium (Debian's); screenshots in browser/screenshots/.
test-browser: $(STAMP)
	VENV=$(VENV) bash browser/install.sh
	$(PY) -m pytest -c browser/pytest.ini browser

# Benchmarks (not timed tests): writes bench/results/report.json and report.md.
bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
