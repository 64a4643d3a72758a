# Exact decimal-to-double conversion of the compiled readers (inline, on raw byte pointers).
#
# Numbers in the common form ``[+-]digits[.digits][e[+-]dd]`` with a mantissa below 2**53 and a decimal
# exponent within +-22 are converted by Clinger's fast path (one correctly rounded multiplication or
# division of two exact doubles: the double that ``strtod`` returns); up to 18 significant digits (every
# full-precision ``repr`` score has 17) and any exponent of a normal double by the Eisel-Lemire algorithm
# (a 128-bit product with a truncated power of ten; it says when it cannot decide). Anything else (more
# digits, subnormal or overflowing results, the rare undecided case, ``nan``/``inf`` spellings) is left to
# the caller's Python ``float()`` fallback (status 1), so results always equal ``float()``'s.
#
# The tables are the caller's (``pow10``: 10.0**k for k in 0..22; ``el_hi``/``el_lo``: the 128-bit
# mantissas of 10**q for q in EL_MIN..EL_MAX, normalised and rounded down, as Eisel-Lemire's error bound
# assumes), built once at import in Python from exact integers.
#
# References: W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990;
# D. Lemire, "Number parsing at a gigabyte per second", Software: Practice and Experience 51(8), 2021
# (the variant of N. Tao, with its fallback condition, as in Go's ``strconv``).
from libc.stdint cimport int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #ifndef RW_DECIMAL_H
    #define RW_DECIMAL_H
    #include <cstdint>
    #include <cstring>
    #if defined(_MSC_VER)
    #include <intrin.h>
    #endif
    /* high word of the 128-bit product a * b; the low word in *lo */
    static inline uint64_t rw_mul128(uint64_t a, uint64_t b, uint64_t* lo) {
    #if defined(__SIZEOF_INT128__)
        unsigned __int128 p = (unsigned __int128)a * b;
        *lo = (uint64_t)p;
        return (uint64_t)(p >> 64);
    #else
        uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
        uint64_t p0 = a0 * b0, p1 = a0 * b1, p2 = a1 * b0, p3 = a1 * b1;
        uint64_t mid = (p0 >> 32) + (p1 & 0xFFFFFFFFu) + (p2 & 0xFFFFFFFFu);
        *lo = (p0 & 0xFFFFFFFFu) | (mid << 32);
        return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
    #endif
    }
    /* the double whose IEEE-754 bits are b */
    static inline double rw_double_of_bits(uint64_t b) {
        double d;
        std::memcpy(&d, &b, 8);
        return d;
    }
    /* leading zero bits of x > 0 */
    static inline int rw_clz64(uint64_t x) {
    #if defined(_MSC_VER)
        unsigned long i;
        _BitScanReverse64(&i, x);
        return 63 - (int)i;
    #else
        return __builtin_clzll(x);
    #endif
    }
    #endif
    """
    uint64_t _mul128 "rw_mul128"(uint64_t a, uint64_t b, uint64_t* lo) noexcept nogil
    int _clz64 "rw_clz64"(uint64_t x) noexcept nogil
    double _double_of_bits "rw_double_of_bits"(uint64_t b) noexcept nogil

cdef enum:
    EL_MIN = -348  # decimal exponents of the Eisel-Lemire table
    EL_MAX = 347


cdef inline bint _is_ws(uint8_t c) noexcept nogil:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


cdef inline bint _eisel_lemire(int64_t man_in, int64_t exp10, const uint64_t* phi, const uint64_t* plo,
                               double* out) noexcept nogil:
    """``man_in * 10**exp10`` (``man_in`` > 0, at most 18 digits) rounded to the nearest double, ties to
    even, into ``out``; False where the 128-bit product cannot decide (then, and for subnormal or
    overflowing results, the caller falls back to ``float()``)."""
    cdef uint64_t m9 = 0x1FF
    cdef uint64_t man, x_hi, x_lo, y_hi, y_lo, m_hi, m_lo, mant
    cdef int64_t clz, exp2, i, msb
    if exp10 < EL_MIN or exp10 > EL_MAX:
        return False
    man = <uint64_t>man_in
    clz = _clz64(man)
    man = man << clz
    exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz  # arithmetic shift: floor(exp10 * log2(10))
    i = exp10 - EL_MIN
    x_hi = _mul128(man, phi[i], &x_lo)
    if (x_hi & m9) == m9 and x_lo + man < man:  # the truncated table may matter: a wider product
        y_hi = _mul128(man, plo[i], &y_lo)
        m_hi = x_hi
        m_lo = x_lo + y_hi
        if m_lo < x_lo:
            m_hi += 1
        if (m_hi & m9) == m9 and m_lo + 1 == 0 and y_lo + man < man:
            return False
        x_hi = m_hi
        x_lo = m_lo
    msb = <int64_t>(x_hi >> 63)
    mant = x_hi >> (msb + 9)
    exp2 -= 1 ^ msb
    if x_lo == 0 and (x_hi & m9) == 0 and (mant & 3) == 1:  # halfway: undecided
        return False
    mant = (mant + (mant & 1)) >> 1
    if (mant >> 53) > 0:
        mant >>= 1
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:  # subnormal, or beyond the doubles
        return False
    # mant is in [2**52, 2**53): the double mant * 2**(exp2 - 1075), its biased exponent exp2, built from its bits
    out[0] = _double_of_bits((<uint64_t>exp2 << 52) | (mant & 0xFFFFFFFFFFFFFULL))
    return True


cdef inline int _parse_number_ws(const uint8_t* buf, int64_t s, int64_t ce, const double* pow10,
                                 const uint64_t* phi, const uint64_t* plo, double* out, int64_t* end) noexcept nogil:
    """Parse the number starting at ``s`` and ending at whitespace or ``ce``, in one pass: the status
    (0 = converted exactly into ``out``, 1 = needs the Python fallback (well formed but outside the exact
    paths, or a spelling such as ``nan``), 2 = malformed); ``end`` gets the token's end."""
    cdef int64_t i = s
    cdef bint neg = False, eneg
    cdef int64_t mant = 0, exp10 = 0, ev
    cdef bint seen_digit = False, overflow = False, frac = False
    cdef int status = 0
    cdef uint8_t c
    cdef double v
    if i < ce and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    while i < ce:  # digits, at most one '.' among them; beyond 10**17 digits are dropped
        c = buf[i]
        if 48 <= c <= 57:
            seen_digit = True
            if mant < 100000000000000000LL:
                mant = mant * 10 + (c - 48)
                if frac:
                    exp10 -= 1
            else:
                overflow = True
                if not frac:
                    exp10 += 1
        elif c == 46 and not frac:
            frac = True
        else:
            break
        i += 1
    if seen_digit and i < ce and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < ce and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i >= ce or not (48 <= buf[i] <= 57):
            status = 2
        ev = 0
        while i < ce and 48 <= buf[i] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[i] - 48)
            i += 1
        exp10 += -ev if eneg else ev
    if i < ce and not _is_ws(buf[i]):
        # junk after the number (or not a number at all): find the token end
        while i < ce and not _is_ws(buf[i]):
            i += 1
        end[0] = i
        return 2 if seen_digit else 1
    end[0] = i
    if status == 2:
        return 2
    if not seen_digit or overflow:
        return 1
    if mant == 0:
        v = 0.0
        out[0] = -v if neg else v
        return 0
    if mant > 9007199254740992LL or exp10 > 22 or exp10 < -22:  # beyond 2**53 or 10**22: not exact doubles
        if not _eisel_lemire(mant, exp10, phi, plo, &v):
            return 1
        out[0] = -v if neg else v
        return 0
    v = <double>mant
    if exp10 > 0:
        v = v * pow10[exp10]
    elif exp10 < 0:
        v = v / pow10[-exp10]
    out[0] = -v if neg else v
    return 0


cdef inline int _parse_number(const uint8_t* buf, int64_t s, int64_t e, const double* pow10, const uint64_t* phi,
                              const uint64_t* plo, double* out) noexcept nogil:
    """Parse the whole token ``buf[s:e]`` (it holds no whitespace) as a decimal number: the status of
    ``_parse_number_ws``."""
    cdef int64_t end
    return _parse_number_ws(buf, s, e, pow10, phi, plo, out, &end)


cdef inline bint _parse_int(const uint8_t* buf, int64_t s, int64_t e, int64_t* out) noexcept nogil:
    """A signed decimal integer (ASCII digits, within int64: refused, never wrapped) in ``buf[s:e]``
    into ``out``; False if the token is not one."""
    cdef int64_t i = s
    cdef bint neg = False, ok = True
    cdef int64_t v = 0
    cdef uint8_t c
    if i < e and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    if i >= e:
        return False
    while i < e:
        c = buf[i]
        if c < 48 or c > 57:
            break
        if v > 922337203685477580LL or (v == 922337203685477580LL and c > 55):
            ok = False
        else:
            v = v * 10 + (c - 48)
        i += 1
    if not ok or i < e:  # beyond int64 or a non-digit
        return False
    out[0] = -v if neg else v
    return True
