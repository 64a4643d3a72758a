# Probes of the qrels join tables (``rankwise.data._trec_kernel.join_table`` / ``join_filter``), inline, for the
# compiled kernels that join run documents to judgments: ``lookup`` gives the table row of a document, or -1.
#
# Table layout (join_table): topic g's slots are rows t_off[g] .. t_off[g+1] of a (slots x 4) uint64 table, a
# power of two per topic, linear probing from the hash's low bits; a slot holds the grade (int64 bits), the
# document's first 16 bytes (two little-endian words, zero-padded) and (length << 32) | (row in topic + 1),
# 0 when empty. Filter (join_filter): per topic a bit set of the judgments' hashes (bit = top bits of the hash).
from libc.stdint cimport int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #include <xmmintrin.h>
    #define RW_PREFETCH(p) _mm_prefetch((const char*)(p), _MM_HINT_T0)
    #else
    #define RW_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #endif
    """
    # ask the CPU to fetch the cache line of ``p`` (read, keep in every level); no effect on results
    void prefetch "RW_PREFETCH"(const void* p) nogil

#: how many rows ahead a join prefetches its table slot
cdef enum:
    JOIN_PREFETCH = 8


cdef inline uint64_t load8(const uint8_t* buf, int64_t p, int64_t nbuf) noexcept nogil:
    """The 8 bytes ``buf[p:p+8]`` as a little-endian word (one load once compiled), past the end read as 0."""
    cdef uint64_t w = 0
    cdef int64_t t
    cdef const uint8_t* b
    if p + 8 <= nbuf:
        b = buf + p
        return (<uint64_t>b[0] | (<uint64_t>b[1] << 8) | (<uint64_t>b[2] << 16) | (<uint64_t>b[3] << 24)
                | (<uint64_t>b[4] << 32) | (<uint64_t>b[5] << 40) | (<uint64_t>b[6] << 48) | (<uint64_t>b[7] << 56))
    for t in range(nbuf - p):
        w |= <uint64_t>buf[p + t] << (8 * t)
    return w


cdef inline uint64_t low_bytes(int64_t k) noexcept nogil:
    """Mask of the low ``k`` bytes of a word (1 <= k <= 7)."""
    return (<uint64_t>1 << (8 * k)) - 1


cdef inline void words16(const uint8_t* buf, int64_t nbuf, int64_t s, int64_t e, uint64_t* w0,
                         uint64_t* w1) noexcept nogil:
    """The first 16 bytes of ``buf[s:e]`` as two little-endian words, zero-padded."""
    cdef int64_t n = e - s
    w0[0] = 0
    w1[0] = 0
    if n > 0:
        w0[0] = load8(buf, s, nbuf)
        if n < 8:
            w0[0] &= low_bytes(n)
    if n > 8:
        w1[0] = load8(buf, s + 8, nbuf)
        if n < 16:
            w1[0] &= low_bytes(n - 8)


cdef inline int byte_cmp(const uint8_t* buf1, int64_t s1, int64_t e1, const uint8_t* buf2, int64_t s2,
                         int64_t e2) noexcept nogil:
    """strcmp of two byte spans: -1, 0, 1."""
    cdef int64_t n1 = e1 - s1
    cdef int64_t n2 = e2 - s2
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


cdef inline int64_t probe(const uint64_t* table, int64_t base, int64_t size, int64_t first, uint64_t x,
                          const uint8_t* buf, int64_t nbuf, int64_t s, int64_t e, const uint8_t* j_buf,
                          const int64_t* j_s) noexcept nogil:
    """Slot (row of ``table``; its grade is ``table[4 * slot]``) of the document ``buf[s:e]`` with hash ``x`` in
    the topic table of rows ``base .. base+size``, or -1. The hash only picks the first slot: a slot matches when
    length and first 16 bytes are equal, and the bytes beyond 16 too (judgment row ``first`` + the slot's row)."""
    cdef uint64_t w0, w1, meta
    cdef uint64_t meta_len = <uint64_t>(e - s) << 32
    cdef int64_t p = <int64_t>(x & <uint64_t>(size - 1))
    cdef int64_t t, s2
    cdef const uint64_t* slot
    cdef bint same
    words16(buf, nbuf, s, e, &w0, &w1)
    while True:
        slot = table + 4 * (base + p)
        meta = slot[3]
        if meta == 0:
            return -1
        if slot[1] == w0 and slot[2] == w1 and (meta & ~<uint64_t>0xFFFFFFFF) == meta_len:
            if e - s <= 16:
                return base + p
            s2 = j_s[first + <int64_t>(meta & <uint64_t>0xFFFFFFFF)] + 16
            same = True
            for t in range(e - s - 16):
                if buf[s + 16 + t] != j_buf[s2 + t]:
                    same = False
                    break
            if same:
                return base + p
        p = (p + 1) & (size - 1)


cdef inline int64_t lookup(const uint64_t* table, int64_t base, int64_t size, int64_t first, const uint64_t* bits,
                           int64_t b_base, uint64_t b_mask, uint64_t x, const uint8_t* buf, int64_t nbuf, int64_t s,
                           int64_t e, const uint8_t* j_buf, const int64_t* j_s) noexcept nogil:
    """``probe`` behind the topic's filter (words ``bits[b_base:]``; ``b_mask`` = its bit count - 1)."""
    cdef uint64_t y = (x >> 40) & b_mask
    if (bits[b_base + <int64_t>(y >> 6)] >> (y & 63)) & 1 == 0:
        return -1
    return probe(table, base, size, first, x, buf, nbuf, s, e, j_buf, j_s)
