# Sorting helpers shared by the compiled kernels (sort.hpp): NumPy's order (NaN last), stable argsorts.
from libc.stdint cimport int64_t, uint64_t

cdef extern from "sort.hpp" nogil:
    # out[0:n] = the stable ascending argsort of key[0:n] (np.argsort(key, kind="stable"))
    void argsort_f64 "rw_argsort_f64"(const double* key, int64_t n, int64_t* out)
    void argsort_i64 "rw_argsort_i64"(const int64_t* key, int64_t n, int64_t* out)
    void argsort_u64 "rw_argsort_u64"(const uint64_t* key, int64_t n, int64_t* out)
    # x[0:n] sorted ascending in place (np.sort)
    void sort_f64 "rw_sort_f64"(double* x, int64_t n)
    void sort_i64 "rw_sort_i64"(int64_t* x, int64_t n)
