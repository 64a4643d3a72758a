"""The compiled training engine: value, gradient and Hessian diagonal of a loss, per query, on flat
``(scores, labels, query_offsets)`` arrays.

Every kernel here is a numba function over a contiguous range of queries that works on each
query's slice of the flat arrays with O(n) scratch memory (no padding, no pair matrix, no torch),
and releases the GIL; :func:`run` splits the queries into ranges of about equal work and runs
them on ``n_jobs`` threads (each query is computed by one thread, start to end, so results do not
depend on the number of threads). The same kernels serve :func:`rankwise.losses.grad_hess`
(LightGBM / XGBoost objectives) and :func:`rankwise.losses.training_loss` (a
``torch.autograd.Function`` for CPU training of the torch models).

Each loss's :class:`~rankwise.losses.LossSpec` says which kernel computes it (``spec.kernel``,
a function of the hyperparameters that returns an :class:`EngineKernel` or None), so nothing
here knows loss names. The kernels reproduce the torch definitions of the losses (the
reference) to rounding: same tie rule (input order), same gain scaling, same linear
continuation of the exponential beyond 50, same thresholds as ``torch.nn.functional.softplus``.

Pair-form kernels enumerate pairs as LightGBM's lambdarank does: the query's items are sorted by
score once, and with a truncation level T only pairs with at least one item among the top T
positions are visited -- O(n log n + n T) time per query, O(n) memory. Without truncation the
logistic pairs are visited with the items grouped by label, only pairs of different labels.
A logistic pair's sigmoid comes from per-item exponentials E_p = exp(σ (s_p - max s)):
sigmoid(-σ (s_i - s_j)) = E_j / (E_i + E_j), one division per pair and no exp, in branch-free
loops that LLVM vectorises; the value (log(E_i + E_j) - log E_i, a log per pair) only when asked.

References
----------
G. Ke et al. "LightGBM: a highly efficient gradient boosting decision tree." NeurIPS 2017
(``src/objective/rank_objective.hpp``: the lambdarank gradients, truncation and normalisation).
C. Burges. "From RankNet to LambdaRank to LambdaMART: an overview." MSR-TR-2010-82, 2010.
X. Wang, C. Li, N. Golbandi, M. Bendersky, M. Najork. "The LambdaLoss framework for ranking
metric optimization." CIKM 2018.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from rankwise._validation import available_cpus, thread_limit

EXP_CLIP = 50.0
_LN2 = math.log(2.0)

# pair weights
W_NONE, W_LABEL, W_NDCG, W_LL_NDCG2, W_LL_NDCG1, W_LL_LAMBDARANK, W_LL_NDCG2PP, W_OP = range(8)
# phi(d) of the score difference
PHI_LOGISTIC, PHI_HINGE, PHI_EXP, PHI_SQHINGE = range(4)
# pointwise terms
PT_SQUARED, PT_LOGISTIC, PT_EXP, PT_SQHINGE, PT_SMOOTHHINGE, PT_BREG_SQ_ID, PT_BREG_SQ_EXP, PT_BREG_KL_EXP = range(8)


# ----------------------------------------------------------------------------------- scalar helpers


@njit(cache=True, nogil=True)
def _softplus(x):
    # torch.nn.functional.softplus (beta 1, threshold 20): linear above the threshold
    if x > 20.0:
        return x
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit(cache=True, nogil=True)
def _softplus_d(x):
    # its derivative as torch computes it: 1 above the threshold, sigmoid(x) below
    if x > 20.0:
        return 1.0
    return _sigmoid(x)


@njit(cache=True, nogil=True)
def _sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def _phi(kind, d, sigma, scale):
    """(phi(d), phi'(d), phi''(d)) for the pair functions of the pairwise losses."""
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
        tc = min(t, EXP_CLIP)
        e = math.exp(tc)
        return e * (1.0 + (t - tc)), -e, (e if t < EXP_CLIP else 0.0)
    r = max(0.0, 1.0 - d)
    return r * r, -2.0 * r, (2.0 if d < 1.0 else 0.0)


@njit(cache=True, nogil=True)
def _inv_log2p1(r):
    return 1.0 / math.log2(1.0 + r)


@njit(cache=True, nogil=True)
def _gains(y, exp2):
    """Gains 2^y - 1 (or y) divided by the list's largest one when it is positive (as
    ``scaled_gains``: NDCG-type ratios unchanged, no overflow of a DCG sum)."""
    n = len(y)
    g = np.empty(n)
    top = 0.0
    for i in range(n):
        yi = y[i]
        if not exp2:
            g[i] = yi
        elif 0.0 <= yi < 64.0 and yi == math.floor(yi):
            g[i] = math.ldexp(1.0, int(yi)) - 1.0  # = 2.0 ** yi - 1 for a grade, without pow
        else:
            g[i] = 2.0 ** yi - 1.0
        if g[i] > top:
            top = g[i]
    if top > 0.0:
        for i in range(n):
            g[i] = g[i] / top
    return g


@njit(cache=True, nogil=True)
def _ideal_dcg(g, k):
    """max DCG@k of gains g (all items when k <= 0)."""
    gs = -np.sort(-g)
    n = len(g)
    kk = n if k <= 0 else min(k, n)
    total = 0.0
    for p in range(kk):
        total += gs[p] / math.log2(2.0 + p)
    return total


@njit(cache=True, nogil=True)
def _ideal_dcg_graded(y, g, k, inv_d):
    """``_ideal_dcg(g, k)`` for gains ``g`` of labels ``y`` (any order) with the discount table
    ``inv_d`` (reciprocals): where every label is a grade 0..63 the gains in decreasing order are a count per
    grade (no sort; the same terms in the same order), otherwise the sort."""
    n = len(y)
    counts = np.zeros(64, dtype=np.int64)
    gain_of = np.zeros(64)
    for i in range(n):
        yi = y[i]
        if not (0.0 <= yi < 64.0 and yi == math.floor(yi)):
            return _ideal_dcg(g, k)
        counts[int(yi)] += 1
        gain_of[int(yi)] = g[i]
    kk = n if k <= 0 else min(k, n)
    total = 0.0
    p = 0
    for grade in range(63, -1, -1):
        for _ in range(counts[grade]):
            if p >= kk:
                return total
            total += gain_of[grade] * inv_d[p]
            p += 1
    return total


@njit(cache=True, nogil=True)
def _uses_gains(scheme):
    return scheme == W_NDCG or (W_LL_NDCG2 <= scheme <= W_LL_NDCG2PP)


@njit(cache=True, nogil=True)
def _phi_fast(kind, d, sigma, scale):
    """``_phi`` with one exponential per call for the logistic (the hot path of the pair loops)."""
    if kind != PHI_LOGISTIC:
        return _phi(kind, d, sigma, scale)
    x = -sigma * d
    e = math.exp(-abs(x))
    inv = 1.0 / (1.0 + e)
    sx = inv if x >= 0.0 else e * inv  # sigmoid(x)
    sxc = e * inv if x >= 0.0 else inv  # sigmoid(-x)
    f = x if x > 20.0 else max(x, 0.0) + math.log1p(e)  # torch's softplus (linear beyond 20)
    d1 = 1.0 if x > 20.0 else sx
    return scale * f, -sigma * scale * d1, sigma * sigma * scale * sx * sxc


# A logistic pair's sigmoid from per-item exponentials: with E_p = exp(σ (s_p - max s)),
# sigmoid(-σ (s_i - s_j)) = E_j / (E_i + E_j), so a pair costs one division and no exp. Used where
# every E_p of the query is a normal float (σ (max s - min s) <= _FAST_SPREAD); otherwise the
# general loop (one exp per pair) keeps every digit at extreme scores.
_FAST_SPREAD = 500.0


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def _pair_weight_row(scheme, p, start, ys, ws, gain, inv_d, pos, delta, inv_idcg, mu, wrow, by_position):
    """``wrow[q]``, q >= start: the weight of the pair (p, q) before phi (0 for equal labels), one
    branch-free loop per scheme (the scheme is hoisted out of the loop over q). ``inv_d``: each
    item's discount, ``pos``: its position in the ranking (``delta`` is indexed by the distance;
    ``by_position``: the items are in ranking order, the distance is q - p). Only the schemes whose
    pairs have different labels come here: ``W_OP`` and NDCG-Loss1 (every ordered pair) take the
    general loop of ``_pair_query``."""
    n = np.uint64(len(ys))
    p = np.uint64(p)  # unsigned indices: no negative-index wraparound, so LLVM vectorises the loops
    start = np.uint64(start)
    pp = 0 if by_position else pos[p]
    yp = ys[p]
    wp = ws[p]
    if scheme == W_NONE:
        for q in range(start, n):
            wrow[q] = wp * ws[q] * (1.0 if yp != ys[q] else 0.0)
    elif scheme == W_LABEL:
        for q in range(start, n):
            wrow[q] = wp * ws[q] * abs(yp - ys[q])
    else:
        c = wp * inv_idcg
        gp = gain[p]
        dp = inv_d[p]
        if scheme == W_NDCG or scheme == W_LL_LAMBDARANK:
            for q in range(start, n):
                wrow[q] = c * ws[q] * (abs(gp - gain[q]) * abs(dp - inv_d[q]))
        elif scheme == W_LL_NDCG2 and by_position:
            for q in range(start, n):
                wrow[q] = c * ws[q] * (delta[q - p] * abs(gp - gain[q]))
        elif scheme == W_LL_NDCG2:
            for q in range(start, n):
                wrow[q] = c * ws[q] * (delta[np.uint64(abs(pos[q] - pp))] * abs(gp - gain[q]))
        elif by_position:  # W_LL_NDCG2PP
            for q in range(start, n):
                dg = abs(gp - gain[q])
                wrow[q] = c * ws[q] * (mu * delta[q - p] * dg + dg * abs(dp - inv_d[q]))
        else:
            for q in range(start, n):
                dg = abs(gp - gain[q])
                wrow[q] = c * ws[q] * (mu * delta[np.uint64(abs(pos[q] - pp))] * dg + dg * abs(dp - inv_d[q]))


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"}, error_model="numpy")
def _logistic_row(p, start, ss, ys, ex, wrow, sigma, scale, norm, gs, hs):
    """The logistic pairs (p, q >= start) of one row: adds to gs/hs[q], returns the sums for item p and
    Σ 2|λ|. Branch-free over q, so that LLVM vectorises it (reassociated sums: the order is fixed
    by the compiled loop, the same for every thread count; unsigned indices and numpy's division
    error model, so that no negative-index wraparound or zero-division check stops it)."""
    n = np.uint64(len(ss))
    p = np.uint64(p)
    sp = ss[p]
    yp = ys[p]
    ep = ex[p]
    a1 = -sigma * scale
    a2 = sigma * sigma * scale
    g_p = 0.0
    h_p = 0.0
    sl = 0.0
    for q in range(np.uint64(start), n):
        yq = ys[q]
        sgn = (1.0 if yp > yq else 0.0) - (1.0 if yp < yq else 0.0)  # +1: p is the better-labelled item
        eq = ex[q]
        d = sgn * (sp - ss[q])  # s_i - s_j, i the better-labelled item
        c = (0.01 + abs(d)) if norm else 1.0  # LightGBM's normalisation: wt / (0.01 + |d|)
        e = ep + eq
        inv = 1.0 / (e * c)
        w = wrow[q]
        sx = w * (eq if yp > yq else ep) * inv  # wt sigmoid(x), x = -σ d
        sxc = (ep if yp > yq else eq) * c * inv  # sigmoid(-x)
        d1 = w * e * inv if -sigma * d > 20.0 else sx  # torch's softplus: slope exactly 1 beyond 20
        l1 = a1 * d1
        l2 = a2 * sx * sxc
        g_p += sgn * l1
        gs[q] -= sgn * l1
        h_p += l2
        hs[q] += l2
        sl += 2.0 * abs(l1)
    return g_p, h_p, sl


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"}, error_model="numpy")
def _logistic_row_value(p, start, m, ss, ys, ex, wrow, sigma, scale, norm):
    """The value of the same row: Σ wt softplus(x), x = -σ d, with softplus(x) = log(E_i + E_j) -
    log E_i (log E_i = σ (s_i - m), m = max s, known) below torch's threshold 20 and x above it:
    one log per pair, no exp, no division but the normalisation's."""
    n = np.uint64(len(ss))
    p = np.uint64(p)
    sp = ss[p]
    yp = ys[p]
    ep = ex[p]
    value = 0.0
    for q in range(np.uint64(start), n):
        yq = ys[q]
        sq = ss[q]
        d = sp - sq if yp > yq else sq - sp
        x = -sigma * d
        log_hi = sigma * ((sp if yp > yq else sq) - m)
        f = x if x > 20.0 else math.log(ep + ex[q]) - log_hi
        c = (0.01 + abs(d)) if norm else 1.0
        value += (wrow[q] / c) * f
    return value * scale


@njit(cache=True, nogil=True)
def _label_groups(ys):
    """Items stably grouped by decreasing label (a count per grade where every label is a grade
    0..63, a stable sort otherwise) and, for each grouped item, where its group ends."""
    n = len(ys)
    graded = True
    for i in range(n):
        if not (0.0 <= ys[i] < 64.0 and ys[i] == math.floor(ys[i])):
            graded = False
            break
    if graded:
        first = np.zeros(65, dtype=np.int64)  # grade 63 first
        for i in range(n):
            first[64 - int(ys[i])] += 1
        for k in range(1, 65):
            first[k] += first[k - 1]
        order = np.empty(n, dtype=np.int64)
        for i in range(n):
            k = 63 - int(ys[i])
            order[first[k]] = i
            first[k] += 1
    else:
        order = np.argsort(-ys, kind="mergesort")
    ends = np.empty(n, dtype=np.int64)
    end = n
    for a in range(n - 1, -1, -1):
        if a < n - 1 and ys[order[a]] != ys[order[a + 1]]:
            end = a + 1
        ends[a] = end
    return order, ends


@njit(cache=True, nogil=True, boundscheck=False)
def _logistic_pairs(scheme, ss, ys, ws, gain, inv_d, delta, inv_idcg, mu, sigma, scale, top, norm, want_value,
                    gs, hs):
    """Every weighted logistic pair of a query whose scores span at most ``_FAST_SPREAD / σ``:
    the weights of a row, then its pairs from the per-item exponentials (one division per pair
    instead of an exp, a log1p and a division), then, only with ``want_value``, its values.

    Truncated (``top < n``): rows p < top of the score order, pairs (p, q > p). Untruncated: the
    items grouped by label, each row paired only with the items of lower labels (a pair of equal
    labels has weight 0: none of them is visited; with graded labels that is 40 % of MSLR's)."""
    n = len(ss)
    m = ss[0]
    ex = np.empty(n)
    for p in range(n):
        ex[p] = math.exp(sigma * (ss[p] - m))
    wrow = np.empty(n)
    value = 0.0
    sum_lambda = 0.0
    if top < n:
        pos = np.empty(0, dtype=np.int64)  # the ranking order itself: distances q - p
        for p in range(top):
            _pair_weight_row(scheme, p, p + 1, ys, ws, gain, inv_d, pos, delta, inv_idcg, mu, wrow, True)
            g_p, h_p, sl = _logistic_row(p, p + 1, ss, ys, ex, wrow, sigma, scale, norm, gs, hs)
            gs[p] += g_p
            hs[p] += h_p
            sum_lambda += sl
            if want_value:
                value += _logistic_row_value(p, p + 1, m, ss, ys, ex, wrow, sigma, scale, norm)
        return value, sum_lambda
    order, ends = _label_groups(ys)
    ls = np.empty(n)
    ly = np.empty(n)
    lw = np.empty(n)
    le = np.empty(n)
    lg = np.zeros(n)
    ld = np.zeros(n)
    lgs = np.zeros(n)
    lhs = np.zeros(n)
    for a in range(n):
        i = order[a]
        ls[a] = ss[i]
        ly[a] = ys[i]
        lw[a] = ws[i]
        le[a] = ex[i]
        if len(gain):
            lg[a] = gain[i]
            ld[a] = inv_d[i]
    for a in range(n):
        b0 = ends[a]
        if b0 >= n:
            break
        _pair_weight_row(scheme, a, b0, ly, lw, lg, ld, order, delta, inv_idcg, mu, wrow, False)
        g_a, h_a, sl = _logistic_row(a, b0, ls, ly, le, wrow, sigma, scale, norm, lgs, lhs)
        lgs[a] += g_a
        lhs[a] += h_a
        sum_lambda += sl
        if want_value:
            value += _logistic_row_value(a, b0, m, ls, ly, le, wrow, sigma, scale, norm)
    for a in range(n):
        gs[order[a]] = lgs[a]
        hs[order[a]] = lhs[a]
    return value, sum_lambda


@njit(cache=True, nogil=True)
def _discounts(n):
    """1/log2(2 + p) for positions p < n, and δ(k) = |1/log2(1 + k) - 1/log2(2 + k)| for 1 <= k < n."""
    inv_d = np.empty(n + 1)
    for p in range(n + 1):
        inv_d[p] = 1.0 / math.log2(2.0 + p)
    delta = np.zeros(n + 1)
    for k in range(1, n):
        delta[k] = abs(inv_d[k - 1] - inv_d[k])
    return inv_d[:n], delta


@njit(cache=True, nogil=True)
def _pair_query(s, y, w, v, scheme, phi, sigma, scale, trunc, norm, mu, exp2, want_value, g, h, inv_d_all,
                delta_all):
    """One query of a pair-form loss: returns (value, counts) and fills g, h (zeroed by the caller).

    Pairs: y_i > y_j (``W_OP``: every ordered pair i != j, weight v_i; ``W_LL_NDCG1``: every ordered
    pair i != j, whatever the labels), visited in the order of
    the scores (items copied into score order once, so the loops run over contiguous memory), so
    that with ``trunc`` > 0 only pairs with an item in the top ``trunc`` positions are seen. The
    weight of a pair (i above j in the label order) before item weights and 1/maxDCG:
    ``W_NDCG``/``W_LL_LAMBDARANK``: |G_i - G_j| |1/D_i - 1/D_j|; ``W_LL_NDCG1``: G_i / D_i;
    ``W_LL_NDCG2``: δ(|r_i - r_j|) |G_i - G_j|; ``W_LL_NDCG2PP``: μ NDCG2 + LambdaRank;
    ``W_LABEL``: y_i - y_j; ``W_NONE``: 1. ``inv_d_all``, ``delta_all``: the discount tables of
    :func:`_discounts` for at least n positions.

    The logistic pairs (all but ``W_OP``) run on :func:`_logistic_pairs` where the query's score
    spread allows it, the other pairs on the general loop below (one ``_phi_fast`` per pair)."""
    n = len(s)
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
    order = np.argsort(-s, kind="mergesort")  # stable: input order breaks ties
    ss = np.empty(n)
    ys = np.empty(n)
    ws = np.empty(n)
    vs = np.empty(n)
    for p in range(n):
        ss[p] = s[order[p]]
        ys[p] = y[order[p]]
        ws[p] = w[order[p]]
        vs[p] = v[order[p]]
    gs = np.zeros(n)
    hs = np.zeros(n)
    inv_idcg = 1.0
    gain = np.empty(0)
    inv_d = np.empty(0)
    delta = np.empty(0)
    if _uses_gains(scheme):
        gain = _gains(ys, exp2)
        idcg = _ideal_dcg_graded(ys, gain, trunc, inv_d_all)
        if not idcg > 0.0:
            return 0.0, scheme != W_LL_NDCG1
        inv_idcg = 1.0 / idcg
        inv_d = inv_d_all[:n]
        delta = delta_all
    all_equal = ss[0] == ss[n - 1]
    top = n if trunc <= 0 else min(trunc, n)
    value = 0.0
    sum_lambda = 0.0
    # the fast loops see only pairs of different labels: not W_OP, nor NDCG-Loss1 (every ordered pair)
    if phi == PHI_LOGISTIC and scheme != W_OP and scheme != W_LL_NDCG1 and sigma * (ss[0] - ss[n - 1]) <= _FAST_SPREAD:
        value, sum_lambda = _logistic_pairs(scheme, ss, ys, ws, gain, inv_d, delta, inv_idcg, mu, sigma, scale, top,
                                            norm and not all_equal, want_value, gs, hs)
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
                        dg = abs(gain[i] - gain[j])
                        if scheme == W_NDCG or scheme == W_LL_LAMBDARANK:
                            wt *= dg * abs(inv_d[i] - inv_d[j])
                        elif scheme == W_LL_NDCG1:
                            wt *= gain[i] * inv_d[i]
                        elif scheme == W_LL_NDCG2:
                            wt *= delta[q - p] * dg
                        else:
                            wt *= mu * delta[q - p] * dg + dg * abs(inv_d[i] - inv_d[j])
                        wt *= inv_idcg
                if wt == 0.0:
                    continue
                d = ss[i] - ss[j]
                if norm and not all_equal:
                    wt = wt / (0.01 + abs(d))
                f, d1, d2 = _phi_fast(phi, d, sigma, scale)
                value += wt * f
                gs[i] += wt * d1
                gs[j] -= wt * d1
                hs[i] += wt * d2
                hs[j] += wt * d2
                sum_lambda += 2.0 * abs(wt * d1)
    factor = 1.0
    if norm and sum_lambda > 0.0:
        factor = math.log2(1.0 + sum_lambda) / sum_lambda
    for p in range(n):
        g[order[p]] = gs[p] * factor
        h[order[p]] = hs[p] * factor
    return value * factor, True


@njit(cache=True, nogil=True)
def _pair_batch(s, y, w, v, off, q0, q1, scheme, phi, sigma, scale, trunc, norm, mu, exp2, want_value, out_v, out_ok,
                out_g, out_h):
    longest = 0
    for q in range(q0, q1):
        longest = max(longest, off[q + 1] - off[q])
    inv_d, delta = _discounts(longest)  # once per batch, not per query
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        out_v[q], out_ok[q] = _pair_query(s[a:b], y[a:b], w[a:b], v[a:b], scheme, phi, sigma, scale, trunc, norm,
                                          mu, exp2, want_value, out_g[a:b], out_h[a:b], inv_d, delta)


# ------------------------------------------------------------------------------------- listwise


@njit(cache=True, nogil=True)
def _listnet_batch(s, y, w, v, off, q0, q1, tau, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        if b == a:
            continue
        my = np.max(y[a:b])
        ms = np.max(s[a:b]) / tau
        zy = 0.0
        zs = 0.0
        for i in range(a, b):
            zy += math.exp(y[i] - my)
            zs += math.exp(s[i] / tau - ms)
        lzs = math.log(zs) + ms
        c = 0.0
        val = 0.0
        for i in range(a, b):
            py = math.exp(y[i] - my) / zy
            c += w[i] * py
            val -= w[i] * py * (s[i] / tau - lzs)
        for i in range(a, b):
            py = math.exp(y[i] - my) / zy
            p = math.exp(s[i] / tau - lzs)
            out_g[i] = (c * p - w[i] * py) / tau
            out_h[i] = c * p * (1.0 - p) / (tau * tau)
        out_v[q] = val
        out_ok[q] = True


@njit(cache=True, nogil=True)
def _listmle_batch(s, y, w, v, off, q0, q1, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        n = b - a
        if n == 0:
            continue
        order = np.argsort(-y[a:b], kind="mergesort")
        z = np.empty(n)
        ws = np.empty(n)
        for k in range(n):
            z[k] = s[a + order[k]]
            ws[k] = w[a + order[k]]
        lse = np.empty(n)  # log-sum-exp over the suffix k..n-1
        run = -np.inf
        for k in range(n - 1, -1, -1):
            m = max(run, z[k])
            run = m + math.log(math.exp(run - m) + math.exp(z[k] - m))
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
                r = math.exp(lse[i] - lse[i - 1])
                s1 = s1 * r
                s2 = s2 * r * r
            s1 += ws[i]
            s2 += ws[i]
            p = math.exp(z[i] - lse[i])
            out_g[a + order[i]] = p * s1 - ws[i]
            out_h[a + order[i]] = p * s1 - p * p * s2
        out_v[q] = val
        out_ok[q] = True


@njit(cache=True, nogil=True)
def _approx_ndcg_batch(s, y, w, v, off, q0, q1, alpha, exp2, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        n = b - a
        if n == 0:
            continue
        g = _gains(y[a:b], exp2)
        idcg = _ideal_dcg(g, 0)
        if not idcg > 0.0:
            continue
        pos = np.ones(n)
        for i in range(n):
            for j in range(n):
                if i != j:
                    pos[i] += _sigmoid(-alpha * (s[a + i] - s[a + j]))
        coef = np.empty(n)
        val = 0.0
        for i in range(n):
            lp = math.log2(1.0 + pos[i])
            val -= w[a + i] * g[i] / lp / idcg
            # d(-G/log2(1+pos))/dpos, over idcg
            coef[i] = w[a + i] * g[i] / (lp * lp * (1.0 + pos[i]) * _LN2) / idcg
        for i in range(n):
            gi = 0.0
            for j in range(n):
                if i != j:
                    sg = _sigmoid(-alpha * (s[a + i] - s[a + j]))
                    gi -= alpha * sg * (1.0 - sg) * (coef[i] - coef[j])
            out_g[a + i] = gi
        out_v[q] = val
        out_ok[q] = True


@njit(cache=True, nogil=True)
def _smooth_dcg_batch(s, y, w, v, off, q0, q1, k, sigma, exp2, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        n = b - a
        if n == 0:
            continue
        g0 = _gains(y[a:b], exp2)
        idcg = _ideal_dcg(g0, k)
        if not idcg > 0.0:
            continue
        order = np.argsort(-s[a:b], kind="mergesort")
        kk = min(k, n)
        lim = math.sqrt(800.0 * sigma)
        hcol = np.empty(n)
        val = 0.0
        for j in range(kk):
            t = s[a + order[j]]
            c = -_inv_log2p1(j + 1.0) / idcg
            m = -np.inf
            for i in range(n):
                dd = min(max(s[a + i] - t, -lim), lim)  # as the torch form: h = e^-800 = 0 beyond
                e = -(dd * dd) / sigma
                hcol[i] = e
                if e > m:
                    m = e
            z = 0.0
            for i in range(n):
                hcol[i] = math.exp(hcol[i] - m)
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
                dd = min(max(s[a + i] - t, -lim), lim)
                if dd != s[a + i] - t:
                    continue  # clamped: no gradient (as torch.clamp)
                r = c * hcol[i] * (g0[i] * w[a + i] - u) * 2.0 * dd / sigma
                out_g[a + i] -= r
                gt += r
            out_g[a + order[j]] += gt
        out_v[q] = val
        out_ok[q] = True


@njit(cache=True, nogil=True)
def _smooth_dcg1_batch(s, y, w, v, off, q0, q1, sigma, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        if b == a:
            continue
        m = np.max(s[a:b]) / sigma
        z = 0.0
        for i in range(a, b):
            z += math.exp(s[i] / sigma - m)
        mean = 0.0
        for i in range(a, b):
            mean += math.exp(s[i] / sigma - m) / z * v[i] * w[i]
        for i in range(a, b):
            p = math.exp(s[i] / sigma - m) / z
            out_g[i] = -p * (v[i] * w[i] - mean) / sigma
        out_v[q] = -mean
        out_ok[q] = True


@njit(cache=True, nogil=True)
def _pairwise_squared_batch(s, y, w, v, off, q0, q1, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
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


@njit(cache=True, nogil=True)
def _safe_exp3(t):
    """safe_exp(t) with its first and second derivatives (exp continued linearly above 50)."""
    tc = min(t, EXP_CLIP)
    e = math.exp(tc)
    return e * (1.0 + (t - tc)), e, (e if t < EXP_CLIP else 0.0)


@njit(cache=True, nogil=True)
def _smooth_hinge3(x, alpha):
    xc = min(max(x, 0.0), alpha)
    inside = 1.0 if (x >= 0.0 and x <= alpha) else 0.0
    f = xc * xc / (2.0 * alpha) + max(x - alpha, 0.0)
    d1 = xc / alpha * inside + (1.0 if x > alpha else 0.0)
    return f, d1, inside / alpha


@njit(cache=True, nogil=True)
def _pointwise_batch(s, y, w, v, off, q0, q1, kind, eta, t, alpha, out_v, out_ok, out_g, out_h):
    for q in range(q0, q1):
        a, b = off[q], off[q + 1]
        val = 0.0
        for i in range(a, b):
            x = s[i]
            vi = v[i]
            if kind == PT_SQUARED:
                f, d1, d2 = (vi - x) ** 2, -2.0 * (vi - x), 2.0
            elif kind == PT_LOGISTIC:
                f = vi * _softplus(-x) + (eta - vi) * _softplus(x)
                d1 = -vi * _softplus_d(-x) + (eta - vi) * _softplus_d(x)
                # torch's softplus is linear beyond 20: no curvature there
                d2 = (vi * (0.0 if -x > 20.0 else 1.0) + (eta - vi) * (0.0 if x > 20.0 else 1.0)) \
                    * _sigmoid(x) * _sigmoid(-x)
            elif kind == PT_EXP:
                fm, d1m, d2m = _safe_exp3(-x)
                fp, d1p, d2p = _safe_exp3(x)
                f, d1, d2 = vi * fm + (eta - vi) * fp, -vi * d1m + (eta - vi) * d1p, vi * d2m + (eta - vi) * d2p
            elif kind == PT_SQHINGE:
                rm = max(t - x, 0.0)
                rp = max(x, 0.0)
                f = vi * rm * rm + (eta - vi) * rp * rp
                d1 = -2.0 * vi * rm + 2.0 * (eta - vi) * rp
                d2 = 2.0 * vi * (1.0 if t - x > 0.0 else 0.0) + 2.0 * (eta - vi) * (1.0 if x > 0.0 else 0.0)
            elif kind == PT_SMOOTHHINGE:
                fm, d1m, d2m = _smooth_hinge3(1.0 - x, alpha)
                fp, d1p, d2p = _smooth_hinge3(x, alpha)
                f, d1, d2 = vi * fm + (eta - vi) * fp, -vi * d1m + (eta - vi) * d1p, vi * d2m + (eta - vi) * d2p
            elif kind == PT_BREG_SQ_ID:
                f, d1, d2 = 0.5 * (vi - x) ** 2, x - vi, 1.0
            elif kind == PT_BREG_SQ_EXP:
                ge, g1, g2 = _safe_exp3(x)
                f, d1, d2 = 0.5 * (vi - ge) ** 2, (ge - vi) * g1, g1 * g1 + (ge - vi) * g2
            else:  # Bregman KL with the exp link
                ge, g1, g2 = _safe_exp3(x)
                vlogv = vi * math.log(vi) if vi > 0.0 else 0.0
                if x > EXP_CLIP:
                    u = 1.0 + x - EXP_CLIP
                    f = vlogv - vi * math.log(ge) - vi + ge
                    d1 = -vi / u + g1
                    d2 = vi / (u * u) + g2
                else:
                    f = vlogv - vi * x - vi + ge
                    d1 = -vi + g1
                    d2 = g2
            val += w[i] * f
            out_g[i] = w[i] * d1
            out_h[i] = w[i] * d2
        out_v[q] = val
        out_ok[q] = b > a


# ----------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class EngineKernel:
    """A compiled per-query kernel with its parameters.

    ``batch(s, y, w, v, off, q0, q1, *params, out_v, out_ok, out_g, out_h)`` computes queries
    ``q0..q1``; ``v`` is a per-row array the kernel reads (utilities). ``out_h`` is the exact
    Hessian diagonal where the loss's spec says ``hessian="exact"`` (the caller replaces it by
    |g| otherwise). ``pair_cost`` is the cost of a query of length n in units of n (n for
    all-pairs kernels, the truncation level for truncated ones, 1 for linear ones), used only to
    balance threads."""

    batch: object
    params: tuple
    pair_cost: int = 1
    utilities: object = None  # (labels -> v) in numpy, or None for v = labels
    checks: tuple = field(default_factory=tuple)  # callables (labels, weights) -> None, raising InputError
    v_checks: tuple = field(default_factory=tuple)  # callables (utilities) -> None, raising InputError
    value_last: bool = False  # the last entry of params says whether to compute the value (run's ``value``)


def _chunks(off, cost, n_chunks):
    """Query boundaries of ``n_chunks`` ranges of about equal work (n·cost per query)."""
    nq = len(off) - 1
    lengths = np.diff(off).astype(np.float64)
    work = np.cumsum(lengths * np.minimum(lengths, cost) + 1.0)
    targets = work[-1] * np.arange(1, n_chunks) / n_chunks
    cuts = np.searchsorted(work, targets)
    return np.unique(np.r_[0, np.clip(cuts, 0, nq), nq])


def n_threads(n_jobs) -> int:
    """Threads for ``n_jobs``: None means the limit of the enclosing ``limit_threads`` (a model's
    ``n_jobs``), else every CPU this process may use (affinity and cgroup quota,
    :func:`rankwise._validation.available_cpus`); -1 every such CPU."""
    if n_jobs is None:
        n_jobs = thread_limit()
    if n_jobs is None or n_jobs == -1:
        return available_cpus()
    return max(1, int(n_jobs))


def run(kernel: EngineKernel, s, y, off, w=None, n_jobs=None, value=True):
    """Per-query values, whether each query counts (has what the loss needs: an item, a pair, a
    positive ideal DCG), gradient and Hessian diagonal (float64) of one kernel on flat arrays.
    ``value=False``: the caller does not need the values; kernels that can skip them (the
    LambdaMART pair loop) leave them at 0."""
    s = np.ascontiguousarray(s, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    off = np.ascontiguousarray(off, dtype=np.int64)
    n = len(s)
    w = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    for check in kernel.checks:
        check(y, w)
    v = y if kernel.utilities is None else np.ascontiguousarray(kernel.utilities(y), dtype=np.float64)
    for check in kernel.v_checks:
        check(v)
    params = kernel.params[:-1] + (bool(value),) if kernel.value_last else kernel.params
    nq = len(off) - 1
    out_v = np.zeros(nq)
    out_ok = np.zeros(nq, dtype=np.bool_)
    out_g = np.zeros(n)
    out_h = np.zeros(n)
    threads = min(n_threads(n_jobs), max(nq, 1))
    if threads <= 1 or n < 2_000:
        kernel.batch(s, y, w, v, off, 0, nq, *params, out_v, out_ok, out_g, out_h)
    else:
        bounds = _chunks(off, kernel.pair_cost, 4 * threads)
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda k: kernel.batch(s, y, w, v, off, int(bounds[k]), int(bounds[k + 1]), *params,
                                               out_v, out_ok, out_g, out_h), range(len(bounds) - 1)))
    return out_v, out_ok, out_g, out_h


# --------------------------------------------------------------------------- kernel constructors


def pair_kernel(scheme, phi, *, sigma=1.0, scale=1.0, truncation_level=None, norm=False, mu=0.0, exp2=True,
                utilities=None, checks=(), v_checks=()):
    trunc = 0 if truncation_level is None else int(truncation_level)
    cost = 1 << 30 if trunc <= 0 else trunc
    return EngineKernel(_pair_batch, (int(scheme), int(phi), float(sigma), float(scale), trunc, bool(norm),
                                      float(mu), bool(exp2), True), cost, utilities, tuple(checks),
                        tuple(v_checks), value_last=True)


def listnet_kernel(tau):
    return EngineKernel(_listnet_batch, (float(tau),), 1)


def listmle_kernel():
    return EngineKernel(_listmle_batch, (), 1 << 30)


def approx_ndcg_kernel(alpha, exp2, checks=()):
    return EngineKernel(_approx_ndcg_batch, (float(alpha), bool(exp2)), 1 << 30, None, tuple(checks))


def smooth_dcg_kernel(k, sigma, exp2, checks=()):
    return EngineKernel(_smooth_dcg_batch, (int(k), float(sigma), bool(exp2)), int(k), None, tuple(checks))


def smooth_dcg1_kernel(sigma, utilities, checks=()):
    return EngineKernel(_smooth_dcg1_batch, (float(sigma),), 1, utilities, tuple(checks))


def pairwise_squared_kernel(utilities=None, checks=()):
    return EngineKernel(_pairwise_squared_batch, (), 1, utilities, tuple(checks))


def pointwise_kernel(kind, *, eta=1.0, t=1.0, alpha=0.25, utilities=None, checks=(), v_checks=()):
    return EngineKernel(_pointwise_batch, (int(kind), float(eta), float(t), float(alpha)), 1, utilities,
                        tuple(checks), tuple(v_checks))


# ------------------------------------------------------------------- label checks and utilities


def exp2_check(loss: str):
    """A check refusing labels whose gain 2^y - 1 overflows float64 (the message of the torch form)."""
    def check(y, w):
        if y.size and float(np.max(y)) >= 1024:
            bad = float(np.max(y))
            from rankwise.errors import InputError

            raise InputError(f"{loss}: label {bad:g} overflows the exp2 gain 2^y - 1 in float64 (labels must be "
                             "< 1024); use the linear gain/utility or rescale the labels")
    return check


def utilities(u, loss: str):
    """``(labels -> v, checks)`` for a utility "linear" or "exp2"; None for a callable (no kernel)."""
    if u == "linear" or u is None:
        return (lambda y: y), ()
    if u == "exp2":
        return (lambda y: np.exp2(y) - 1.0), (exp2_check(loss),)
    return None


def range_check(lo, hi, message):
    """A check that the utilities ``u(y)`` lie in [lo, hi]; ``message(vmin, vmax)`` on failure."""
    def check_v(v):
        if v.size and (float(v.min()) < lo or float(v.max()) > hi):
            from rankwise.errors import InputError

            raise InputError(message(float(v.min()), float(v.max())))
    return check_v
