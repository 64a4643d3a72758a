# The two commands a newcomer types: `make demo` and `make test`.
# Each creates .venv and installs what it needs by itself.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the compiled kernels (setup.py): rebuilt in place when a .pyx/.pxd/.hpp changes after the install
KERNELS := $(shell find src -name '*.pyx' -o -name '*.pxd' -o -name '*.hpp')
BUILT  := $(VENV)/.kernels
# the Cython utility code the kernels share, one module built with them (setup.py's SHARED; no .pyx of its own)
SHARED := src/rankwise/_native/_cyutility

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	# torch pinned to the CPU build: any other version downloads a multi-GB CUDA build. One pip run for
	# both: one resolution, one pass over the dependencies.
	# Bytecode: pip compiles every module of every wheel, one file after another (15,000 files, half of this
	# step's time); compileall does the same files on every core afterwards. Same .pyc files in the end
	# (measured on 2 cores: 103 s with pip compiling; 47 s + 22 s this way). As under pip, a file that is not
	# valid for this Python (torch ships a 3.12-only test helper) is skipped: compileall exits 1 for it.
	$(PY) -m pip install --quiet --no-compile "torch==2.13.0" -e ".[test,dask,export]"
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null || true
	touch $(STAMP)

# Rebuilt only where a kernel's .so is missing or older than a kernel source or setup.py: right after
# `pip install -e` (which builds them) nothing is (build_ext alone would redo them all, the venv's Cython
# headers being newer than the .cpp files pip generated before it installed them).
$(BUILT): $(STAMP) $(KERNELS) setup.py
	@stale=; for f in $(filter %.pyx,$(KERNELS)) $(SHARED).pyx; do so=$$(ls $${f%.pyx}.*.so 2>/dev/null | head -1); \
	  if [ -z "$$so" ] || [ -n "$$(find $(KERNELS) setup.py -newer $$so)" ]; then stale=1; fi; done; \
	if [ -n "$$stale" ]; then $(PY) setup.py --quiet build_ext --inplace; fi
	touch $(BUILT)

install: $(BUILT)

demo: $(BUILT)
	$(VENV)/bin/rankwise demo

# two pytest workers on two cores: one thread each for torch/OpenMP/BLAS, else they oversubscribe
test: $(BUILT)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PY) -m pytest -n 2 -q

bench: $(BUILT)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
	find src -name '*.so' -delete -o -name '*.pyd' -delete -o -name '*.pyx' -exec sh -c 'rm -f "$${1%.pyx}.cpp"' _ {} \;
	rm -f $(SHARED).c
