# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the CPU wheel here.
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed
# What `make venv` does not byte-compile (a regular expression on paths; see the venv's recipe).
HF_MODELS := auto|bart|bert|clip|distilbert|falcon|gpt2|gpt_neox|llama|mistral|opt|phi|qwen2|roberta|swin|t5|whisper
NOT_COMPILED := /site-packages/ray/|/transformers/models/(?!($(HF_MODELS))/|__init__\.py)

.PHONY: demo test venv browser clean benchmark scaling overhead envs-compare

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile "$(TORCH_PIN)"
	$(BIN)/pip install -q --no-compile -e ".[test]"
	# Byte-compiled on every CPU at once (pip compiles one file after another: ~60 s of the ~120 s
	# set-up on 2 cores). The tests run with PYTHONDONTWRITEBYTECODE, so a module left uncompiled would
	# be compiled again in every process that imports it. A file no Python here can compile (a
	# package's test data) is left as pip leaves it.
	# Ray (the suite runs none of it by default) and the transformers models no test or case builds are
	# left out: half the bytes, a quarter of the compiling; a module left out still imports, uncompiled.
	$(BIN)/python -m compileall -q -j 0 -x '$(NOT_COMPILED)' $$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") >/dev/null 2>&1 || true
	# The start-up hook (inert unless BISECT_ACCURACY_LEVEL is set): BISECT_ACCURACY_LEVEL=4 python train.py
	$(BIN)/bisect-accuracy install-hook
	touch $(STAMP)

# Headless Chromium for the browser tests (report.html, the notebook view): a step of its own, so
# `make venv` and `make demo` change nothing outside the venv. `make test` runs it; it installs the
# Debian package only as root and never fails: without Chromium those tests skip, saying so.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -q chromium >/dev/null 2>&1 || echo "browser: chromium not installed: the browser tests will skip"; \
	else echo "browser: no chromium (installing it needs root and apt-get): the browser tests will skip"; fi

# Runs the tool on a bundled planted bug. The tool exits 1 when it finds the bug, which is what the
# demo intends, so the demo checks for exactly that and exits 0.
demo: $(STAMP)
	@rm -rf out/demo
	@$(BIN)/python -m compileall -q bisect_engine >/dev/null
	@$(BIN)/bisect-accuracy run repro_cases/relu_bug.py --out out/demo; status=$$?; \
	if [ $$status -eq 1 ]; then echo "demo: the planted bug was found (tool exit 1, as intended)"; \
	else echo "demo: expected exit 1 from the tool, got $$status"; exit 1; fi

# The package byte-compiled first, as a wheel install would be: the editable install leaves it as
# source, and with PYTHONDONTWRITEBYTECODE set (as here) every process of the suite (the tool, its
# children, the scripts it runs) compiled the modules it imports again: ~0.5 CPU-s a tool run.
# Only changed files are compiled again; __pycache__ is ignored by git.
test: $(STAMP) browser
	@$(BIN)/python -m compileall -q bisect_engine >/dev/null
	$(BIN)/python -m pytest -q -p no:cacheprovider

benchmark: $(STAMP)
	$(BIN)/python benchmarks/compare_minifier.py

scaling: $(STAMP)
	$(BIN)/python benchmarks/scaling.py --builtin --builtin-cap 1200

overhead: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

# Record under torch 2.13.0, compare under 2.14.1 (a second venv, ~5.5 GB; not part of make test).
envs-compare: $(STAMP)
	benchmarks/envs_compare.sh

clean:
	rm -rf $(VENV) out *.egg-info
