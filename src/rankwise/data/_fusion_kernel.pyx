# cython: language_level=3
"""Compiled kernel of run fusion (imported lazily by ``fusion.py``): the byte check that confirms
that the documents grouped by their 64-bit hash are the same ids."""
from libc.stdint cimport int64_t, uint8_t

from rankwise.data._trec_kernel cimport _cmp


def same_ids(const int64_t[::1] order, const int64_t[::1] starts, const uint8_t[::1] buf, const int64_t[::1] s,
             const int64_t[::1] e):
    """True if, in every group ``order[starts[g]:starts[g + 1]]``, every span equals the first."""
    cdef int64_t n = order.shape[0], ng = starts.shape[0], g, i, a, b, end
    cdef const uint8_t* bp = &buf[0] if buf.shape[0] else NULL
    cdef bint same = True
    with nogil:
        for g in range(ng):
            end = starts[g + 1] if g + 1 < ng else n
            a = order[starts[g]]
            for i in range(starts[g] + 1, end):
                b = order[i]
                if _cmp(bp, s[a], e[a], bp, s[b], e[b]) != 0:
                    same = False
                    break
            if not same:
                break
    return same
