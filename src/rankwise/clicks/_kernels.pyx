# cython: language_level=3
"""Compiled kernels of the click models: click probabilities, posteriors, EM statistics, simulation.

Every kernel walks the flat session arrays of a :class:`~rankwise.clicks.ClickLog`
(``offsets``, per-row parameter arrays, ``clicked``) and never allocates per session. Arrays are
C-contiguous: offsets, pairs and ranks int64, ``clicked`` uint8 (as :class:`~rankwise.clicks.ClickLog`
stores them), parameters and outputs float64. The simulators take their uniforms from the caller
(drawn by numpy), so a seed gives the same clicks as before the kernels were compiled.

Three families share the kernels (Chuklin, Markov & de Rijke 2015, ch. 3):

- *independent* (GCTR, RCTR, DCTR, PBM): ``P(C_r = 1) = p_r``, clicks independent, so the full
  and the conditional probabilities coincide;
- *cascade chain* (CM, DCM, CCM, DBN, SDBN): ``E_1 = 1``; ``C_r = 1`` iff ``E_r = 1`` and the
  document attracts (probability α_r); then ``E_{r+1} ~ Bernoulli(κ¹_r)`` after a click and
  ``Bernoulli(κ⁰_r)`` after an examined non-click; ``E_r = 0`` implies ``E_{r+1} = 0``. The models
  differ only in κ⁰, κ¹ (CM: 0 after a click, 1 otherwise; DCM: λ_r, 1; CCM: τ₂(1-α)+τ₃α, τ₁;
  DBN: γ(1-σ), γ; SDBN: 1-σ, 1);
- *UBM*: ``P(C_r = 1 | C_{<r}) = γ_{r, r'} α_r`` with r' the rank of the previous click (0 if none).
"""
import numpy as np

from libc.math cimport log
from libc.stdint cimport int64_t, uint8_t

cdef extern from *:
    """
    /* GCC's loop vectorizer makes the kernels slower, not faster: their loops run over one session
       (a few ranks), and in the UBM's full probabilities the 16-byte loads of work[] stall on the
       8-byte store of work[r] made for the rank above (no store forwarding). */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC optimize ("no-tree-vectorize")
    #endif
    """

# Probabilities used in a logarithm are kept in [EPS, 1 - EPS]: the cascade model gives a click
# after the first one probability 0, and its log-likelihood would be -inf.
cdef double C_EPS = 1e-6
EPS = C_EPS


cdef inline double _clamp(double p) noexcept nogil:
    if p < C_EPS:
        return C_EPS
    if p > 1.0 - C_EPS:
        return 1.0 - C_EPS
    return p


# ------------------------------------------------------------------------------ probabilities
def cascade_probs(const int64_t[::1] offsets, const double[::1] alpha, const double[::1] k0, const double[::1] k1,
                  const uint8_t[::1] clicked, bint conditional, double[::1] out):
    """Click probabilities of the cascade-chain family, per row.

    conditional: P(C_r = 1 | C_<r = c_<r) from the posterior of E_r given the clicks above;
    else the full (marginal) probability P(C_r = 1)."""
    cdef Py_ssize_t s
    cdef int64_t i
    cdef double e, a
    with nogil:
        for s in range(offsets.shape[0] - 1):
            e = 1.0
            for i in range(offsets[s], offsets[s + 1]):
                a = alpha[i]
                out[i] = a * e
                if conditional:
                    if clicked[i]:
                        e = k1[i]
                    else:
                        # a < 1 for fitted models (pseudo-count estimates), so 1 - a e > 0
                        e = k0[i] * e * (1.0 - a) / (1.0 - a * e)
                else:
                    e = e * (a * k1[i] + (1.0 - a) * k0[i])


def ubm_probs(const int64_t[::1] offsets, const double[::1] alpha, const int64_t[::1] ranks, gamma_,
              const uint8_t[::1] clicked, bint conditional, double[::1] out, double[::1] work):
    """UBM click probabilities; ``gamma[r-1, r']`` with r' the previous click rank (0 = none).

    The full probability sums over the distribution of the previous click's rank (``work``)."""
    cdef const double[:, ::1] gamma = np.ascontiguousarray(gamma_, dtype=np.float64)
    cdef Py_ssize_t s
    cdef int64_t start, end, i, j, r, n, last
    cdef double p, q, pj, ai
    cdef const double* grow
    cdef double* wk = &work[0] if work.shape[0] else NULL
    with nogil:
        for s in range(offsets.shape[0] - 1):
            start, end = offsets[s], offsets[s + 1]
            if conditional:
                last = 0
                for i in range(start, end):
                    r = ranks[i]
                    out[i] = gamma[r - 1, last] * alpha[i]
                    if clicked[i]:
                        last = r
            else:
                n = end - start
                for j in range(n + 1):
                    work[j] = 0.0
                work[0] = 1.0  # P(no click yet) before rank 1
                for i in range(start, end):
                    r = ranks[i]
                    p = 0.0
                    ai = alpha[i]  # held in a register: the writes to work could alias it
                    grow = &gamma[r - 1, 0]
                    for j in range(r):
                        q = grow[j] * ai
                        pj = wk[j] * q
                        p += pj
                        wk[j] -= pj
                    wk[r] = p
                    out[i] = p


def session_loglik(const int64_t[::1] offsets, const double[::1] probs, const uint8_t[::1] clicked,
                   double[::1] out):
    """Σ_r log P(C_r = c_r | ...) per session, probabilities clamped to [EPS, 1 - EPS]."""
    cdef Py_ssize_t s
    cdef int64_t i
    cdef double t, p
    with nogil:
        for s in range(offsets.shape[0] - 1):
            t = 0.0
            for i in range(offsets[s], offsets[s + 1]):
                p = _clamp(probs[i])
                t += log(p) if clicked[i] else log(1.0 - p)
            out[s] = t


# --------------------------------------------------------------------------------- posteriors
cdef int64_t _cascade_posterior(const double* alpha, const double* k0, const double* k1, const uint8_t* clicked,
                                int64_t start, int64_t end, double* e_post, double* beta) noexcept nogil:
    """Fill ``e_post[start:end]`` with P(E_r = 1 | all clicks of the session) and ``beta`` with
    P(no click at ranks ≥ r | E_r = 1) after the last click; return the last click's row offset
    within the session (-1 if none)."""
    cdef int64_t n = end - start, last = -1, j
    cdef double nxt = 1.0, a, kk, b, e
    for j in range(n):
        if clicked[start + j]:
            last = j
    for j in range(n - 1, last, -1):
        a = alpha[start + j]
        if j < n - 1:
            kk = k0[start + j]
            b = (1.0 - a) * (kk * nxt + 1.0 - kk)
        else:
            b = 1.0 - a
        beta[j] = b
        nxt = b
    for j in range(last + 1):
        e_post[start + j] = 1.0
    if last + 1 < n:
        if last == -1:
            e = 1.0
        else:
            kk = k1[start + last]
            b = beta[last + 1]
            e = kk * b / (kk * b + 1.0 - kk)
        e_post[start + last + 1] = e
        for j in range(last + 2, n):
            kk = k0[start + j - 1]
            b = beta[j]
            e = e * kk * b / (kk * b + 1.0 - kk)
            e_post[start + j] = e
    return last


# ------------------------------------------------------------------------------ EM statistics
def pbm_stats(const int64_t[::1] pair, const int64_t[::1] rank_index, const uint8_t[::1] clicked,
              const double[::1] alpha, const double[::1] gamma, double[::1] num_a, double[::1] den_a,
              double[::1] num_g, double[::1] den_g):
    """E-step of PBM/UBM: expected attraction and examination per row (Chuklin et al. 2015, §4.2).

    ``rank_index`` is the examination parameter of the row (rank for PBM, (rank, previous click)
    for UBM, flattened)."""
    cdef Py_ssize_t i
    cdef int64_t p, k
    cdef double a, g, d
    with nogil:
        for i in range(pair.shape[0]):
            p, k = pair[i], rank_index[i]
            a, g = alpha[p], gamma[k]
            if clicked[i]:
                num_a[p] += 1.0
                num_g[k] += 1.0
            else:
                d = 1.0 - g * a
                num_a[p] += (1.0 - g) * a / d
                num_g[k] += g * (1.0 - a) / d
            den_a[p] += 1.0
            den_g[k] += 1.0


cdef void _cascade_em_walk(bint ccm, const int64_t[::1] offsets, const int64_t[::1] pair, const uint8_t[::1] clicked,
                           const double* alpha, const double* k0, const double* k1, double* e_post, double* beta,
                           const double* s_pair, double g, double t2, double t3, double* num_a, double* den_a,
                           double* num_s, double* den_s, double* stat) noexcept nogil:
    """E-step walk shared by the DBN and the CCM, once κ⁰, κ¹ and α are set per row.

    Per row: the expected attraction (1 if clicked, else P(A = 1, E = 0 | clicks)); below a
    non-click the continuation counts ``stat[0] += P(E_{r+1})``, ``stat[1] += P(E_r)`` (exactly 1
    above the last click); after a click, the model's own statistics: DBN (``ccm`` False)
    satisfaction and γ (``num_s``, ``den_s``), CCM (``ccm`` True) the latent Z ~ Bernoulli(α) choosing
    τ₃ or τ₂ (``num_s``, ``den_s`` unused)."""
    cdef Py_ssize_t s
    cdef int64_t start, end, n, last, j, i, p
    cdef double a, pz, b, p1, p0, z, sv
    cdef bint c
    for s in range(offsets.shape[0] - 1):
        start, end = offsets[s], offsets[s + 1]
        n = end - start
        last = _cascade_posterior(alpha, k0, k1, &clicked[0], start, end, e_post, beta)
        for j in range(n):
            i = start + j
            p = pair[i]
            a = alpha[i]
            c = clicked[i] != 0
            if c:
                num_a[p] += 1.0
            else:
                num_a[p] += (1.0 - e_post[i]) * a
            den_a[p] += 1.0
            if j == n - 1:
                continue
            if not c:
                stat[0] += e_post[i + 1]
                stat[1] += e_post[i]
            elif ccm and j < last:
                pz = a * t3 / (a * t3 + (1.0 - a) * t2)
                num_a[p] += pz
                den_a[p] += 1.0
                stat[4] += pz
                stat[5] += pz
                stat[2] += 1.0 - pz
                stat[3] += 1.0 - pz
            elif ccm:  # the last click, not at the bottom
                b = beta[j + 1]
                p1 = t3 * b + 1.0 - t3
                p0 = t2 * b + 1.0 - t2
                z = a * p1 + (1.0 - a) * p0
                pz = a * p1 / z
                num_a[p] += pz
                den_a[p] += 1.0
                stat[4] += a * t3 * b / z
                stat[5] += pz
                stat[2] += (1.0 - a) * t2 * b / z
                stat[3] += 1.0 - pz
            elif j < last:
                den_s[p] += 1.0
                stat[0] += 1.0
                stat[1] += 1.0
            else:  # DBN, the last click, not at the bottom
                sv = s_pair[p]
                b = beta[j + 1]
                z = sv + (1.0 - sv) * (g * b + 1.0 - g)
                num_s[p] += sv / z
                den_s[p] += 1.0
                stat[0] += (1.0 - sv) * g * b / z
                stat[1] += (1.0 - sv) * (g * b + 1.0 - g) / z


def dbn_stats(const int64_t[::1] offsets, const int64_t[::1] pair, const uint8_t[::1] clicked,
              const double[::1] a_pair, const double[::1] s_pair, double gamma, double[::1] e_post, double[::1] beta,
              double[::1] k0, double[::1] k1, double[::1] alpha, double[::1] num_a, double[::1] den_a,
              double[::1] num_s, double[::1] den_s, double[::1] gstat):
    """E-step of the DBN (Chapelle & Zhang 2009; Chuklin et al. 2015, §4.2): expected attraction,
    satisfaction and continuation counts. ``gstat`` = [Σ E[E_{r+1}, ¬S_r, E_r], Σ E[¬S_r, E_r]].
    ``e_post``, ``beta``, ``k0``, ``k1``, ``alpha``: work arrays of one entry per row."""
    cdef double g = gamma
    cdef Py_ssize_t i
    if pair.shape[0] == 0:
        return
    with nogil:
        for i in range(pair.shape[0]):
            alpha[i] = a_pair[pair[i]]
            k1[i] = g * (1.0 - s_pair[pair[i]])
            k0[i] = g
        _cascade_em_walk(False, offsets, pair, clicked, &alpha[0], &k0[0], &k1[0], &e_post[0], &beta[0], &s_pair[0],
                         g, 0.0, 0.0, &num_a[0], &den_a[0], &num_s[0], &den_s[0], &gstat[0])


def ccm_stats(const int64_t[::1] offsets, const int64_t[::1] pair, const uint8_t[::1] clicked,
              const double[::1] a_pair, const double[::1] tau, double[::1] e_post, double[::1] beta, double[::1] k0,
              double[::1] k1, double[::1] alpha, double[::1] num_a, double[::1] den_a, double[::1] tstat):
    """E-step of the CCM (Guo et al. 2009; Chuklin et al. 2015, §3.6 and ch. 4).

    After a click the user goes on with τ₂(1-α)+τ₃α: written with a latent Z ~ Bernoulli(α)
    (go on with τ₃ if Z = 1, τ₂ if Z = 0), which shares α with the attraction, so the M-step of
    α pools the expected A and Z. ``tstat`` = [num τ₁, den τ₁, num τ₂, den τ₂, num τ₃, den τ₃]."""
    cdef double t1 = tau[0], t2 = tau[1], t3 = tau[2], a
    cdef Py_ssize_t i
    if pair.shape[0] == 0:
        return
    with nogil:
        for i in range(pair.shape[0]):
            a = a_pair[pair[i]]
            alpha[i] = a
            k1[i] = t2 * (1.0 - a) + t3 * a
            k0[i] = t1
        _cascade_em_walk(True, offsets, pair, clicked, &alpha[0], &k0[0], &k1[0], &e_post[0], &beta[0], &a_pair[0],
                         0.0, t2, t3, &num_a[0], &den_a[0], NULL, NULL, &tstat[0])


def last_first_click(const int64_t[::1] offsets, const uint8_t[::1] clicked, int64_t[::1] first, int64_t[::1] last):
    """0-based offset of the first and last click of each session (-1 if none)."""
    cdef Py_ssize_t s
    cdef int64_t f, lc, j
    with nogil:
        for s in range(offsets.shape[0] - 1):
            f = -1
            lc = -1
            for j in range(offsets[s + 1] - offsets[s]):
                if clicked[offsets[s] + j]:
                    if f < 0:
                        f = j
                    lc = j
            first[s] = f
            last[s] = lc


def previous_click_rank(const int64_t[::1] offsets, const int64_t[::1] ranks, const uint8_t[::1] clicked,
                        int64_t[::1] out):
    """Rank of the previous click above each row (0 if none): UBM's r'."""
    cdef Py_ssize_t s
    cdef int64_t i, last
    with nogil:
        for s in range(offsets.shape[0] - 1):
            last = 0
            for i in range(offsets[s], offsets[s + 1]):
                out[i] = last
                if clicked[i]:
                    last = ranks[i]


# -------------------------------------------------------------------------------- simulation
def simulate_cascade(const int64_t[::1] offsets, const double[::1] alpha, const double[::1] k0, const double[::1] k1,
                     const double[::1] u_click, const double[::1] u_cont, uint8_t[::1] out):
    """Clicks of the cascade-chain family from the caller's uniforms: a click where ``u_click`` <
    α and the user examines the row; the user goes on where ``u_cont`` < κ¹ (after a click) or κ⁰."""
    cdef Py_ssize_t s
    cdef int64_t i
    cdef bint e, c
    with nogil:
        for s in range(offsets.shape[0] - 1):
            e = True
            for i in range(offsets[s], offsets[s + 1]):
                if not e:
                    out[i] = 0
                    continue
                c = u_click[i] < alpha[i]
                out[i] = 1 if c else 0
                e = u_cont[i] < (k1[i] if c else k0[i])


def simulate_ubm(const int64_t[::1] offsets, const double[::1] alpha, const int64_t[::1] ranks, gamma_,
                 const double[::1] u_click, uint8_t[::1] out):
    """UBM clicks from the caller's uniforms: a click where ``u_click`` < γ[r-1, r'] α."""
    cdef const double[:, ::1] gamma = np.ascontiguousarray(gamma_, dtype=np.float64)
    cdef Py_ssize_t s
    cdef int64_t i, last
    cdef bint c
    with nogil:
        for s in range(offsets.shape[0] - 1):
            last = 0
            for i in range(offsets[s], offsets[s + 1]):
                c = u_click[i] < gamma[ranks[i] - 1, last] * alpha[i]
                out[i] = 1 if c else 0
                if c:
                    last = ranks[i]
