# The two commands a newcomer runs: `make test` and `make bench`.
# Both build .venv from scratch when it is missing (torch, community triton for the CPU
# interpreter, numpy, pytest, pytest-xdist, hypothesis, matplotlib, this package editable: the [cpu,test,bench]
# extras) and .ascend-triton/ for the Ascend lowering audit (triton-ascend's front end and the
# bishengir-compile it calls, from PyPI's ascendnpu-ir; x86-64 Linux, CPython 3.11). The audit
# writes under build/ascend-audit/. `make test` also fills .ascend-numpy/ (numpy < 2 for
# triton-ascend's interpreter, which runs the Ascend kernels in tests/triton_ascend/).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ASCEND_TRITON := .ascend-triton
TRITON_ASCEND_VERSION := 3.2.0
ASCENDNPU_IR_VERSION  := 1.2.0
ASCEND_STAMP  := $(ASCEND_TRITON)/.installed-$(TRITON_ASCEND_VERSION)-$(ASCENDNPU_IR_VERSION)
ASCEND_NUMPY  := .ascend-numpy
ASCEND_NUMPY_VERSION := 1.26.4
ASCEND_NUMPY_STAMP   := $(ASCEND_NUMPY)/.installed-$(ASCEND_NUMPY_VERSION)

.PHONY: test bench audit install-check venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[cpu,test,bench]'
	touch $@

# triton-ascend and community Triton both install the package `triton`, so the
# Ascend front end lives in a side folder that only the audit puts on PYTHONPATH;
# ascendnpu-ir brings ascendnpuir/bin/bishengir-compile into the same folder.
$(ASCEND_STAMP): | $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --target $(ASCEND_TRITON) triton-ascend==$(TRITON_ASCEND_VERSION) ascendnpu-ir==$(ASCENDNPU_IR_VERSION) pybind11
	touch $@

# triton-ascend 3.2.0's interpreter calls int() on one-element arrays, which numpy 2 refuses, and
# .venv keeps numpy 2: numpy 1.26.4 goes into its own side folder, which only the child process of
# tests/test_triton_ascend_interpreter.py puts on PYTHONPATH (before .ascend-triton/).
$(ASCEND_NUMPY_STAMP): | $(STAMP)
	rm -rf $(ASCEND_NUMPY)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --target $(ASCEND_NUMPY) numpy==$(ASCEND_NUMPY_VERSION)
	touch $@

# ASCEND_KVC_REQUIRE_TRITON_ASCEND: a missing side folder fails the triton-ascend interpreter
# test instead of skipping it.
test: $(STAMP) $(ASCEND_STAMP) $(ASCEND_NUMPY_STAMP)
	ASCEND_KVC_REQUIRE_TRITON_ASCEND=1 $(PY) -m pytest -q -n auto

# Report folder bench/results/<device>-<date>/ (report.md, CSV, JSON, figures); BENCH_ARGS adds flags.
bench: $(STAMP)
	$(PY) -m bench --report $(BENCH_ARGS)

audit: $(STAMP) $(ASCEND_STAMP)
	$(PY) -m tools.ascend_lowering

# Packaging only (also part of `make test`): the wheel's contents and what each platform extra
# resolves to on Linux x86-64 and aarch64 (pip dry runs against the package index).
install-check: $(STAMP)
	$(PY) -m pytest -q tests/test_install.py

clean:
	rm -rf $(VENV) $(ASCEND_TRITON) $(ASCEND_NUMPY) build/ascend-audit
