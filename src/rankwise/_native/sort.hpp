// Sorting helpers for rankwise's compiled kernels (cimported through sort.pxd).
//
// Every order here follows NumPy's rule for floating keys: NaN after every number, NaNs equal to
// each other. The argsorts are stable (ties keep input order), as np.argsort(kind="stable").
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace rw {

template <class T>
inline bool key_less(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) {
        if (std::isnan(a)) return false;
        if (std::isnan(b)) return true;
    }
    return a < b;
}

template <class T>
inline void argsort_stable(const T* key, int64_t n, int64_t* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = i;
    std::stable_sort(out, out + n, [key](int64_t a, int64_t b) { return key_less(key[a], key[b]); });
}

template <class T>
inline void sort_values(T* x, int64_t n) {
    std::sort(x, x + n, [](T a, T b) { return key_less(a, b); });
}

}  // namespace rw

// non-template names for Cython
inline void rw_argsort_f64(const double* key, int64_t n, int64_t* out) { rw::argsort_stable(key, n, out); }
inline void rw_argsort_i64(const int64_t* key, int64_t n, int64_t* out) { rw::argsort_stable(key, n, out); }
inline void rw_argsort_u64(const uint64_t* key, int64_t n, int64_t* out) { rw::argsort_stable(key, n, out); }
inline void rw_sort_f64(double* x, int64_t n) { rw::sort_values(x, n); }
inline void rw_sort_i64(int64_t* x, int64_t n) { rw::sort_values(x, n); }
