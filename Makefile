# Two commands do everything on a fresh machine:
#   make        install bertgraph and what its tests use, then render the example gallery into outputs/
#   make test   run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all system python node gallery test test-full bench mutate reach

all: system python node gallery

# Graphviz's dot for diagrams, Chromium for the browser tests, the fonts diagrams are laid out with, and
# pdflatex from a basic TeX Live (latex-base, latex-recommended, pictures: no more is needed) with
# poppler's pdftotext for the TikZ tests.
TEX_PACKAGES := texlive-latex-base texlive-latex-recommended texlive-pictures poppler-utils
system:
	@if ! command -v dot >/dev/null || ! command -v chromium >/dev/null || ! fc-list | grep -q "Liberation Sans"; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq graphviz chromium fonts-liberation fonts-dejavu-core; \
	fi
	@if ! command -v pdflatex >/dev/null || ! kpsewhich tikz.sty >/dev/null || ! command -v pdftotext >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES); \
	fi

python: $(BIN)/bertgraph
$(BIN)/bertgraph: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	@touch $@

# mermaid.js and mxGraph (the library draw.io reads its files with), pinned, for the browser tests.
node: tests/mermaid/node_modules/mermaid/package.json tests/drawio/node_modules/mxgraph/package.json
tests/mermaid/node_modules/mermaid/package.json: tests/mermaid/package-lock.json
	npm ci --prefix tests/mermaid --no-audit --no-fund --loglevel=error
	@touch $@
tests/drawio/node_modules/mxgraph/package.json: tests/drawio/package-lock.json
	npm ci --prefix tests/drawio --no-audit --no-fund --loglevel=error
	@touch $@

gallery: python
	$(BIN)/bertgraph gallery -o outputs

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, as container
# images set it): the suite starts Python a few hundred times (the command line, Sphinx, MkDocs), and
# each would compile bertgraph again, and each worker rewrite the tests' assertions again.
test: python
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 --dist loadgroup -q

# The test suite with every family × head ONNX export (the default exports each head of each
# structure and each family at least once).
test-full: python
	PYTHONDONTWRITEBYTECODE= BERTGRAPH_FULL_MATRIX=1 $(BIN)/python -m pytest -n 2 --dist loadgroup -q

# Every text model type of the pinned transformers through the generic record (built, traced, total exact,
# drawn acyclic): benchmarks/reach.csv and reach.md. Each type in a process of its own; it takes a while.
reach: python
	PYTHONPATH=. $(BIN)/python benchmarks/reach.py

# Side-by-side measurements against torchview, torchinfo and bare torch.export (not part of the tests).
bench: python
	$(BIN)/pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/run.py

# Mutation testing of the graph, cache, escaping and ONNX verification code (not part of make or
# make test; configured in pyproject.toml [tool.mutmut]; docs/mutation.md lists what survives and why).
# Every mutant is checked again from scratch; the last lines count mutants per module and verdict.
mutate: python
	$(BIN)/pip install -q -c constraints.txt mutmut
	rm -rf mutants
	nice -n 19 $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results --all true | awk -F': ' '{ name = $$1; sub(/^ +/, "", name); sub(/\.x[_ǁ].*/, "", name); \
		count[name " " $$2]++ } END { for (key in count) print key ": " count[key] }' | sort
