# The two commands a newcomer types: `make demo` and `make test`.
# Each creates .venv and installs what it needs by itself.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the compiled kernels (setup.py): rebuilt in place when a .pyx/.pxd/.hpp changes after the install
KERNELS := $(shell find src -name '*.pyx' -o -name '*.pxd' -o -name '*.hpp')
BUILT  := $(VENV)/.kernels

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	# torch pinned to the CPU build: any other version downloads a multi-GB CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test,dask,export]"
	touch $(STAMP)
	# pip's install -e has just built the kernels in place; mark them built (else the rule below rebuilds
	# them all, its Cython's headers being newer than the .cpp files pip generated before installing it)
	touch $(BUILT)

$(BUILT): $(STAMP) $(KERNELS) setup.py
	$(PY) setup.py --quiet build_ext --inplace
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
