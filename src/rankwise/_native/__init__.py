"""C++ headers shared by rankwise's compiled kernels (``*.pyx``, built by ``setup.py``); nothing to import.

``sort.hpp`` / ``sort.pxd``: stable argsort and sorts with NumPy's NaN rule (NaN after every number).
"""
