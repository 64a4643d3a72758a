"""Naive references for the structured hinges: loops straight from UML §17.4–17.5, brute force.

Every function enumerates the whole output space (all r! permutations, all 2^r sign vectors), so
only small lists (r <= 7) are meant to be passed.
"""
from __future__ import annotations

import itertools
import math


def ndcg_at_k(positions, labels, k, gain="exp2", best=None):
    """NDCG@k of the ranking where item i sits at position positions[i] (r = top).

    ``best`` (the ideal DCG, a max over all permutations) is computed by brute force when None.
    """
    r = len(labels)
    g = [(2.0 ** y - 1.0) if gain == "exp2" else float(y) for y in labels]

    def dcg(pos):
        total = 0.0
        for i in range(r):
            rank = r - pos[i] + 1  # 1 = top
            if rank <= k:
                total += g[i] / math.log2(1 + rank)
        return total

    if best is None:
        best = max(dcg(p) for p in itertools.permutations(range(1, r + 1)))
    if best <= 0:
        return None
    return dcg(positions) / best


def mid_ranks(labels):
    """ρ_i: 1-based ascending rank of labels[i], ties sharing the mean of their ranks."""
    r = len(labels)
    out = []
    for i in range(r):
        below = sum(1 for j in range(r) if labels[j] < labels[i])
        equal = sum(1 for j in range(r) if labels[j] == labels[i])
        out.append(below + (equal + 1) / 2.0)
    return out


def ndcg_hinge_brute(scores, labels, k, gain="exp2"):
    """max over all permutations v of Δ(v, y) + Σ (v_i − ρ_i) s_i (UML eq. 17.8)."""
    r = len(scores)
    rho = mid_ranks(labels)
    best_val, best_v = -math.inf, None
    g = [(2.0 ** y - 1.0) if gain == "exp2" else float(y) for y in labels]
    ideal = max(sum(g[i] / math.log2(1 + (r - p[i] + 1)) for i in range(r) if r - p[i] + 1 <= k)
                for p in itertools.permutations(range(1, r + 1)))
    for v in itertools.permutations(range(1, r + 1)):
        n = ndcg_at_k(v, labels, k, gain, best=ideal)
        delta = 0.0 if n is None else 1.0 - n
        val = delta + sum((v[i] - rho[i]) * scores[i] for i in range(r))
        if val > best_val:
            best_val, best_v = val, v
    return best_val, best_v


def confusion(v, labels):
    a = sum(1 for vi, y in zip(v, labels) if vi > 0 and y > 0)
    b = sum(1 for vi, y in zip(v, labels) if vi > 0 and not y > 0)
    c = sum(1 for vi, y in zip(v, labels) if vi < 0 and y > 0)
    d = sum(1 for vi, y in zip(v, labels) if vi < 0 and not y > 0)
    return a, b, c, d


def measure_value(measure, a, b, c, d):
    def ratio(num, den):
        if den == 0:
            return 1.0 if b == 0 and c == 0 else 0.0
        return num / den

    if measure == "precision":
        return ratio(a, a + b)
    if measure == "recall":
        return ratio(a, a + c)
    if measure == "f1":
        return ratio(2 * a, 2 * a + b + c)
    if measure == "accuracy":
        return (a + d) / (a + b + c + d)
    raise ValueError(measure)


def feasible(v, k, constraint):
    ones = sum(1 for x in v if x > 0)
    return {"any": True, "eq": ones == k, "ge": ones >= k, "le": ones <= k}[constraint]


def multivariate_reference_brute(labels, k, constraint):
    """ρ of the multivariate hinge, by enumeration: the average of the v ∈ V closest to y.

    y is the ±1 vector of the labels (relevant when > 0); "closest" is the smallest Hamming
    distance (ρ = y when y ∈ V). Enumerates all 2^r sign vectors; independent of the fast code.
    """
    r = len(labels)
    yv = [1 if lab > 0 else -1 for lab in labels]
    best, members = None, []
    for v in itertools.product((-1, 1), repeat=r):
        if not feasible(v, k, constraint):
            continue
        dist = sum(1 for a, b in zip(v, yv) if a != b)
        if best is None or dist < best:
            best, members = dist, [v]
        elif dist == best:
            members.append(v)
    return [sum(v[i] for v in members) / len(members) for i in range(r)]


def multivariate_hinge_brute(scores, labels, measure, k, constraint, rho):
    """max over all v ∈ V ⊆ {±1}^r of Δ(v, y) + Σ (v_i − ρ_i) s_i (UML eq. 17.14)."""
    r = len(scores)
    best_val, best_v = -math.inf, None
    for v in itertools.product((-1, 1), repeat=r):
        if not feasible(v, k, constraint):
            continue
        delta = 1.0 - measure_value(measure, *confusion(v, labels))
        val = delta + sum((v[i] - rho[i]) * scores[i] for i in range(r))
        if val > best_val:
            best_val, best_v = val, v
    return best_val, best_v


def kendall_hinge_loop(scores, labels):
    """(2 / r(r−1)) Σ_{i<j} max(0, 1 − sign(y_i − y_j)(s_i − s_j))."""
    r = len(scores)
    if r < 2:
        return 0.0
    total = 0.0
    for i in range(r):
        for j in range(i + 1, r):
            sg = int(labels[i] > labels[j]) - int(labels[i] < labels[j])
            total += max(0.0, 1.0 - sg * (scores[i] - scores[j]))
    return 2.0 * total / (r * (r - 1))


def kendall_tau_loss(scores, labels):
    """(2 / r(r−1)) Σ_{i<j} [sign(s_i − s_j) ≠ sign(y_i − y_j)]."""
    r = len(scores)
    if r < 2:
        return 0.0
    bad = 0
    for i in range(r):
        for j in range(i + 1, r):
            ss = int(scores[i] > scores[j]) - int(scores[i] < scores[j])
            sy = int(labels[i] > labels[j]) - int(labels[i] < labels[j])
            bad += ss != sy
    return 2.0 * bad / (r * (r - 1))


# ------------------------------------------------------------------ pairwise reduction


def naive_pairs(labels, offsets):
    """NaiveRankTrain / RankTrain: every ordered pair u ≠ v of a query with different labels.

    Returns a list of (u, v, y) with y = +1 when u is preferred (higher label).
    """
    out = []
    for q in range(len(offsets) - 1):
        for u in range(offsets[q], offsets[q + 1]):
            for v in range(offsets[q], offsets[q + 1]):
                if u != v and labels[u] != labels[v]:
                    out.append((u, v, 1 if labels[u] > labels[v] else -1))
    return out


def ideal_positions(labels_of_query):
    """σ: 1-based position in the ideal ranking (label descending), ties share their mean."""
    n = len(labels_of_query)
    out = []
    for i in range(n):
        above = sum(1 for j in range(n) if labels_of_query[j] > labels_of_query[i])
        equal = sum(1 for j in range(n) if labels_of_query[j] == labels_of_query[i])
        out.append(above + (equal + 1) / 2.0)
    return out


def naive_aggregate(f_of_pair, offsets):
    """NaiveRankTest: score_u += f(x_uv), score_v −= f(x_uv) over ordered pairs u ≠ v."""
    n = offsets[-1]
    score = [0.0] * n
    for q in range(len(offsets) - 1):
        for u in range(offsets[q], offsets[q + 1]):
            for v in range(offsets[q], offsets[q + 1]):
                if u != v:
                    y = f_of_pair(u, v)
                    score[u] += y
                    score[v] -= y
    return score
