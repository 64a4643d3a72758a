# Byte-level helpers of the TREC reader's kernels (_trec_kernel.pyx): the 64-bit id hash, byte comparison,
# and the probe of a topic's join table behind its filter. Inline, on raw pointers, so that the other
# compiled kernels that compare or join ids (run fusion, the trec_eval measures) cimport them:
#   from rankwise.data._trec_kernel cimport _cmp, _lookup, _prefetch, PREFETCH_ROWS
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #ifndef RW_TREC_BYTES_H
    #define RW_TREC_BYTES_H
    #include <cstdint>
    #include <cstring>
    #if defined(_MSC_VER)
    #include <intrin.h>
    #if defined(_M_X64) || defined(_M_IX86)
    #include <xmmintrin.h>
    #endif
    #endif
    /* the 8 bytes p[0:8] as a little-endian word (one unaligned load) */
    static inline uint64_t rw_trec_load8(const unsigned char* p) {
        uint64_t w;
        std::memcpy(&w, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
    #endif
        return w;
    }
    /* ask the CPU for p's cache line (read, keep in all cache levels); no effect on results */
    static inline void rw_trec_prefetch(const void* p) {
    #if defined(_MSC_VER)
    #if defined(_M_X64) || defined(_M_IX86)
        _mm_prefetch((const char*)p, _MM_HINT_T0);
    #endif
    #else
        __builtin_prefetch(p, 0, 3);
    #endif
    }
    /* trailing zero bits of x > 0 */
    static inline int rw_trec_ctz64(uint64_t x) {
    #if defined(_MSC_VER)
        unsigned long i;
        _BitScanForward64(&i, x);
        return (int)i;
    #else
        return __builtin_ctzll(x);
    #endif
    }
    #endif
    """
    uint64_t _load8_word "rw_trec_load8"(const uint8_t* p) noexcept nogil
    void _prefetch_line "rw_trec_prefetch"(const void* p) noexcept nogil
    int _ctz64 "rw_trec_ctz64"(uint64_t x) noexcept nogil

cdef enum:
    PREFETCH_ROWS = 8  # how many rows ahead the join prefetches its table slot
    SLOT_WORDS = 4  # words per slot of a join table (``join_table``)


cdef inline bint _is_sep(uint8_t c) noexcept nogil:
    return c == 32 or c == 9


cdef inline uint64_t _load8(const uint8_t* buf, int64_t p, int64_t nbuf) noexcept nogil:
    """The 8 bytes ``buf[p:p+8]`` as a little-endian word (one unaligned load), the bytes past the end of
    the buffer read as 0."""
    cdef uint64_t w = 0
    cdef int64_t t
    if p + 8 <= nbuf:
        return _load8_word(buf + p)
    for t in range(nbuf - p):
        w |= (<uint64_t>buf[p + t]) << (8 * t)
    return w


cdef inline uint64_t _low(int64_t k) noexcept nogil:
    """Mask of the low ``k`` bytes of a word (1 <= k <= 7)."""
    return ((<uint64_t>1) << (8 * k)) - 1


cdef inline uint64_t _mix(uint64_t h, uint64_t w) noexcept nogil:
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 29)


cdef inline uint64_t _final(uint64_t h, int64_t n) noexcept nogil:
    """murmur3's 64-bit finaliser of the state and the length: every output bit depends on every input bit
    (the join tables take their slot from the low bits)."""
    h ^= <uint64_t>n
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    h *= 0xC4CEB9FE1A85EC53ULL
    return h ^ (h >> 33)


cdef inline uint64_t _hash(const uint8_t* buf, int64_t nbuf, int64_t s, int64_t e) noexcept nogil:
    """Hash of the bytes ``buf[s:e]``: its 8-byte words from ``s`` (the last one zero-padded) folded by
    ``_mix``, then ``_final`` with the length."""
    cdef uint64_t h = 0
    cdef int64_t p = s
    while p + 8 <= e:
        h = _mix(h, _load8(buf, p, nbuf))
        p += 8
    if p < e:
        h = _mix(h, _load8(buf, p, nbuf) & _low(e - p))
    return _final(h, e - s)


cdef inline void _words(const uint8_t* buf, int64_t nbuf, int64_t s, int64_t e, uint64_t* w0,
                        uint64_t* w1) noexcept nogil:
    """The first 16 bytes of ``buf[s:e]`` as two little-endian words, zero-padded."""
    cdef int64_t n = e - s
    w0[0] = 0
    w1[0] = 0
    if n > 0:
        w0[0] = _load8(buf, s, nbuf)
        if n < 8:
            w0[0] &= _low(n)
    if n > 8:
        w1[0] = _load8(buf, s + 8, nbuf)
        if n < 16:
            w1[0] &= _low(n - 8)


cdef inline int _cmp(const uint8_t* buf1, int64_t s1, int64_t e1, const uint8_t* buf2, int64_t s2,
                     int64_t e2) noexcept nogil:
    """strcmp of two byte spans: <0, 0, >0."""
    cdef int64_t n1 = e1 - s1, n2 = e2 - s2
    cdef int64_t m = n1 if n1 < n2 else n2
    cdef int64_t t
    cdef uint8_t a, b
    for t in range(m):
        a = buf1[s1 + t]
        b = buf2[s2 + t]
        if a != b:
            return -1 if a < b else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


cdef inline bint _same_tail(const uint8_t* b1, int64_t s1, int64_t e1, const uint8_t* b2, int64_t s2) noexcept nogil:
    """Bytes ``b1[s1:e1]`` equal ``b2[s2:s2 + e1 - s1]``."""
    cdef int64_t t
    for t in range(e1 - s1):
        if b1[s1 + t] != b2[s2 + t]:
            return False
    return True


cdef inline void _prefetch(const uint64_t* table, int64_t row) noexcept nogil:
    """Ask the CPU to fetch slot ``row``'s cache line of a join table (no effect on results): the join
    prefetches the slot of the row it will probe a few rows later, so that the probe of a table too large
    for the L1 cache does not wait for memory."""
    _prefetch_line(table + SLOT_WORDS * row)


cdef inline int64_t _probe(const uint64_t* table, int64_t base, int64_t size, int64_t first, uint64_t x,
                           const uint8_t* buf, int64_t nbuf, int64_t s, int64_t e, const uint8_t* j_buf,
                           const int64_t* j_s) noexcept nogil:
    """Slot (row of ``table``; its grade is ``table[slot, 0]``) of the document ``buf[s:e]`` (``nbuf`` the
    length of ``buf``) with hash ``x`` in the topic table ``table[base:base+size]``, or -1. The hash only
    picks the first slot: a slot matches when length and first 16 bytes are equal, and the bytes beyond 16
    too (judgment row ``first`` + the slot's row): equal bytes, never the hash alone."""
    cdef uint64_t w0, w1, meta
    cdef uint64_t meta_len = (<uint64_t>(e - s)) << 32
    cdef int64_t p = <int64_t>(x & <uint64_t>(size - 1))
    cdef const uint64_t* slot
    _words(buf, nbuf, s, e, &w0, &w1)
    while True:
        slot = table + SLOT_WORDS * (base + p)
        meta = slot[3]
        if meta == 0:
            return -1
        if slot[1] == w0 and slot[2] == w1 and (meta & ~(<uint64_t>0xFFFFFFFF)) == meta_len:
            if e - s <= 16 or _same_tail(buf, s + 16, e, j_buf,
                                         j_s[first + <int64_t>(meta & <uint64_t>0xFFFFFFFF)] + 16):
                return base + p
        p = (p + 1) & (size - 1)


cdef inline int64_t _lookup(const uint64_t* table, int64_t base, int64_t size, int64_t first, const uint64_t* bits,
                            int64_t b_base, uint64_t b_mask, uint64_t x, const uint8_t* buf, int64_t nbuf, int64_t s,
                            int64_t e, const uint8_t* j_buf, const int64_t* j_s) noexcept nogil:
    """``_probe`` behind the topic's filter (``join_filter``; ``b_mask`` = its bit count - 1)."""
    cdef uint64_t y = (x >> 40) & b_mask
    if (bits[b_base + <int64_t>(y >> 6)] >> (y & 63)) & 1 == 0:
        return -1
    return _probe(table, base, size, first, x, buf, nbuf, s, e, j_buf, j_s)


# ---- reading {docno: value} dicts (``dict_rows``; the trec_eval pass's dict walk, ``eval_dict_runs``)

cdef extern from "Python.h":
    bint _is_str "PyUnicode_CheckExact"(PyObject* o) noexcept
    bint _is_float "PyFloat_CheckExact"(PyObject* o) noexcept
    bint _is_int "PyLong_CheckExact"(PyObject* o) noexcept
    bint _is_dict "PyDict_CheckExact"(PyObject* o) noexcept
    bint _is_ascii "PyUnicode_IS_COMPACT_ASCII"(PyObject* o) noexcept
    void* _str_data "PyUnicode_DATA"(PyObject* o) noexcept
    Py_ssize_t _str_len "PyUnicode_GET_LENGTH"(PyObject* o) noexcept
    double _float_value "PyFloat_AS_DOUBLE"(PyObject* o) noexcept
    long long _int_value "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow) noexcept
    Py_ssize_t _dict_len "PyDict_GET_SIZE"(PyObject* o) noexcept
    int _dict_next "PyDict_Next"(PyObject* d, Py_ssize_t* pos, PyObject** key, PyObject** value) noexcept
    PyObject* _type_of "(PyObject*)Py_TYPE"(PyObject* o) noexcept


cdef inline uint64_t _hash_lf(const uint8_t* buf, int64_t s, int64_t e, bint* lf) noexcept nogil:
    """``_hash`` of ``buf[s:e]`` (the 8 bytes from ``e - 1`` on readable), and ``lf`` set where the
    bytes hold a line feed (the zero-byte test on each word xor ``\\n``, on the span's bytes only)."""
    cdef uint64_t x = 0, w, v, found = 0
    cdef int64_t p = s
    while p + 8 <= e:
        w = _load8_word(buf + p)
        v = w ^ 0x0A0A0A0A0A0A0A0AULL
        found |= (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL
        x = _mix(x, w)
        p += 8
    if p < e:
        w = _load8_word(buf + p) & _low(e - p)
        v = (w ^ 0x0A0A0A0A0A0A0A0AULL) | ~_low(e - p)  # the bytes past the span never test as a line feed
        found |= (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL
        x = _mix(x, w)
    if found:
        lf[0] = True
    return _final(x, e - s)
