"""numba copies of the TREC join's byte helpers, for the trec_eval measures' numba kernel
(``metrics/_trec_kernel.py``) only: the reader's own kernels are compiled (``_trec_kernel.pyx``,
whose ``.pxd`` has the same helpers inline for compiled callers). Temporary: delete this module
when the measures' kernel is compiled and cimports them from ``rankwise.data._trec_kernel``.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_U = np.uint64
_LOW32 = np.uint64(0xFFFFFFFF)

#: how many rows ahead the join prefetches its table slot
PREFETCH = 8


@nb.njit(cache=True, inline="always")
def _load8(buf, p, nbuf):
    """The 8 bytes ``buf[p:p+8]`` as a little-endian word (one unaligned load), the bytes past
    the end of the buffer read as 0."""
    if p + 8 <= nbuf:
        u = _U(p)
        return (_U(buf[u]) | (_U(buf[u + _U(1)]) << _U(8)) | (_U(buf[u + _U(2)]) << _U(16))
                | (_U(buf[u + _U(3)]) << _U(24)) | (_U(buf[u + _U(4)]) << _U(32)) | (_U(buf[u + _U(5)]) << _U(40))
                | (_U(buf[u + _U(6)]) << _U(48)) | (_U(buf[u + _U(7)]) << _U(56)))
    w = _U(0)
    for t in range(nbuf - p):
        w |= _U(buf[p + t]) << _U(8 * t)
    return w


@nb.njit(cache=True, inline="always")
def _low(k):
    """Mask of the low ``k`` bytes of a word (1 <= k <= 7)."""
    return (_U(1) << _U(8 * k)) - _U(1)


@nb.njit(cache=True, inline="always")
def _words(buf, s, e):
    """The first 16 bytes of ``buf[s:e]`` as two little-endian words, zero-padded."""
    nbuf = buf.shape[0]
    n = e - s
    w0 = _U(0)
    w1 = _U(0)
    if n > 0:
        w0 = _load8(buf, s, nbuf)
        if n < 8:
            w0 &= _low(n)
    if n > 8:
        w1 = _load8(buf, s + 8, nbuf)
        if n < 16:
            w1 &= _low(n - 8)
    return w0, w1


@nb.njit(cache=True, inline="always")
def _cmp(buf1, s1, e1, buf2, s2, e2):
    """strcmp of two byte spans: <0, 0, >0."""
    n1 = e1 - s1
    n2 = e2 - s2
    m = n1 if n1 < n2 else n2
    for t in range(m):
        a = buf1[s1 + t]
        b = buf2[s2 + t]
        if a != b:
            return -1 if a < b else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


@intrinsic
def _prefetch(typingctx, table, row):
    """Ask the CPU to fetch ``table[row, 0]``'s cache line (LLVM's ``prefetch``; no effect on
    results): the join prefetches the slot of the row it will probe a few rows later, so that
    the probe of a table too large for the L1 cache does not wait for memory."""
    sig = types.void(table, row)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], context.get_constant(types.intp, 0)],
                                       wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])  # read, keep in all cache levels, data
        return context.get_dummy_value()

    return sig, codegen


@nb.njit(cache=True, inline="always")
def _same_tail(b1, s1, e1, b2, s2):
    """Bytes ``b1[s1:e1]`` equal ``b2[s2:s2 + e1 - s1]``."""
    for t in range(e1 - s1):
        if b1[s1 + t] != b2[s2 + t]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def _probe(table, base, size, first, x, buf, s, e, j_buf, j_s):
    """Slot (row of ``table``; its grade is ``table[slot, 0]``) of the document ``buf[s:e]`` with
    hash ``x`` in the topic table ``table[base:base+size]``, or -1. The hash only picks the
    first slot: a slot matches when length and first 16 bytes are equal, and the bytes beyond
    16 too (judgment row ``first`` + the slot's row): equal bytes, never the hash alone."""
    w0, w1 = _words(buf, s, e)
    meta_len = _U(e - s) << _U(32)
    p = np.int64(x & _U(size - 1))
    while True:
        meta = table[base + p, 3]
        if meta == 0:
            return -1
        if table[base + p, 1] == w0 and table[base + p, 2] == w1 and (meta & ~_LOW32) == meta_len:
            if e - s <= 16 or _same_tail(buf, s + 16, e, j_buf, j_s[first + np.int64(meta & _LOW32)] + 16):
                return base + p
        p = (p + 1) & (size - 1)


@nb.njit(cache=True, inline="always")
def _lookup(table, base, size, first, bits, b_base, b_mask, x, buf, s, e, j_buf, j_s):
    """``_probe`` behind the topic's filter (``join_filter``; ``b_mask`` = its bit count - 1)."""
    y = (x >> _U(40)) & b_mask
    if (bits[b_base + np.int64(y >> _U(6))] >> (y & _U(63))) & _U(1) == 0:
        return -1
    return _probe(table, base, size, first, x, buf, s, e, j_buf, j_s)
