"""Naive loop references for every loss in rankwise.losses, written straight from the formulas.

Each function takes one list as Python sequences (scores s, labels y, item weights w) and
returns a float. No vectorisation, no tricks: double loops over pairs, explicit sums.
"""
from __future__ import annotations

import math


def _u(y, utility):
    if utility == "linear":
        return list(y)
    if utility == "exp2":
        return [2.0 ** t - 1 for t in y]
    raise ValueError(utility)


def _sp(x):  # log(1 + e^x), stable
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _exp(t, clip=50.0):
    return math.exp(t) if t <= clip else math.exp(clip) * (1 + t - clip)


def _phi_alpha(x, a):
    if x <= 0:
        return 0.0
    if x <= a:
        return x * x / (2 * a)
    return x - a / 2


def pointwise_squared(s, y, w, utility="linear"):
    v = _u(y, utility)
    return sum(w[i] * (v[i] - s[i]) ** 2 for i in range(len(s)))


def pointwise_utility_regression(s, y, w, utility="exp2"):
    return pointwise_squared(s, y, w, utility)


def pointwise_logistic(s, y, w, utility="linear", eta=1.0):
    v = _u(y, utility)
    return sum(w[i] * (v[i] * math.log1p(math.exp(-s[i])) + (eta - v[i]) * math.log1p(math.exp(s[i])))
               for i in range(len(s)))


def pointwise_exponential(s, y, w, utility="linear", eta=1.0):
    v = _u(y, utility)
    return sum(w[i] * (v[i] * _exp(-s[i]) + (eta - v[i]) * _exp(s[i])) for i in range(len(s)))


def pointwise_squared_hinge(s, y, w, utility="linear", eta=1.0, t=1.0):
    v = _u(y, utility)
    return sum(w[i] * (v[i] * max(0.0, t - s[i]) ** 2 + (eta - v[i]) * max(0.0, s[i]) ** 2)
               for i in range(len(s)))


def pointwise_smooth_hinge(s, y, w, utility="linear", eta=1.0, alpha=0.25):
    v = _u(y, utility)
    return sum(w[i] * (v[i] * _phi_alpha(1 - s[i], alpha) + (eta - v[i]) * _phi_alpha(s[i], alpha))
               for i in range(len(s)))


def sigmoid_ce(s, y, w):
    out = 0.0
    for i in range(len(s)):
        p = 1 / (1 + math.exp(-s[i]))
        out += w[i] * -(y[i] * math.log(p) + (1 - y[i]) * math.log(1 - p))
    return out


def _ranks(s):
    """1-based ranks by descending score, ties by input order."""
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    r = [0] * len(s)
    for pos, i in enumerate(order):
        r[i] = pos + 1
    return r


def _idcg(g, k=None):
    gs = sorted(g, reverse=True)
    if k is not None:
        gs = gs[:k]
    return sum(gi / math.log2(2 + j) for j, gi in enumerate(gs))


def _pair_weight(s, y, i, j, kind):
    if kind == "none":
        return 1.0
    if kind == "delta_label":
        return abs(y[i] - y[j])
    g = [2.0 ** t - 1 for t in y]
    r = _ranks(s)
    idcg = _idcg(g)
    if idcg == 0:
        return 0.0
    return abs(g[i] - g[j]) * abs(1 / math.log2(1 + r[i]) - 1 / math.log2(1 + r[j])) / idcg


def pairwise_hinge(s, y, w, pair_weights="none", method=None):
    n = len(s)
    return sum(w[i] * w[j] * _pair_weight(s, y, i, j, pair_weights) * max(0.0, 1 - (s[i] - s[j]))
               for i in range(n) for j in range(n) if y[i] > y[j])


def ranknet(s, y, w, sigma=1.0, pair_weights="none"):
    n = len(s)
    return sum(w[i] * w[j] * _pair_weight(s, y, i, j, pair_weights) * math.log(1 + math.exp(-sigma * (s[i] - s[j])))
               for i in range(n) for j in range(n) if y[i] > y[j])


def rankboost(s, y, w, pair_weights="none", method=None):
    n = len(s)
    return sum(w[i] * w[j] * _pair_weight(s, y, i, j, pair_weights) * _exp(-(s[i] - s[j]))
               for i in range(n) for j in range(n) if y[i] > y[j])


def pairwise_squared(s, y, w, utility="linear", method=None):
    v = _u(y, utility)
    n = len(s)
    return sum(w[i] * w[j] * ((v[i] - v[j]) - (s[i] - s[j])) ** 2 for i in range(n) for j in range(i + 1, n))


def op_pairwise(s, y, w, utility="linear", phi="logistic", method=None):
    v = _u(y, utility)
    f = {"logistic": lambda t: math.log(1 + math.exp(-t)), "exponential": lambda t: _exp(-t),
         "squared_hinge": lambda t: max(0.0, 1 - t) ** 2}[phi]
    n = len(s)
    return sum(w[i] * w[j] * (v[i] * f(s[i] - s[j]) + v[j] * f(s[j] - s[i]))
               for i in range(n) for j in range(i + 1, n))


def kendall_hinge(s, y, w, method=None):
    r = len(s)
    if r < 2:
        return 0.0
    tot = 0.0
    for i in range(r):
        for j in range(i + 1, r):
            sg = (y[i] > y[j]) - (y[i] < y[j])
            tot += w[i] * w[j] * max(0.0, 1 - sg * (s[i] - s[j]))
    return 2 * tot / (r * (r - 1))


def listnet(s, y, w, temperature=1.0):
    zy = sum(math.exp(t) for t in y)
    zs = sum(math.exp(t / temperature) for t in s)
    return -sum(w[i] * (math.exp(y[i]) / zy) * math.log(math.exp(s[i] / temperature) / zs) for i in range(len(s)))


def listmle(s, y, w):
    order = sorted(range(len(s)), key=lambda i: (-y[i], i))
    out = 0.0
    for k, i in enumerate(order):
        out += w[i] * (math.log(sum(math.exp(s[j]) for j in order[k:])) - s[i])
    return out


def _gain(y, gain):
    return [2.0 ** t - 1 for t in y] if gain == "exp2" else list(y)


def smooth_dcg(s, y, w, k=10, sigma=1.0, gain="exp2"):
    g = _gain(y, gain)
    idcg = _idcg(g, k)
    if idcg == 0:
        return 0.0
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    tot = 0.0
    for j in range(min(k, len(s))):
        d = order[j]
        z = sum(math.exp(-((s[l] - s[d]) ** 2) / sigma) for l in range(len(s)))
        for i in range(len(s)):
            h = math.exp(-((s[i] - s[d]) ** 2) / sigma) / z
            tot += w[i] * g[i] * h / math.log2(2 + j)
    return -tot / idcg


def smooth_dcg1(s, y, w, sigma=1.0, gain="exp2"):
    g = _gain(y, gain)
    z = sum(math.exp(t / sigma) for t in s)
    return -sum(w[i] * g[i] * math.exp(s[i] / sigma) / z for i in range(len(s)))


def lambdaloss(s, y, w, sigma=1.0, weighting="ndcg2pp", mu=5.0, truncation_level=None, gain="exp2"):
    """Wang et al. CIKM 2018, straight from the definitions: Σ W_ij log2(1 + e^{-σ(s_i - s_j)})
    over the pairs y_i > y_j (NDCG-Loss1: every ordered pair i != j), G = gain / maxDCG@T,
    D = log2(1 + rank), δ(k) = |1/D(k) - 1/D(k + 1)|; with T only pairs with an item in the top T."""
    g = [2.0 ** t - 1 for t in y] if gain == "exp2" else list(y)
    idcg = _idcg(g, truncation_level)
    if idcg == 0:
        return 0.0
    G = [x / idcg for x in g]
    r = _ranks(s)
    n = len(s)
    tot = 0.0
    for i in range(n):
        for j in range(n):
            if i == j or (weighting != "ndcg1" and not y[i] > y[j]):
                continue
            if truncation_level is not None and min(r[i], r[j]) > truncation_level:
                continue
            kk = abs(r[i] - r[j])
            ndcg2 = abs(1 / math.log2(1 + kk) - 1 / math.log2(2 + kk)) * abs(G[i] - G[j])
            lrank = abs(G[i] - G[j]) * abs(1 / math.log2(1 + r[i]) - 1 / math.log2(1 + r[j]))
            W = {"ndcg1": G[i] / math.log2(1 + r[i]), "ndcg2": ndcg2, "lambdarank": lrank,
                 "ndcg2pp": mu * ndcg2 + lrank}[weighting]
            tot += w[i] * w[j] * W * math.log2(1 + math.exp(-sigma * (s[i] - s[j])))
    return tot


def approx_ndcg(s, y, w, alpha=10.0, gain="exp2"):
    g = _gain(y, gain)
    idcg = _idcg(g)
    if idcg == 0:
        return 0.0
    n = len(s)
    tot = 0.0
    for i in range(n):
        pos = 1 + sum(1 / (1 + math.exp(alpha * (s[i] - s[j]))) for j in range(n) if j != i)
        tot += w[i] * g[i] / math.log2(1 + pos)
    return -tot / idcg


def bregman(s, y, w, utility="linear", psi="squared", link="identity"):
    v = _u(y, utility)
    g = [t if link == "identity" else _exp(t) for t in s]
    if psi == "squared":
        # B(v||g) = ψ(v) - ψ(g) - <∇ψ(g), v - g> with ψ = ½‖x‖²
        return sum(w[i] * (0.5 * v[i] ** 2 - 0.5 * g[i] ** 2 - g[i] * (v[i] - g[i])) for i in range(len(s)))
    def ent(x):
        return x * math.log(x) - x if x > 0 else 0.0
    return sum(w[i] * (ent(v[i]) - ent(g[i]) - math.log(g[i]) * (v[i] - g[i])) for i in range(len(s)))


REFERENCE = {name: fn for name, fn in globals().items()
             if callable(fn) and not name.startswith("_") and name not in ("annotations",)}


def lambdarank(s, y, w, sigma=1.0, truncation_level=50, norm=True, gain="exp2"):
    """LightGBM's lambdarank as a loss (rank_objective.hpp, read as a formula): pairs y_i > y_j with
    min(r_i, r_j) <= T, ΔNDCG over max DCG@T, divided by 0.01 + |s_i - s_j| unless all scores are
    equal, the list scaled by log2(1 + S)/S with S the sum of 2|lambda_ij|."""
    g = _gain(y, gain)
    n = len(s)
    idcg = _idcg(g, truncation_level)
    if idcg <= 0:
        return 0.0
    r = _ranks(s)
    T = n if truncation_level is None else truncation_level
    spread = max(s) != min(s)
    tot, lam = 0.0, 0.0
    for i in range(n):
        for j in range(n):
            if y[i] > y[j] and min(r[i], r[j]) <= T:
                wt = w[i] * w[j] * abs(g[i] - g[j]) * abs(1 / math.log2(1 + r[i]) - 1 / math.log2(1 + r[j])) / idcg
                if norm and spread:
                    wt /= 0.01 + abs(s[i] - s[j])
                tot += wt * math.log1p(math.exp(-sigma * (s[i] - s[j])))
                lam += 2 * wt * sigma / (1 + math.exp(sigma * (s[i] - s[j])))
    if norm and lam > 0:
        tot *= math.log2(1 + lam) / lam
    return tot
