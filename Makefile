# The two commands a newcomer runs: `make test` and `make bench`. What they build depends on the
# kind of host, HOST_KIND (detected below; `make HOST_KIND=cpu ...` or `HOST_KIND=npu` overrides):
#
# cpu (no NPU; CI): .venv from the [cpu,test,bench] extras (torch, community triton for the CPU
#   interpreter, numpy, pytest, pytest-xdist, hypothesis, matplotlib, this package editable), and
#   .ascend-triton/ for the Ascend lowering audit (triton-ascend's front end and the
#   bishengir-compile it calls, from PyPI's ascendnpu-ir; x86-64 Linux, CPython 3.11). The audit
#   writes under build/ascend-audit/. `make test` also fills .ascend-numpy/ (numpy < 2 for
#   triton-ascend's interpreter, which runs the Ascend kernels in tests/triton_ascend/).
# npu (an Ascend host: CANN's set_env.sh sourced, so ASCEND_HOME_PATH is set, or torch_npu
#   importable by $(PYTHON)): .venv-npu, a folder of its own so that neither environment is ever
#   installed over the other, from torch $(NPU_TORCH_VERSION)'s CPU build (the PyTorch CPU wheel
#   index; PyPI's Linux torch depends on community Triton) and then the [npu,test,bench] extras
#   (torch-npu, triton-ascend, pybind11). The tests and the bench run on the NPU.
PYTHON ?= python3

ifeq ($(origin HOST_KIND),undefined)
ifneq ($(strip $(ASCEND_HOME_PATH)),)
HOST_KIND := npu
else
# find_spec looks for torch_npu without importing it (nor torch).
HOST_KIND := $(shell $(PYTHON) -c "import importlib.util; import sys; sys.exit(importlib.util.find_spec('torch_npu') is None)" >/dev/null 2>&1 && echo npu || echo cpu)
endif
endif
ifeq ($(filter $(HOST_KIND),cpu npu),)
$(error HOST_KIND must be cpu or npu, got '$(HOST_KIND)')
endif

ifeq ($(HOST_KIND),npu)
VENV   := .venv-npu
EXTRAS := npu,test,bench
else
VENV   := .venv
EXTRAS := cpu,test,bench
endif
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ASCEND_TRITON := .ascend-triton
TRITON_ASCEND_VERSION := 3.2.0
ASCENDNPU_IR_VERSION  := 1.2.0
ASCEND_STAMP  := $(ASCEND_TRITON)/.installed-$(TRITON_ASCEND_VERSION)-$(ASCENDNPU_IR_VERSION)
ASCEND_NUMPY  := .ascend-numpy
ASCEND_NUMPY_VERSION := 1.26.4
ASCEND_NUMPY_STAMP   := $(ASCEND_NUMPY)/.installed-$(ASCEND_NUMPY_VERSION)
# The torch that torch-npu 2.7.1 requires (2.7.1+cpu on x86-64, 2.7.1 on aarch64), from the
# PyTorch CPU wheel index, as torch-npu's own install instructions do.
NPU_TORCH_VERSION := 2.7.1
TORCH_CPU_INDEX   ?= https://download.pytorch.org/whl/cpu
PIP := -m pip install -q --disable-pip-version-check

.PHONY: test bench audit install-check venv clean host npu-prerequisites

venv: $(STAMP)

host:
	@echo "HOST_KIND=$(HOST_KIND) VENV=$(VENV) EXTRAS=$(EXTRAS)"

ifeq ($(HOST_KIND),npu)
# What triton-ascend 3.2.0 needs before pip can help: CPython 3.9 to 3.11 (its wheels), and, to
# build its launcher the first time a kernel runs, a C++ compiler ($$CC, else clang++ or g++, as
# triton/backends/ascend/utils.py looks for one) and Python.h. Said here, before anything installs.
NPU_PREREQUISITES := import os, shutil, sys, sysconfig; \
  v = sys.version_info[:2]; \
  cxx = os.environ.get('CC') or shutil.which('clang++') or shutil.which('g++'); \
  headers = os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')); \
  missing = ([] if (3, 9) <= v <= (3, 11) else ['Python 3.9 to 3.11 (this is %d.%d; run make PYTHON=python3.11)' % v]) \
  + ([] if cxx else ['a C++ compiler (g++ or clang++ on PATH, or CC)']) \
  + ([] if headers else ['the Python headers (Python.h; python3-dev or python3-devel)']); \
  sys.exit('triton-ascend 3.2.0 needs ' + '; '.join(missing) if missing else 0)

npu-prerequisites:
	@$(PYTHON) -c "$(NPU_PREREQUISITES)"

# torch first and pinned (a constraint file in the venv) so that the extras cannot replace it with
# PyPI's build.
$(STAMP): pyproject.toml | npu-prerequisites
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	echo 'torch==$(NPU_TORCH_VERSION)' > $(VENV)/torch-constraint.txt
	$(PY) $(PIP) --index-url $(TORCH_CPU_INDEX) 'torch==$(NPU_TORCH_VERSION)'
	$(PY) $(PIP) -c $(VENV)/torch-constraint.txt -e '.[$(EXTRAS)]'
	touch $@
else
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP) -e '.[$(EXTRAS)]'
	touch $@
endif

# triton-ascend and community Triton both install the package `triton`, so the
# Ascend front end lives in a side folder that only the audit puts on PYTHONPATH;
# ascendnpu-ir brings ascendnpuir/bin/bishengir-compile into the same folder.
$(ASCEND_STAMP): | $(STAMP)
	$(PY) $(PIP) --no-deps --target $(ASCEND_TRITON) triton-ascend==$(TRITON_ASCEND_VERSION) ascendnpu-ir==$(ASCENDNPU_IR_VERSION) pybind11
	touch $@

# triton-ascend 3.2.0's interpreter calls int() on one-element arrays, which numpy 2 refuses, and
# .venv keeps numpy 2: numpy 1.26.4 goes into its own side folder, which only the child process of
# tests/test_triton_ascend_interpreter.py puts on PYTHONPATH (before .ascend-triton/).
$(ASCEND_NUMPY_STAMP): | $(STAMP)
	rm -rf $(ASCEND_NUMPY)
	$(PY) $(PIP) --no-deps --target $(ASCEND_NUMPY) numpy==$(ASCEND_NUMPY_VERSION)
	touch $@

ifeq ($(HOST_KIND),npu)
# On an Ascend host the side folders are not built: they stand in for an NPU on hosts without one
# (the lowering audit stops where CANN would take over; the interpreter runs the kernels on the
# CPU), while here CANN's own compiler builds the kernels and the NPU runs them. ascendnpu-ir is
# also an x86-64-only wheel, which an aarch64 910B host cannot install.
# The tests run are the modules written for an NPU: those that mark tests `npu` or pick the NPU
# when torch.npu.is_available(). The others test the kernels under community Triton's CPU
# interpreter, which cannot share an environment with triton-ascend: a CPU host (CI) runs them.
# One process: one NPU context, and each kernel compiles once. NPU_PYTEST_ARGS adds flags.
# (NPU_TESTS is expanded only when `test` runs.)
NPU_TESTS = $(sort $(shell grep -l -e 'torch.npu.is_available()' -e 'pytest.mark.npu' tests/test_*.py) tests/test_install.py)
test: $(STAMP)
	$(PY) -m pytest -q $(NPU_PYTEST_ARGS) $(NPU_TESTS)
	$(PY) -m ascend_kvc.npu_check

audit:
	@echo "make audit is for hosts without an NPU (x86-64): an Ascend host compiles the kernels with CANN itself (make test)" >&2; exit 2
else
# ASCEND_KVC_REQUIRE_TRITON_ASCEND: a missing side folder fails the triton-ascend interpreter
# test instead of skipping it.
# The lowering audit in `make test` compiles every stage once (the quick scope: C=128, or 4 for the
# overlap stages, block size 64, float32 state); `make audit` compiles the whole matrix (every C,
# block size and state dtype, 11 to 19 minutes on 2 cores), prints its tables and runs the audit's
# tests on it. CI runs both.
test: $(STAMP) $(ASCEND_STAMP) $(ASCEND_NUMPY_STAMP)
	ASCEND_KVC_REQUIRE_TRITON_ASCEND=1 ASCEND_KVC_AUDIT_SCOPE=quick $(PY) -m pytest -q -n auto

audit: $(STAMP) $(ASCEND_STAMP)
	$(PY) -m tools.ascend_lowering
	ASCEND_KVC_AUDIT_SCOPE=full $(PY) -m pytest -q -m audit
endif

# Report folder bench/out/<device>-<date>/, ignored by git (report.md, CSV, JSON, figures); BENCH_ARGS adds flags.
bench: $(STAMP)
	$(PY) -m bench --report $(BENCH_ARGS)

# Packaging only (also part of `make test`): the wheel's contents and what each platform extra
# resolves to on Linux x86-64 and aarch64 (pip dry runs against the package index).
install-check: $(STAMP)
	$(PY) -m pytest -q tests/test_install.py

clean:
	rm -rf .venv .venv-npu $(ASCEND_TRITON) $(ASCEND_NUMPY) build/ascend-audit
