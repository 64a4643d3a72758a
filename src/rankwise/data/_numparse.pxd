# cython: language_level=3
"""Exact decimal-to-double conversion of byte tokens, shared by the compiled text readers.

``parse_number_ws`` converts numbers in the common form ``[+-]digits[.digits][e[+-]dd]`` with a
mantissa below 2**53 and a decimal exponent within +-22 exactly (Clinger's fast path: one correctly
rounded multiplication or division of two exact doubles, the same double that ``strtod`` returns);
up to 18 significant digits (every full-precision ``repr`` score has 17) and any exponent of a normal
double by the Eisel-Lemire algorithm (a 128-bit product with a truncated power of ten; it says when
it cannot decide). Anything else (more digits, subnormal or overflowing results, the rare undecided
case, ``nan``/``inf`` spellings) gets status 1: the caller converts the token with Python's
``float()``, so results are always identical to ``float()`` / a correctly rounded ``strtod``.

The tables are the caller's: ``pow10`` holds 10**0 .. 10**22; ``phi``/``plo`` the 128-bit powers of
ten of ``rankwise.data._svmlight_kernel._EL_HI`` / ``_EL_LO`` (10**EL_MIN .. 10**EL_MAX).

References: W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990;
D. Lemire, "Number parsing at a gigabyte per second", Software: Practice and Experience 51(8),
2021 (the variant of N. Tao, with its fallback condition, as in Go's ``strconv``).
"""
from libc.math cimport ldexp
from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #include <intrin.h>
    static inline int rw_clz64(unsigned long long x) { unsigned long i; _BitScanReverse64(&i, x); return 63 - (int)i; }
    #else
    static inline int rw_clz64(unsigned long long x) { return __builtin_clzll(x); }
    #endif
    """
    int clz64 "rw_clz64"(uint64_t x) noexcept nogil  # x > 0

#: decimal exponents of the Eisel-Lemire table
cdef enum:
    EL_MIN = -348
    EL_MAX = 347

cdef extern from *:
    """
    #define RW_TWO53 9007199254740992LL
    #define RW_M32 0xFFFFFFFFULL
    #define RW_M9 0x1FFULL
    """
    const int64_t _TWO53 "RW_TWO53"  # 2**53
    const uint64_t _M32 "RW_M32"
    const uint64_t _M9 "RW_M9"


cdef inline void mul128(uint64_t a, uint64_t b, uint64_t* hi, uint64_t* lo) noexcept nogil:
    """The 128-bit product of two uint64 as (high, low) words."""
    cdef uint64_t a0 = a & _M32, a1 = a >> 32, b0 = b & _M32, b1 = b >> 32
    cdef uint64_t p0 = a0 * b0, p1 = a0 * b1, p2 = a1 * b0, p3 = a1 * b1
    cdef uint64_t mid = (p0 >> 32) + (p1 & _M32) + (p2 & _M32)
    hi[0] = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32)
    lo[0] = (p0 & _M32) | (mid << 32)


cdef inline bint eisel_lemire(int64_t man_, int64_t exp10, const uint64_t* phi, const uint64_t* plo,
                              double* out) noexcept nogil:
    """``man * 10**exp10`` (``man`` > 0, at most 18 digits) rounded to the nearest double, ties to
    even, into ``out``; False where the 128-bit product cannot decide (then, and for subnormal or
    overflowing results, the caller falls back to ``float()``)."""
    if exp10 < EL_MIN or exp10 > EL_MAX:
        return False
    cdef uint64_t man = <uint64_t>man_
    cdef int64_t clz = clz64(man)
    man = man << clz
    # an arithmetic shift of a negative product: floor division by 2**16, as in Python
    cdef int64_t exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz
    cdef int64_t i = exp10 - EL_MIN
    cdef uint64_t x_hi, x_lo, y_hi, y_lo, m_hi, m_lo
    mul128(man, phi[i], &x_hi, &x_lo)
    if (x_hi & _M9) == _M9 and x_lo + man < man:  # the truncated table may matter: a wider product
        mul128(man, plo[i], &y_hi, &y_lo)
        m_hi = x_hi
        m_lo = x_lo + y_hi
        if m_lo < x_lo:
            m_hi += 1
        if (m_hi & _M9) == _M9 and m_lo + 1 == 0 and y_lo + man < man:
            return False
        x_hi = m_hi
        x_lo = m_lo
    cdef int64_t msb = <int64_t>(x_hi >> 63)
    cdef uint64_t mant = x_hi >> (msb + 9)
    exp2 -= 1 ^ msb
    if x_lo == 0 and (x_hi & _M9) == 0 and (mant & 3) == 1:  # halfway: undecided
        return False
    mant = (mant + (mant & 1)) >> 1
    if (mant >> 53) > 0:
        mant >>= 1
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:  # subnormal, or beyond the doubles
        return False
    out[0] = ldexp(<double>mant, <int>(exp2 - 1075))
    return True


cdef inline bint is_ws(unsigned char c) noexcept nogil:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


cdef inline int64_t uint_digits(const unsigned char* buf, int64_t i, int64_t ce, int64_t* value,
                                bint* ok) noexcept nogil:
    """The decimal digits from ``i`` as an int64 into ``value``; returns the first non-digit. ``ok``
    is False when the value is beyond int64 (refused, never wrapped)."""
    cdef int64_t v = 0
    cdef unsigned char c
    ok[0] = True
    while i < ce:
        c = buf[i]
        if c < 48 or c > 57:
            break
        if v > 922337203685477580LL or (v == 922337203685477580LL and c > 55):
            ok[0] = False
        else:
            v = v * 10 + (c - 48)
        i += 1
    value[0] = v
    return i


cdef inline int parse_number_ws(const unsigned char* buf, int64_t s, int64_t ce, const double* pow10,
                                const uint64_t* phi, const uint64_t* plo, double* value,
                                int64_t* end) noexcept nogil:
    """Parse the number starting at ``s`` and ending at whitespace or ``ce``, in one pass.

    Returns the status (0 = exact, 1 = needs the Python fallback: well formed but outside the fast
    path, or a spelling such as ``nan``; 2 = malformed); the value (0.0 unless status 0) goes to
    ``value``, the token's end to ``end``.
    """
    cdef int64_t i = s
    cdef bint neg = False
    if i < ce and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    cdef int64_t mant = 0, exp10 = 0, ev
    cdef bint seen_digit = False, overflow = False, frac = False, eneg
    cdef unsigned char c
    cdef int status = 0
    cdef double v
    value[0] = 0.0
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
    if i < ce and not is_ws(buf[i]):
        # junk after the number (or not a number at all): find the token end
        while i < ce and not is_ws(buf[i]):
            i += 1
        end[0] = i
        return 2 if seen_digit else 1
    end[0] = i
    if status == 2:
        return 2
    if not seen_digit or overflow:
        return 1
    if mant == 0:
        value[0] = -0.0 if neg else 0.0
        return 0
    if mant > _TWO53 or exp10 > 22 or exp10 < -22:
        if not eisel_lemire(mant, exp10, phi, plo, &v):
            return 1
        value[0] = -v if neg else v
        return 0
    v = <double>mant
    if exp10 > 0:
        v = v * pow10[exp10]
    elif exp10 < 0:
        v = v / pow10[-exp10]
    value[0] = -v if neg else v
    return 0


cdef inline bint parse_int(const unsigned char* buf, int64_t s, int64_t e, int64_t* value) noexcept nogil:
    """Non-negative or signed decimal integer in buf[s:e] into ``value``; False if it is not one."""
    cdef int64_t i = s, v
    cdef bint neg = False, ok
    if i < e and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    if i >= e:
        return False
    i = uint_digits(buf, i, e, &v, &ok)
    if not ok or i < e:  # beyond int64 (refused, never wrapped) or a non-digit
        return False
    value[0] = -v if neg else v
    return True


cdef inline bint is_null(const unsigned char* buf, int64_t s, int64_t e) noexcept nogil:
    return e - s == 4 and buf[s] == 78 and buf[s + 1] == 85 and buf[s + 2] == 76 and buf[s + 3] == 76
