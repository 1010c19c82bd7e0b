# The two commands a newcomer runs: `make test` and `make bench`.
# Both build .venv from scratch when it is missing (torch, community triton for the CPU
# interpreter, numpy, pytest, hypothesis, matplotlib, this package editable: the [cpu,test,bench]
# extras) and .ascend-triton/ for the Ascend lowering audit (triton-ascend's front end and the
# bishengir-compile it calls, from PyPI's ascendnpu-ir; x86-64 Linux, CPython 3.11). The audit
# writes under build/ascend-audit/.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ASCEND_TRITON := .ascend-triton
TRITON_ASCEND_VERSION := 3.2.0
ASCENDNPU_IR_VERSION  := 1.2.0
ASCEND_STAMP  := $(ASCEND_TRITON)/.installed-$(TRITON_ASCEND_VERSION)-$(ASCENDNPU_IR_VERSION)

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

test: $(STAMP) $(ASCEND_STAMP)
	$(PY) -m pytest -q

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
	rm -rf $(VENV) $(ASCEND_TRITON) build/ascend-audit
