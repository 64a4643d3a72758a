# cython: language_level=3
"""Compiled kernels of the training engine (:mod:`rankwise.losses._engine`): value, gradient and Hessian
diagonal of a loss for a range of queries of flat ``(scores, labels, query_offsets)`` arrays.

Every ``*_batch`` function has the signature ``batch(s, y, w, v, off, q0, q1, *params, out_v, out_ok, out_g,
out_h)`` (``out_ok`` a uint8 view of a bool array), computes queries ``q0..q1`` without the GIL and writes
only their entries of the outputs, so :func:`rankwise.losses._engine.run` runs disjoint ranges on Python
threads. Scratch memory is allocated once per call, for the longest query of the range.

The hot loops of the pair losses (the weights of a row of pairs, the logistic pairs of a row) are C++
below, written so that the compiler vectorises them at -O3 without reassociating any sum: the running sums
of a row are kept in four independent lanes (pair q goes to lane (q - start) mod 4) and the lanes are added
in a fixed order at the end, so the result is the same on every machine, for every vector width and thread
count.
"""
import numpy as np

from libc.math cimport exp, fabs, floor, ldexp, log, log1p, log2, pow, sqrt, INFINITY, NAN
from libc.stdint cimport int64_t

from rankwise._native.sort cimport argsort_f64, sort_f64

EXP_CLIP = 50.0
_FAST_SPREAD = 500.0

cdef double C_EXP_CLIP = 50.0
cdef double C_LN2 = log(2.0)
# A logistic pair's sigmoid from per-item exponentials: with E_p = exp(σ (s_p - max s)),
# sigmoid(-σ (s_i - s_j)) = E_j / (E_i + E_j), so a pair costs one division and no exp. Used where
# every E_p of the query is a normal float (σ (max s - min s) <= _FAST_SPREAD); otherwise the
# general loop (one exp per pair) keeps every digit at extreme scores.
cdef double C_FAST_SPREAD = 500.0

# pair weights
cpdef enum:
    W_NONE = 0
    W_LABEL = 1
    W_NDCG = 2
    W_LL_NDCG2 = 3
    W_LL_NDCG1 = 4
    W_LL_LAMBDARANK = 5
    W_LL_NDCG2PP = 6
    W_OP = 7
# phi(d) of the score difference
cpdef enum:
    PHI_LOGISTIC = 0
    PHI_HINGE = 1
    PHI_EXP = 2
    PHI_SQHINGE = 3
# pointwise terms
cpdef enum:
    PT_SQUARED = 0
    PT_LOGISTIC = 1
    PT_EXP = 2
    PT_SQHINGE = 3
    PT_SMOOTHHINGE = 4
    PT_BREG_SQ_ID = 5
    PT_BREG_SQ_EXP = 6
    PT_BREG_KL_EXP = 7


cdef extern from *:
    """
    #include <cmath>
    #include <cstdint>

    /* The default -ftrapping-math keeps gcc from turning a select of two computed values into a blend, so
       none of the row loops below would vectorise; assuming no FP traps changes no value (no flag here
       reassociates, contracts or drops a NaN/Inf/signed-zero case). clang assumes it by default. */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize("no-trapping-math")
    #endif

    /* The row loops are also compiled for AVX2 (4 doubles a vector instead of SSE2's 2), chosen when the
       library loads on a CPU that has it (gcc's function multi-versioning, an ifunc: glibc on x86-64). The
       same IEEE operations on every lane (no FMA: -ffp-contract=off), so both versions give the same digits. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
    #define RW_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define RW_VECTOR_CLONES
    #endif

    struct rw_row_sums { double g, h, sl; };

    /* wrow[q], q >= start: the weight of the pair (p, q) before phi (0 for equal labels), one branch-free
       loop per scheme (the scheme is hoisted out of the loop over q). inv_d: each item's discount, pos: its
       position in the ranking (delta is indexed by the distance; by_position: the items are in ranking
       order, the distance is q - p). */
    RW_VECTOR_CLONES
    static void rw_pair_weight_row(int scheme, int64_t p, int64_t start, int64_t n, const double* __restrict ys,
                                   const double* __restrict ws, const double* __restrict gain,
                                   const double* __restrict inv_d, const int64_t* __restrict pos,
                                   const double* __restrict delta, double inv_idcg, double mu,
                                   double* __restrict wrow, bool by_position) {
        const int64_t pp = by_position ? 0 : pos[p];
        const double yp = ys[p];
        const double wp = ws[p];
        if (scheme == 0) {  /* W_NONE */
            for (int64_t q = start; q < n; ++q) wrow[q] = wp * ws[q] * (yp != ys[q] ? 1.0 : 0.0);
        } else if (scheme == 1) {  /* W_LABEL */
            for (int64_t q = start; q < n; ++q) wrow[q] = wp * ws[q] * std::fabs(yp - ys[q]);
        } else {
            const double c = wp * inv_idcg;
            const double gp = gain[p];
            const double dp = inv_d[p];
            if (scheme == 2 || scheme == 5) {  /* W_NDCG, W_LL_LAMBDARANK */
                for (int64_t q = start; q < n; ++q)
                    wrow[q] = c * ws[q] * (std::fabs(gp - gain[q]) * std::fabs(dp - inv_d[q]));
            } else if (scheme == 3 && by_position) {  /* W_LL_NDCG2 */
                for (int64_t q = start; q < n; ++q) wrow[q] = c * ws[q] * (delta[q - p] * std::fabs(gp - gain[q]));
            } else if (scheme == 3) {
                for (int64_t q = start; q < n; ++q) {
                    const int64_t dist = pos[q] - pp;
                    wrow[q] = c * ws[q] * (delta[dist < 0 ? -dist : dist] * std::fabs(gp - gain[q]));
                }
            } else if (by_position) {  /* W_LL_NDCG2PP */
                for (int64_t q = start; q < n; ++q) {
                    const double dg = std::fabs(gp - gain[q]);
                    wrow[q] = c * ws[q] * (mu * delta[q - p] * dg + dg * std::fabs(dp - inv_d[q]));
                }
            } else {
                for (int64_t q = start; q < n; ++q) {
                    const int64_t dist = pos[q] - pp;
                    const double dg = std::fabs(gp - gain[q]);
                    wrow[q] = c * ws[q] * (mu * delta[dist < 0 ? -dist : dist] * dg + dg * std::fabs(dp - inv_d[q]));
                }
            }
        }
    }

    /* The sum of a row's terms tmp[start:n] in four lanes (a fixed order of additions). */
    static inline __attribute__((always_inline)) double rw_lane_sum(const double* __restrict t, int64_t start,
                                                                    int64_t n) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int64_t q = start;
        for (; q + 4 <= n; q += 4) {
            s0 += t[q]; s1 += t[q + 1]; s2 += t[q + 2]; s3 += t[q + 3];
        }
        for (; q < n; ++q) s0 += t[q];
        return (s0 + s1) + (s2 + s3);
    }

    /* The logistic pairs (p, q >= start) of one row: adds to gs/hs[q], returns the sums for item p and
       sum 2|lambda|. Two passes: the pairs (branch-free: every operand of a select is computed before it, no
       arithmetic inside a conditional), their terms kept in tmp[0:3n]; then their three sums. */
    template <bool norm>
    static inline __attribute__((always_inline)) rw_row_sums rw_logistic_row_t(
            int64_t p, int64_t start, int64_t n, const double* __restrict ss,
                                         const double* __restrict ys, const double* __restrict ex,
                                         const double* __restrict wrow, double sigma, double scale,
                                         double* __restrict gs, double* __restrict hs, double* __restrict tmp) {
        const double sp = ss[p];
        const double yp = ys[p];
        const double ep = ex[p];
        const double a1 = -sigma * scale;
        const double a2 = sigma * sigma * scale;
        double* __restrict tg = tmp;
        double* __restrict th = tmp + n;
        double* __restrict tl = tmp + 2 * n;
        for (int64_t q = start; q < n; ++q) {
            const double yq = ys[q];
            const bool better = yp > yq;  /* p is the better-labelled item */
            /* (norm: a template parameter, as a select on a loop-invariant bool stops gcc's vectoriser) */
            const double sgn = (better ? 1.0 : 0.0) - (yp < yq ? 1.0 : 0.0);
            const double eq = ex[q];
            const double d = sgn * (sp - ss[q]);  /* s_i - s_j, i the better-labelled item */
            const double cn = 0.01 + std::fabs(d);
            const double c = norm ? cn : 1.0;  /* LightGBM's normalisation: wt / (0.01 + |d|) */
            const double e = ep + eq;
            const double inv = 1.0 / (e * c);
            const double w = wrow[q];
            const double e_lo = better ? eq : ep;
            const double e_hi = better ? ep : eq;
            const double sx = w * e_lo * inv;  /* wt sigmoid(x), x = -σ d */
            const double sxc = e_hi * c * inv;  /* sigmoid(-x) */
            const double lin = w * e * inv;
            const double d1 = (-sigma * d > 20.0) ? lin : sx;  /* torch's softplus: slope exactly 1 beyond 20 */
            const double l1 = a1 * d1;
            const double l2 = a2 * sx * sxc;
            const double gl = sgn * l1;
            gs[q] -= gl;
            hs[q] += l2;
            tg[q] = gl;
            th[q] = l2;
            tl[q] = 2.0 * std::fabs(l1);
        }
        rw_row_sums r = {rw_lane_sum(tg, start, n), rw_lane_sum(th, start, n), rw_lane_sum(tl, start, n)};
        return r;
    }

    RW_VECTOR_CLONES
    static rw_row_sums rw_logistic_row(int64_t p, int64_t start, int64_t n, const double* ss, const double* ys,
                                       const double* ex, const double* wrow, double sigma, double scale, bool norm,
                                       double* gs, double* hs, double* tmp) {
        if (norm) return rw_logistic_row_t<true>(p, start, n, ss, ys, ex, wrow, sigma, scale, gs, hs, tmp);
        return rw_logistic_row_t<false>(p, start, n, ss, ys, ex, wrow, sigma, scale, gs, hs, tmp);
    }

    /* The value of the same row: sum wt softplus(x), x = -σ d, with softplus(x) = log(E_i + E_j) - log E_i
       (log E_i = σ (s_i - m), m = max s) below torch's threshold 20 and x above it: one log per pair. Three
       passes: the logs alone (a loop of calls keeps nothing else live across them), the terms (vectorised),
       their sum. */
    template <bool norm>
    static inline __attribute__((always_inline)) double rw_logistic_row_value_t(
            int64_t p, int64_t start, int64_t n, double m, const double* __restrict ss, const double* __restrict ys,
            const double* __restrict ex, const double* __restrict wrow, double sigma, double scale,
            double* __restrict tmp) {
        const double sp = ss[p];
        const double yp = ys[p];
        const double ep = ex[p];
        double* __restrict lg = tmp;
        double* __restrict term = tmp + n;
        for (int64_t q = start; q < n; ++q) lg[q] = std::log(ep + ex[q]);
        for (int64_t q = start; q < n; ++q) {
            const double yq = ys[q];
            const double sq = ss[q];
            const bool better = yp > yq;
            const double d_hi = sp - sq;
            const double d_lo = sq - sp;
            const double d = better ? d_hi : d_lo;
            const double x = -sigma * d;
            const double s_hi = better ? sp : sq;
            const double log_hi = sigma * (s_hi - m);
            const double sp_below = lg[q] - log_hi;
            const double f = x > 20.0 ? x : sp_below;
            const double cn = 0.01 + std::fabs(d);
            const double c = norm ? cn : 1.0;
            term[q] = (wrow[q] / c) * f;
        }
        return rw_lane_sum(term, start, n) * scale;
    }

    RW_VECTOR_CLONES
    static double rw_logistic_row_value(int64_t p, int64_t start, int64_t n, double m, const double* ss,
                                        const double* ys, const double* ex, const double* wrow, double sigma,
                                        double scale, bool norm, double* tmp) {
        if (norm) return rw_logistic_row_value_t<true>(p, start, n, m, ss, ys, ex, wrow, sigma, scale, tmp);
        return rw_logistic_row_value_t<false>(p, start, n, m, ss, ys, ex, wrow, sigma, scale, tmp);
    }

    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC pop_options
    #endif
    """
    ctypedef struct rw_row_sums:
        double g
        double h
        double sl
    void rw_pair_weight_row(int scheme, int64_t p, int64_t start, int64_t n, const double* ys, const double* ws,
                            const double* gain, const double* inv_d, const int64_t* pos, const double* delta,
                            double inv_idcg, double mu, double* wrow, bint by_position) nogil
    rw_row_sums rw_logistic_row(int64_t p, int64_t start, int64_t n, const double* ss, const double* ys,
                                const double* ex, const double* wrow, double sigma, double scale, bint norm,
                                double* gs, double* hs, double* tmp) nogil
    double rw_logistic_row_value(int64_t p, int64_t start, int64_t n, double m, const double* ss, const double* ys,
                                 const double* ex, const double* wrow, double sigma, double scale, bint norm,
                                 double* tmp) nogil


# ----------------------------------------------------------------------------------- scalar helpers

ctypedef (double, double, double) triple


cdef inline double _pmax(double a, double b) noexcept nogil:
    # Python's max(a, b): a unless b is greater
    return b if b > a else a


cdef inline double _pmin(double a, double b) noexcept nogil:
    # Python's min(a, b): a unless b is smaller
    return b if b < a else a


cdef inline double _nanmax(const double* x, int64_t n) noexcept nogil:
    # np.max: NaN if any entry is NaN
    cdef double m = x[0]
    cdef int64_t i
    for i in range(n):
        if x[i] != x[i]:
            return NAN
        if x[i] > m:
            m = x[i]
    return m


cdef inline double _sigmoid(double x) noexcept nogil:
    cdef double e
    if x >= 0.0:
        return 1.0 / (1.0 + exp(-x))
    e = exp(x)
    return e / (1.0 + e)


cdef inline double _softplus(double x) noexcept nogil:
    # torch.nn.functional.softplus (beta 1, threshold 20): linear above the threshold
    if x > 20.0:
        return x
    if x > 0.0:
        return x + log1p(exp(-x))
    return log1p(exp(x))


cdef inline double _softplus_d(double x) noexcept nogil:
    # its derivative as torch computes it: 1 above the threshold, sigmoid(x) below
    if x > 20.0:
        return 1.0
    return _sigmoid(x)


cdef inline triple _phi(int kind, double d, double sigma, double scale) noexcept nogil:
    """(phi(d), phi'(d), phi''(d)) for the pair functions of the pairwise losses."""
    cdef double x, t, tc, e, r
    if kind == PHI_LOGISTIC:
        x = -sigma * d
        return (scale * _softplus(x), -sigma * scale * _softplus_d(x),
                sigma * sigma * scale * _sigmoid(x) * _sigmoid(-x))
    if kind == PHI_HINGE:
        if d < 1.0:
            return 1.0 - d, -1.0, 0.0
        return 0.0, 0.0, 0.0
    if kind == PHI_EXP:
        t = -d
        tc = _pmin(t, C_EXP_CLIP)
        e = exp(tc)
        return e * (1.0 + (t - tc)), -e, (e if t < C_EXP_CLIP else 0.0)
    r = _pmax(0.0, 1.0 - d)
    return r * r, -2.0 * r, (2.0 if d < 1.0 else 0.0)


cdef inline triple _phi_fast(int kind, double d, double sigma, double scale) noexcept nogil:
    """``_phi`` with one exponential per call for the logistic (the general pair loop)."""
    cdef double x, e, inv, sx, sxc, f, d1
    if kind != PHI_LOGISTIC:
        return _phi(kind, d, sigma, scale)
    x = -sigma * d
    e = exp(-fabs(x))
    inv = 1.0 / (1.0 + e)
    sx = inv if x >= 0.0 else e * inv  # sigmoid(x)
    sxc = e * inv if x >= 0.0 else inv  # sigmoid(-x)
    f = x if x > 20.0 else _pmax(x, 0.0) + log1p(e)  # torch's softplus (linear beyond 20)
    d1 = 1.0 if x > 20.0 else sx
    return scale * f, -sigma * scale * d1, sigma * sigma * scale * sx * sxc


cdef inline double _inv_log2p1(double r) noexcept nogil:
    return 1.0 / log2(1.0 + r)


cdef inline bint _is_grade(double y) noexcept nogil:
    return 0.0 <= y < 64.0 and y == floor(y)


cdef void _gains(const double* y, int64_t n, bint exp2, double* g) noexcept nogil:
    """Gains 2^y - 1 (or y) divided by the list's largest one when it is positive (as
    ``scaled_gains``: NDCG-type ratios unchanged, no overflow of a DCG sum)."""
    cdef double top = 0.0
    cdef double yi
    cdef int64_t i
    for i in range(n):
        yi = y[i]
        if not exp2:
            g[i] = yi
        elif _is_grade(yi):
            g[i] = ldexp(1.0, <int>yi) - 1.0  # = 2.0 ** yi - 1 for a grade, without pow
        else:
            g[i] = pow(2.0, yi) - 1.0
        if g[i] > top:
            top = g[i]
    if top > 0.0:
        for i in range(n):
            g[i] = g[i] / top


cdef double _ideal_dcg(const double* g, int64_t n, int64_t k, double* buf) noexcept nogil:
    """max DCG@k of gains g (all items when k <= 0); ``buf``: n doubles of scratch."""
    cdef int64_t p, kk
    cdef double total = 0.0
    for p in range(n):
        buf[p] = -g[p]
    sort_f64(buf, n)  # -np.sort(-g): decreasing, NaN last
    kk = n if k <= 0 else min(k, n)
    for p in range(kk):
        total += (-buf[p]) / log2(2.0 + p)
    return total


cdef double _ideal_dcg_graded(const double* y, const double* g, int64_t n, int64_t k, const double* inv_d,
                              double* buf) noexcept nogil:
    """``_ideal_dcg(g, k)`` for gains ``g`` of labels ``y`` (any order) with the discount table ``inv_d``
    (reciprocals): where every label is a grade 0..63 the gains in decreasing order are a count per grade
    (no sort; the same terms in the same order), otherwise the sort."""
    cdef int64_t counts[64]
    cdef double gain_of[64]
    cdef int64_t i, kk, p, grade, c
    cdef double yi, total
    for i in range(64):
        counts[i] = 0
        gain_of[i] = 0.0
    for i in range(n):
        yi = y[i]
        if not _is_grade(yi):
            return _ideal_dcg(g, n, k, buf)
        counts[<int>yi] += 1
        gain_of[<int>yi] = g[i]
    kk = n if k <= 0 else min(k, n)
    total = 0.0
    p = 0
    for grade in range(63, -1, -1):
        for c in range(counts[grade]):
            if p >= kk:
                return total
            total += gain_of[grade] * inv_d[p]
            p += 1
    return total


cdef inline bint _uses_gains(int scheme) noexcept nogil:
    return scheme == W_NDCG or (W_LL_NDCG2 <= scheme <= W_LL_NDCG2PP)


cdef void _discounts(int64_t n, double* inv_d, double* delta) noexcept nogil:
    """inv_d[p] = 1/log2(2 + p) for positions p <= n, and δ(k) = |1/log2(1 + k) - 1/log2(2 + k)| for
    1 <= k < n (0 at k = 0 and k = n); both n + 1 entries."""
    cdef int64_t p, k
    for p in range(n + 1):
        inv_d[p] = 1.0 / log2(2.0 + p)
        delta[p] = 0.0
    for k in range(1, n):
        delta[k] = fabs(inv_d[k - 1] - inv_d[k])


cdef void _label_groups(const double* ys, int64_t n, int64_t* order, int64_t* ends, double* key) noexcept nogil:
    """Items stably grouped by decreasing label (a count per grade where every label is a grade 0..63, a
    stable sort otherwise) and, for each grouped item, where its group ends. ``key``: n doubles of scratch."""
    cdef bint graded = True
    cdef int64_t first[65]
    cdef int64_t i, k, a, end
    for i in range(n):
        if not _is_grade(ys[i]):
            graded = False
            break
    if graded:
        for k in range(65):
            first[k] = 0  # grade 63 first
        for i in range(n):
            first[64 - <int>ys[i]] += 1
        for k in range(1, 65):
            first[k] += first[k - 1]
        for i in range(n):
            k = 63 - <int>ys[i]
            order[first[k]] = i
            first[k] += 1
    else:
        for i in range(n):
            key[i] = -ys[i]
        argsort_f64(key, n, order)
    end = n
    for a in range(n - 1, -1, -1):
        if a < n - 1 and ys[order[a]] != ys[order[a + 1]]:
            end = a + 1
        ends[a] = end


# ------------------------------------------------------------------------------------ pair losses

cdef struct PairScratch:
    # n doubles each (n: the longest query of the batch)
    double* key
    double* ss
    double* ys
    double* ws
    double* vs
    double* gs
    double* hs
    double* gain
    double* ex
    double* wrow
    double* ls
    double* ly
    double* lw
    double* le
    double* lg
    double* ld
    double* lgs
    double* lhs
    # 3n doubles: the terms of a row of logistic pairs
    double* tmp
    # n int64 each
    int64_t* order
    int64_t* gorder
    int64_t* ends
    # n + 1 doubles each: the discount tables of _discounts
    double* inv_d
    double* delta


cdef (double, double) _logistic_pairs(int scheme, int64_t n, PairScratch* sc, bint has_gain, double inv_idcg,
                                      double mu, double sigma, double scale, int64_t top, bint norm,
                                      bint want_value) noexcept nogil:
    """Every weighted logistic pair of a query whose scores (``sc.ss``, in score order) span at most
    ``_FAST_SPREAD / σ``: the weights of a row, then its pairs from the per-item exponentials (one division
    per pair instead of an exp, a log1p and a division), then, only with ``want_value``, its values; adds
    to ``sc.gs``/``sc.hs``, returns (value, Σ 2|λ|).

    Truncated (``top < n``): rows p < top of the score order, pairs (p, q > p). Untruncated: the items
    grouped by label, each row paired only with the items of lower labels (a pair of equal labels has
    weight 0: none of them is visited; with graded labels that is 40 % of MSLR's)."""
    cdef double* ss = sc.ss
    cdef double* ys = sc.ys
    cdef double* ex = sc.ex
    cdef double m = ss[0]
    cdef double value = 0.0
    cdef double sum_lambda = 0.0
    cdef int64_t p, a, i, b0
    cdef rw_row_sums r
    for p in range(n):
        ex[p] = exp(sigma * (ss[p] - m))
    if top < n:  # the ranking order itself: distances q - p
        for p in range(top):
            rw_pair_weight_row(scheme, p, p + 1, n, ys, sc.ws, sc.gain, sc.inv_d, NULL, sc.delta, inv_idcg, mu,
                               sc.wrow, True)
            r = rw_logistic_row(p, p + 1, n, ss, ys, ex, sc.wrow, sigma, scale, norm, sc.gs, sc.hs, sc.tmp)
            sc.gs[p] += r.g
            sc.hs[p] += r.h
            sum_lambda += r.sl
            if want_value:
                value += rw_logistic_row_value(p, p + 1, n, m, ss, ys, ex, sc.wrow, sigma, scale, norm, sc.tmp)
        return value, sum_lambda
    _label_groups(ys, n, sc.gorder, sc.ends, sc.key)
    for a in range(n):
        i = sc.gorder[a]
        sc.ls[a] = ss[i]
        sc.ly[a] = ys[i]
        sc.lw[a] = sc.ws[i]
        sc.le[a] = ex[i]
        sc.lg[a] = sc.gain[i] if has_gain else 0.0
        sc.ld[a] = sc.inv_d[i] if has_gain else 0.0
        sc.lgs[a] = 0.0
        sc.lhs[a] = 0.0
    for a in range(n):
        b0 = sc.ends[a]
        if b0 >= n:
            break
        rw_pair_weight_row(scheme, a, b0, n, sc.ly, sc.lw, sc.lg, sc.ld, sc.gorder, sc.delta, inv_idcg, mu,
                           sc.wrow, False)
        r = rw_logistic_row(a, b0, n, sc.ls, sc.ly, sc.le, sc.wrow, sigma, scale, norm, sc.lgs, sc.lhs, sc.tmp)
        sc.lgs[a] += r.g
        sc.lhs[a] += r.h
        sum_lambda += r.sl
        if want_value:
            value += rw_logistic_row_value(a, b0, n, m, sc.ls, sc.ly, sc.le, sc.wrow, sigma, scale, norm, sc.tmp)
    for a in range(n):
        sc.gs[sc.gorder[a]] = sc.lgs[a]
        sc.hs[sc.gorder[a]] = sc.lhs[a]
    return value, sum_lambda


cdef (double, bint) _pair_query(const double* s, const double* y, const double* w, const double* v, int64_t n,
                                int scheme, int phi, double sigma, double scale, int64_t trunc, bint norm, double mu,
                                bint exp2, bint want_value, double* g, double* h, PairScratch* sc) noexcept nogil:
    """One query of a pair-form loss: returns (value, counts) and fills g, h (zeroed by the caller).

    Pairs: y_i > y_j (``W_OP``: every ordered pair i != j, weight v_i; ``W_LL_NDCG1``: every ordered pair
    i != j, whatever the labels), visited in the order of the scores (items copied into score order once, so
    the loops run over contiguous memory), so that with ``trunc`` > 0 only pairs with an item in the top
    ``trunc`` positions are seen. The weight of a pair (i above j in the label order) before item weights and
    1/maxDCG: ``W_NDCG``/``W_LL_LAMBDARANK``: |G_i - G_j| |1/D_i - 1/D_j|; ``W_LL_NDCG1``: G_i / D_i;
    ``W_LL_NDCG2``: δ(|r_i - r_j|) |G_i - G_j|; ``W_LL_NDCG2PP``: μ NDCG2 + LambdaRank; ``W_LABEL``:
    y_i - y_j; ``W_NONE``: 1. ``sc.inv_d``, ``sc.delta``: the discount tables of :func:`_discounts` for at
    least n positions.

    The logistic pairs (all but ``W_OP``) run on :func:`_logistic_pairs` where the query's score spread
    allows it, the other pairs on the general loop below (one ``_phi_fast`` per pair)."""
    cdef bint ok, all_equal, nrm
    cdef int64_t i, j, p, q, side, top
    cdef double inv_idcg, idcg, value, sum_lambda, wt, dg, d, f, d1, d2, factor
    cdef double* ss = sc.ss
    cdef double* ys = sc.ys
    cdef double* ws = sc.ws
    cdef double* vs = sc.vs
    cdef double* gs = sc.gs
    cdef double* hs = sc.hs
    cdef double* gain = sc.gain
    cdef double* inv_d = sc.inv_d
    cdef double* delta = sc.delta
    cdef int64_t* order = sc.order
    if n < 2:
        return 0.0, False
    ok = scheme == W_OP or scheme == W_LL_NDCG1  # NDCG-Loss1: every ordered pair, whatever the labels
    if not ok:
        for i in range(1, n):
            if y[i] != y[0]:
                ok = True
                break
    if not ok:
        return 0.0, False
    for p in range(n):
        sc.key[p] = -s[p]
    argsort_f64(sc.key, n, order)  # stable: input order breaks ties
    for p in range(n):
        ss[p] = s[order[p]]
        ys[p] = y[order[p]]
        ws[p] = w[order[p]]
        vs[p] = v[order[p]]
        gs[p] = 0.0
        hs[p] = 0.0
    inv_idcg = 1.0
    if _uses_gains(scheme):
        _gains(ys, n, exp2, gain)
        idcg = _ideal_dcg_graded(ys, gain, n, trunc, inv_d, sc.key)
        if not idcg > 0.0:
            return 0.0, scheme != W_LL_NDCG1
        inv_idcg = 1.0 / idcg
    all_equal = ss[0] == ss[n - 1]
    nrm = norm and not all_equal
    top = n if trunc <= 0 else min(trunc, n)
    value = 0.0
    sum_lambda = 0.0
    # the fast loops see only pairs of different labels: not W_OP, nor NDCG-Loss1 (every ordered pair)
    if (phi == PHI_LOGISTIC and scheme != W_OP and scheme != W_LL_NDCG1
            and sigma * (ss[0] - ss[n - 1]) <= C_FAST_SPREAD):
        value, sum_lambda = _logistic_pairs(scheme, n, sc, _uses_gains(scheme), inv_idcg, mu, sigma, scale, top,
                                            nrm, want_value)
        top = 0
    for p in range(top):
        for q in range(p + 1, n):
            for side in range(2):
                if scheme == W_OP:
                    i, j = (p, q) if side == 0 else (q, p)
                    wt = vs[i] * ws[i] * ws[j]
                else:
                    if scheme == W_LL_NDCG1:
                        i, j = (p, q) if side == 0 else (q, p)
                    elif side == 1 or ys[p] == ys[q]:
                        continue
                    else:
                        i, j = (p, q) if ys[p] > ys[q] else (q, p)
                    wt = ws[i] * ws[j]
                    if scheme == W_LABEL:
                        wt *= ys[i] - ys[j]
                    elif scheme != W_NONE:
                        dg = fabs(gain[i] - gain[j])
                        if scheme == W_NDCG or scheme == W_LL_LAMBDARANK:
                            wt *= dg * fabs(inv_d[i] - inv_d[j])
                        elif scheme == W_LL_NDCG1:
                            wt *= gain[i] * inv_d[i]
                        elif scheme == W_LL_NDCG2:
                            wt *= delta[q - p] * dg
                        else:
                            wt *= mu * delta[q - p] * dg + dg * fabs(inv_d[i] - inv_d[j])
                        wt *= inv_idcg
                if wt == 0.0:
                    continue
                d = ss[i] - ss[j]
                if nrm:
                    wt = wt / (0.01 + fabs(d))
                f, d1, d2 = _phi_fast(phi, d, sigma, scale)
                value += wt * f
                gs[i] += wt * d1
                gs[j] -= wt * d1
                hs[i] += wt * d2
                hs[j] += wt * d2
                sum_lambda += 2.0 * fabs(wt * d1)
    factor = 1.0
    if norm and sum_lambda > 0.0:
        factor = log2(1.0 + sum_lambda) / sum_lambda
    for p in range(n):
        g[order[p]] = gs[p] * factor
        h[order[p]] = hs[p] * factor
    return value * factor, True


cdef int64_t _longest(const int64_t[::1] off, int64_t q0, int64_t q1):
    cdef int64_t q, longest = 0
    for q in range(q0, q1):
        longest = max(longest, off[q + 1] - off[q])
    return longest


def _pair_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                const int64_t[::1] off, int64_t q0, int64_t q1, int scheme, int phi, double sigma, double scale,
                int64_t trunc, bint norm, double mu, bint exp2, bint want_value, double[::1] out_v,
                unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t nmax = _longest(off, q0, q1)
    cdef int64_t m = nmax + 1
    fbuf_a = np.zeros(21 * m + 2 * (nmax + 1))
    ibuf_a = np.zeros(3 * m, dtype=np.int64)
    cdef double[::1] fbuf = fbuf_a
    cdef int64_t[::1] ibuf = ibuf_a
    cdef PairScratch sc
    cdef double* fb = &fbuf[0]
    cdef int64_t* ib = &ibuf[0]
    sc.key, sc.ss, sc.ys, sc.ws, sc.vs, sc.gs = fb, fb + m, fb + 2 * m, fb + 3 * m, fb + 4 * m, fb + 5 * m
    sc.hs, sc.gain, sc.ex, sc.wrow = fb + 6 * m, fb + 7 * m, fb + 8 * m, fb + 9 * m
    sc.ls, sc.ly, sc.lw, sc.le = fb + 10 * m, fb + 11 * m, fb + 12 * m, fb + 13 * m
    sc.lg, sc.ld, sc.lgs, sc.lhs = fb + 14 * m, fb + 15 * m, fb + 16 * m, fb + 17 * m
    sc.tmp = fb + 18 * m
    sc.inv_d, sc.delta = fb + 21 * m, fb + 21 * m + (nmax + 1)
    sc.order, sc.gorder, sc.ends = ib, ib + m, ib + 2 * m
    cdef int64_t q, a, b
    cdef double val
    cdef bint ok
    with nogil:
        _discounts(nmax, sc.inv_d, sc.delta)  # once per batch, not per query
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            val, ok = _pair_query(&s[0] + a, &y[0] + a, &w[0] + a, &v[0] + a, b - a, scheme, phi, sigma, scale,
                                  trunc, norm, mu, exp2, want_value, &out_g[0] + a, &out_h[0] + a, &sc)
            out_v[q] = val
            out_ok[q] = ok


cdef (double, bint) _given_pair_query(const double* s, const double* w, const double* pw, int64_t n, int scheme,
                                      int phi, double sigma, double scale, int64_t trunc, bint norm, double mu,
                                      double* g, double* h, double* key, int64_t* order, int64_t* rank,
                                      const double* inv_d, const double* delta) noexcept nogil:
    """One query of a pair-form loss on given pair weights ``pw`` (the query's n x n block, row-major:
    ``pw[i n + j]`` weighs the pair "i above j"): returns (value, counts) and fills g, h (zeroed by the
    caller). The labels choose nothing: every ordered pair i != j of nonzero given weight is visited, in
    input order (i, then j), with weight pw[i, j] w_i w_j times the scheme's weight at gain difference 1 and
    max DCG 1 (``W_NDCG``/``W_LL_LAMBDARANK``: |1/D_i - 1/D_j|; ``W_LL_NDCG2``: δ(|r_i - r_j|);
    ``W_LL_NDCG2PP``: μ δ + |1/D_i - 1/D_j|; ``W_NONE``/``W_LABEL``: 1), r the current ranks (scores
    descending, ties in input order) and D_i = log2(2 + r_i); with ``trunc`` > 0 only pairs with an item
    ranked in the top ``trunc``; ``norm`` as :func:`_pair_query`."""
    cdef int64_t i, j, ri, rj, dist
    cdef double m, wt, d, f, d1, d2, value = 0.0, sum_lambda = 0.0, factor = 1.0
    cdef bint ok = False, nrm
    if n < 2:
        return 0.0, False
    for i in range(n):
        key[i] = -s[i]
    argsort_f64(key, n, order)  # stable: input order breaks ties
    for i in range(n):
        rank[order[i]] = i
    nrm = norm and s[order[0]] != s[order[n - 1]]
    for i in range(n):
        ri = rank[i]
        for j in range(n):
            m = pw[i * n + j]
            if m == 0.0 or i == j:
                continue
            rj = rank[j]
            if trunc > 0 and ri >= trunc and rj >= trunc:
                continue
            ok = True
            wt = m * w[i] * w[j]
            dist = ri - rj if ri > rj else rj - ri
            if scheme == W_NDCG or scheme == W_LL_LAMBDARANK:
                wt *= fabs(inv_d[ri] - inv_d[rj])
            elif scheme == W_LL_NDCG2:
                wt *= delta[dist]
            elif scheme == W_LL_NDCG2PP:
                wt *= mu * delta[dist] + fabs(inv_d[ri] - inv_d[rj])
            if wt == 0.0:
                continue
            d = s[i] - s[j]
            if nrm:
                wt = wt / (0.01 + fabs(d))
            f, d1, d2 = _phi_fast(phi, d, sigma, scale)
            value += wt * f
            g[i] += wt * d1
            g[j] -= wt * d1
            h[i] += wt * d2
            h[j] += wt * d2
            sum_lambda += 2.0 * fabs(wt * d1)
    if norm and sum_lambda > 0.0:
        factor = log2(1.0 + sum_lambda) / sum_lambda
        for i in range(n):
            g[i] *= factor
            h[i] *= factor
    return value * factor, ok


def _given_pair_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                      const int64_t[::1] off, int64_t q0, int64_t q1, const double[::1] pw,
                      const int64_t[::1] pw_off, int scheme, int phi, double sigma, double scale, int64_t trunc,
                      bint norm, double mu, bint exp2, bint want_value, double[::1] out_v, unsigned char[::1] out_ok,
                      double[::1] out_g, double[::1] out_h):
    """:func:`_pair_batch` on given pair weights (:func:`_given_pair_query`): query q's block is
    ``pw[pw_off[q]:pw_off[q + 1]]`` (n_q² entries). ``y``, ``v`` and ``exp2`` are not read (the pairs and
    their weights are given); the value is always computed."""
    cdef int64_t nmax = _longest(off, q0, q1)
    fbuf_a = np.zeros(3 * (nmax + 1))
    ibuf_a = np.zeros(2 * (nmax + 1), dtype=np.int64)
    cdef double[::1] fbuf = fbuf_a
    cdef int64_t[::1] ibuf = ibuf_a
    cdef double* key = &fbuf[0]
    cdef double* inv_d = key + (nmax + 1)
    cdef double* delta = inv_d + (nmax + 1)
    cdef int64_t* order = &ibuf[0]
    cdef int64_t* rank = order + (nmax + 1)
    cdef int64_t q, a, b
    cdef double val
    cdef bint ok
    with nogil:
        _discounts(nmax, inv_d, delta)
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            if b - a < 2:
                continue
            val, ok = _given_pair_query(&s[0] + a, &w[0] + a, &pw[0] + pw_off[q], b - a, scheme, phi, sigma, scale,
                                        trunc, norm, mu, &out_g[0] + a, &out_h[0] + a, key, order, rank, inv_d,
                                        delta)
            out_v[q] = val
            out_ok[q] = ok


# ------------------------------------------------------------------------------------- listwise


def _listnet_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                   const int64_t[::1] off, int64_t q0, int64_t q1, double tau, double[::1] out_v,
                   unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t q, a, b, i
    cdef double my, ms, zy, zs, lzs, c, val, py, p
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            if b == a:
                continue
            my = _nanmax(&y[0] + a, b - a)
            ms = _nanmax(&s[0] + a, b - a) / tau
            zy = 0.0
            zs = 0.0
            for i in range(a, b):
                zy += exp(y[i] - my)
                zs += exp(s[i] / tau - ms)
            lzs = log(zs) + ms
            c = 0.0
            val = 0.0
            for i in range(a, b):
                py = exp(y[i] - my) / zy
                c += w[i] * py
                val -= w[i] * py * (s[i] / tau - lzs)
            for i in range(a, b):
                py = exp(y[i] - my) / zy
                p = exp(s[i] / tau - lzs)
                out_g[i] = (c * p - w[i] * py) / tau
                out_h[i] = c * p * (1.0 - p) / (tau * tau)
            out_v[q] = val
            out_ok[q] = True


def _listmle_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                   const int64_t[::1] off, int64_t q0, int64_t q1, double[::1] out_v, unsigned char[::1] out_ok,
                   double[::1] out_g, double[::1] out_h):
    cdef int64_t nmax = _longest(off, q0, q1)
    buf_a = np.zeros(4 * (nmax + 1))
    order_a = np.zeros(nmax + 1, dtype=np.int64)
    cdef double[::1] buf = buf_a
    cdef int64_t[::1] order_v = order_a
    cdef double* key = &buf[0]
    cdef double* z = key + (nmax + 1)
    cdef double* ws = z + (nmax + 1)
    cdef double* lse = ws + (nmax + 1)
    cdef int64_t* order = &order_v[0]
    cdef int64_t q, a, b, n, k, i
    cdef double run, m, val, s1, s2, r, p
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            n = b - a
            if n == 0:
                continue
            for k in range(n):
                key[k] = -y[a + k]
            argsort_f64(key, n, order)
            for k in range(n):
                z[k] = s[a + order[k]]
                ws[k] = w[a + order[k]]
            run = -INFINITY  # log-sum-exp over the suffix k..n-1
            for k in range(n - 1, -1, -1):
                m = _pmax(run, z[k])
                run = m + log(exp(run - m) + exp(z[k] - m))
                lse[k] = run
            val = 0.0
            for k in range(n):
                val += ws[k] * (lse[k] - z[k])
            # O(n): with p_ik = exp(z_i - lse_k) (k <= i), g_i = -w_i + sum_k w_k p_ik and
            # h_i = sum_k w_k p_ik (1 - p_ik) = p_ii S_i - p_ii^2 T_i, where
            # S_i = sum_{k<=i} w_k exp(lse_i - lse_k) and T_i = sum_{k<=i} w_k exp(2 (lse_i - lse_k))
            # (lse is non-increasing, so every exponent is <= 0: no overflow at any score).
            s1 = 0.0
            s2 = 0.0
            for i in range(n):
                if i > 0:
                    r = exp(lse[i] - lse[i - 1])
                    s1 = s1 * r
                    s2 = s2 * r * r
                s1 += ws[i]
                s2 += ws[i]
                p = exp(z[i] - lse[i])
                out_g[a + order[i]] = p * s1 - ws[i]
                out_h[a + order[i]] = p * s1 - p * p * s2
            out_v[q] = val
            out_ok[q] = True


def _approx_ndcg_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                       const int64_t[::1] off, int64_t q0, int64_t q1, double alpha, bint exp2, double[::1] out_v,
                       unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t nmax = _longest(off, q0, q1)
    buf_a = np.zeros(4 * (nmax + 1))
    cdef double[::1] buf = buf_a
    cdef double* g = &buf[0]
    cdef double* pos = g + (nmax + 1)
    cdef double* coef = pos + (nmax + 1)
    cdef double* tmp = coef + (nmax + 1)
    cdef int64_t q, a, b, n, i, j
    cdef double idcg, val, lp, gi, sg
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            n = b - a
            if n == 0:
                continue
            _gains(&y[0] + a, n, exp2, g)
            idcg = _ideal_dcg(g, n, 0, tmp)
            if not idcg > 0.0:
                continue
            for i in range(n):
                pos[i] = 1.0
                for j in range(n):
                    if i != j:
                        pos[i] += _sigmoid(-alpha * (s[a + i] - s[a + j]))
            val = 0.0
            for i in range(n):
                lp = log2(1.0 + pos[i])
                val -= w[a + i] * g[i] / lp / idcg
                # d(-G/log2(1+pos))/dpos, over idcg
                coef[i] = w[a + i] * g[i] / (lp * lp * (1.0 + pos[i]) * C_LN2) / idcg
            for i in range(n):
                gi = 0.0
                for j in range(n):
                    if i != j:
                        sg = _sigmoid(-alpha * (s[a + i] - s[a + j]))
                        gi -= alpha * sg * (1.0 - sg) * (coef[i] - coef[j])
                out_g[a + i] = gi
            out_v[q] = val
            out_ok[q] = True


def _smooth_dcg_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                      const int64_t[::1] off, int64_t q0, int64_t q1, int64_t k, double sigma, bint exp2,
                      double[::1] out_v, unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t nmax = _longest(off, q0, q1)
    buf_a = np.zeros(3 * (nmax + 1))
    order_a = np.zeros(nmax + 1, dtype=np.int64)
    cdef double[::1] buf = buf_a
    cdef int64_t[::1] order_v = order_a
    cdef double* g0 = &buf[0]
    cdef double* hcol = g0 + (nmax + 1)
    cdef double* key = hcol + (nmax + 1)
    cdef int64_t* order = &order_v[0]
    cdef int64_t q, a, b, n, i, j, kk
    cdef double idcg, lim, val, t, c, m, dd, e, z, u, gt, r
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            n = b - a
            if n == 0:
                continue
            _gains(&y[0] + a, n, exp2, g0)
            idcg = _ideal_dcg(g0, n, k, key)
            if not idcg > 0.0:
                continue
            for i in range(n):
                key[i] = -s[a + i]
            argsort_f64(key, n, order)
            kk = min(k, n)
            lim = sqrt(800.0 * sigma)
            val = 0.0
            for j in range(kk):
                t = s[a + order[j]]
                c = -_inv_log2p1(j + 1.0) / idcg
                m = -INFINITY
                for i in range(n):
                    dd = _pmin(_pmax(s[a + i] - t, -lim), lim)  # as the torch form: h = e^-800 = 0 beyond
                    e = -(dd * dd) / sigma
                    hcol[i] = e
                    if e > m:
                        m = e
                z = 0.0
                for i in range(n):
                    hcol[i] = exp(hcol[i] - m)
                    z += hcol[i]
                u = 0.0
                for i in range(n):
                    hcol[i] /= z
                    u += g0[i] * w[a + i] * hcol[i]
                val += c * u
                gt = 0.0
                for i in range(n):
                    if hcol[i] == 0.0:
                        continue
                    dd = _pmin(_pmax(s[a + i] - t, -lim), lim)
                    if dd != s[a + i] - t:
                        continue  # clamped: no gradient (as torch.clamp)
                    r = c * hcol[i] * (g0[i] * w[a + i] - u) * 2.0 * dd / sigma
                    out_g[a + i] -= r
                    gt += r
                out_g[a + order[j]] += gt
            out_v[q] = val
            out_ok[q] = True


def _smooth_dcg1_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                       const int64_t[::1] off, int64_t q0, int64_t q1, double sigma, double[::1] out_v,
                       unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t q, a, b, i
    cdef double m, z, mean, p
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            if b == a:
                continue
            m = _nanmax(&s[0] + a, b - a) / sigma
            z = 0.0
            for i in range(a, b):
                z += exp(s[i] / sigma - m)
            mean = 0.0
            for i in range(a, b):
                mean += exp(s[i] / sigma - m) / z * v[i] * w[i]
            for i in range(a, b):
                p = exp(s[i] / sigma - m) / z
                out_g[i] = -p * (v[i] * w[i] - mean) / sigma
            out_v[q] = -mean
            out_ok[q] = True


def _pairwise_squared_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                            const int64_t[::1] off, int64_t q0, int64_t q1, double[::1] out_v,
                            unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef int64_t q, a, b, i
    cdef double sw, swa, abar, val, r
    with nogil:
        for q in range(q0, q1):
            a = off[q]
            b = off[q + 1]
            if b - a < 2:
                continue
            sw = 0.0
            swa = 0.0
            for i in range(a, b):
                sw += w[i]
                swa += w[i] * (v[i] - s[i])
            abar = swa / sw if sw > 0.0 else 0.0
            val = 0.0
            for i in range(a, b):
                r = v[i] - s[i] - abar
                val += w[i] * r * r
                out_g[i] = -2.0 * w[i] * sw * r
                out_h[i] = 2.0 * w[i] * (sw - w[i])
            out_v[q] = sw * val
            out_ok[q] = True


# ------------------------------------------------------------------------------------ pointwise


cdef inline triple _safe_exp3(double t) noexcept nogil:
    """safe_exp(t) with its first and second derivatives (exp continued linearly above 50)."""
    cdef double tc = _pmin(t, C_EXP_CLIP)
    cdef double e = exp(tc)
    return e * (1.0 + (t - tc)), e, (e if t < C_EXP_CLIP else 0.0)


cdef inline triple _smooth_hinge3(double x, double alpha) noexcept nogil:
    cdef double xc = _pmin(_pmax(x, 0.0), alpha)
    cdef double inside = 1.0 if (x >= 0.0 and x <= alpha) else 0.0
    cdef double f = xc * xc / (2.0 * alpha) + _pmax(x - alpha, 0.0)
    cdef double d1 = xc / alpha * inside + (1.0 if x > alpha else 0.0)
    return f, d1, inside / alpha


cdef inline triple _pointwise_term(int kind, double x, double vi, double eta, double t, double alpha) noexcept nogil:
    """(f, f', f'') of one row's pointwise term at score x, utility vi."""
    cdef double fm, d1m, d2m, fp, d1p, d2p, rm, rp, ge, g1, g2, vlogv, u
    if kind == PT_SQUARED:
        return (vi - x) * (vi - x), -2.0 * (vi - x), 2.0
    if kind == PT_LOGISTIC:
        # torch's softplus is linear beyond 20: no curvature there
        return (vi * _softplus(-x) + (eta - vi) * _softplus(x),
                -vi * _softplus_d(-x) + (eta - vi) * _softplus_d(x),
                (vi * (0.0 if -x > 20.0 else 1.0) + (eta - vi) * (0.0 if x > 20.0 else 1.0))
                * _sigmoid(x) * _sigmoid(-x))
    if kind == PT_EXP:
        fm, d1m, d2m = _safe_exp3(-x)
        fp, d1p, d2p = _safe_exp3(x)
        return vi * fm + (eta - vi) * fp, -vi * d1m + (eta - vi) * d1p, vi * d2m + (eta - vi) * d2p
    if kind == PT_SQHINGE:
        rm = _pmax(t - x, 0.0)
        rp = _pmax(x, 0.0)
        return (vi * rm * rm + (eta - vi) * rp * rp, -2.0 * vi * rm + 2.0 * (eta - vi) * rp,
                2.0 * vi * (1.0 if t - x > 0.0 else 0.0) + 2.0 * (eta - vi) * (1.0 if x > 0.0 else 0.0))
    if kind == PT_SMOOTHHINGE:
        fm, d1m, d2m = _smooth_hinge3(1.0 - x, alpha)
        fp, d1p, d2p = _smooth_hinge3(x, alpha)
        return vi * fm + (eta - vi) * fp, -vi * d1m + (eta - vi) * d1p, vi * d2m + (eta - vi) * d2p
    if kind == PT_BREG_SQ_ID:
        return 0.5 * ((vi - x) * (vi - x)), x - vi, 1.0
    if kind == PT_BREG_SQ_EXP:
        ge, g1, g2 = _safe_exp3(x)
        return 0.5 * ((vi - ge) * (vi - ge)), (ge - vi) * g1, g1 * g1 + (ge - vi) * g2
    # Bregman KL with the exp link
    ge, g1, g2 = _safe_exp3(x)
    vlogv = vi * log(vi) if vi > 0.0 else 0.0
    if x > C_EXP_CLIP:
        u = 1.0 + x - C_EXP_CLIP
        return vlogv - vi * log(ge) - vi + ge, -vi / u + g1, vi / (u * u) + g2
    return vlogv - vi * x - vi + ge, -vi + g1, g2


cdef inline void _pointwise_range(int kind, const double* s, const double* w, const double* v, const int64_t* off,
                                  int64_t q0, int64_t q1, double eta, double t, double alpha, double* out_v,
                                  unsigned char* out_ok, double* out_g, double* out_h) noexcept nogil:
    # inlined once per kind below, so that the compiler drops the dispatch on ``kind`` from the row loop
    cdef int64_t q, a, b, i
    cdef double val, f, d1, d2
    for q in range(q0, q1):
        a = off[q]
        b = off[q + 1]
        val = 0.0
        for i in range(a, b):
            f, d1, d2 = _pointwise_term(kind, s[i], v[i], eta, t, alpha)
            val += w[i] * f
            out_g[i] = w[i] * d1
            out_h[i] = w[i] * d2
        out_v[q] = val
        out_ok[q] = b > a


def _pointwise_batch(const double[::1] s, const double[::1] y, const double[::1] w, const double[::1] v,
                     const int64_t[::1] off, int64_t q0, int64_t q1, int kind, double eta, double t, double alpha,
                     double[::1] out_v, unsigned char[::1] out_ok, double[::1] out_g, double[::1] out_h):
    cdef const double* ps = &s[0]
    cdef const double* pw = &w[0]
    cdef const double* pv = &v[0]
    cdef const int64_t* po = &off[0]
    cdef double* pov = &out_v[0]
    cdef unsigned char* pok = &out_ok[0]
    cdef double* pg = &out_g[0]
    cdef double* ph = &out_h[0]
    with nogil:
        if kind == PT_SQUARED:
            _pointwise_range(PT_SQUARED, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_LOGISTIC:
            _pointwise_range(PT_LOGISTIC, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_EXP:
            _pointwise_range(PT_EXP, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_SQHINGE:
            _pointwise_range(PT_SQHINGE, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_SMOOTHHINGE:
            _pointwise_range(PT_SMOOTHHINGE, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_BREG_SQ_ID:
            _pointwise_range(PT_BREG_SQ_ID, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        elif kind == PT_BREG_SQ_EXP:
            _pointwise_range(PT_BREG_SQ_EXP, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
        else:
            _pointwise_range(PT_BREG_KL_EXP, ps, pw, pv, po, q0, q1, eta, t, alpha, pov, pok, pg, ph)
