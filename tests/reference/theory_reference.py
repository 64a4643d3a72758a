"""Naive references for rankwise.theory, written straight from the definitions (loops, brute force).

- measures by their textbook definitions (not the GPPM (u, φ) forms);
- the scoring performance with ties as the average over every permutation consistent with s,
  found by scanning all n! permutations;
- the supremum of the inner performance by scanning all permutations;
- C_φ(p) by its sum;
- surrogate losses as double loops.
"""
from __future__ import annotations

import itertools
import math

import numpy as np


# ------------------------------------------------------------------ measures r(y, σ), σ[k] = item at rank k+1
def dcg(y, sigma, k=None, gain="exp2"):
    total = 0.0
    for rank, item in enumerate(sigma, start=1):
        if k is not None and rank > k:
            break
        g = 2.0 ** y[item] - 1.0 if gain == "exp2" else float(y[item])
        total += g / math.log2(1.0 + rank)
    return total


def ndcg(y, sigma, k=None, gain="exp2"):
    best = max(dcg(y, p, k, gain) for p in itertools.permutations(range(len(y))))
    return dcg(y, sigma, k, gain) / best if best > 0 else 0.0


def precision(y, sigma, k):
    return sum(1.0 for item in sigma[:k] if y[item] > 0) / k


def recall(y, sigma, k):
    rel = sum(1 for v in y if v > 0)
    return sum(1.0 for item in sigma[:k] if y[item] > 0) / rel if rel else 0.0


def auc(y, sigma):
    pos = [i for i in range(len(y)) if y[i] > 0]
    neg = [i for i in range(len(y)) if y[i] <= 0]
    if not pos or not neg:
        return 0.0
    rank = {item: r for r, item in enumerate(sigma)}
    return sum(1.0 for i in pos for j in neg if rank[i] < rank[j]) / (len(pos) * len(neg))


def spearman(true_ranks, sigma):
    n = len(true_ranks)
    pred_rank = {item: r + 1 for r, item in enumerate(sigma)}
    d2 = sum((pred_rank[i] - true_ranks[i]) ** 2 for i in range(n))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def err(y, sigma, y_max=1.0):
    total, p_continue = 0.0, 1.0
    for rank, item in enumerate(sigma, start=1):
        r = (2.0 ** y[item] - 1.0) / 2.0 ** y_max
        total += p_continue * r / rank
        p_continue *= 1.0 - r
    return total


def average_precision(y, sigma):
    hits, total = 0, 0.0
    for rank, item in enumerate(sigma, start=1):
        if y[item] > 0:
            hits += 1
            total += hits / rank
    n_rel = sum(1 for v in y if v > 0)
    return total / n_rel if n_rel else 0.0


def consistent_permutations(s):
    """All σ with s[σ(1)] ≥ s[σ(2)] ≥ ... (the set argsort(s) of the paper)."""
    n = len(s)
    return [p for p in itertools.permutations(range(n)) if all(s[p[k]] >= s[p[k + 1]] for k in range(n - 1))]


def scoring_value(measure, y, s):
    perms = consistent_permutations(s)
    return sum(measure(y, p) for p in perms) / len(perms)


def best_inner_performance(measure, labels, probs):
    n = labels.shape[1]
    best = -math.inf
    for p in itertools.permutations(range(n)):
        v = sum(q * measure(y, p) for y, q in zip(labels, probs))
        best = max(best, v)
    return best


def c_phi(phi, p):
    n = len(phi)
    return sum((phi[i] - phi[n - 1 - i]) ** p for i in range(n // 2)) ** (1.0 / p)


# ------------------------------------------------------------------ losses (one list, double loops)
def duchi_hinge(s, y):
    """Σ_{i,j} 1[y_i > y_j] max(0, 1 − (s_i − s_j))."""
    return sum(max(0.0, 1.0 - (s[i] - s[j])) for i in range(len(s)) for j in range(len(s)) if y[i] > y[j])


def op_pairwise_logistic(s, v):
    """Σ_{i<j} v_i log(1+e^{−(s_i−s_j)}) + v_j log(1+e^{s_i−s_j})."""
    total = 0.0
    for i in range(len(s)):
        for j in range(i + 1, len(s)):
            d = s[i] - s[j]
            total += v[i] * math.log1p(math.exp(-d)) + v[j] * math.log1p(math.exp(d))
    return total


def pointwise_squared(s, v):
    return sum((a - b) ** 2 for a, b in zip(v, s))


def listnet_ct(s, y):
    """Chaudhuri & Tewari (2015, Sect. 3.1): −Σ_j P_j(y) log P_j(s), P_j(v) = e^{v_j}/Σ_i e^{v_i};
    returns (value, gradient P(s) − P(y))."""
    zy = sum(math.exp(v) for v in y)
    zs = sum(math.exp(v) for v in s)
    py = [math.exp(v) / zy for v in y]
    ps = [math.exp(v) / zs for v in s]
    return -sum(p * math.log(q) for p, q in zip(py, ps)), [q - p for p, q in zip(py, ps)]


def ranksvm_ct(s, y):
    """C&T (2015, appendix C): Σ_{y_i>y_j} max(0, 1 + s_j − s_i); returns (value, subgradient)."""
    value, grad = 0.0, [0.0] * len(s)
    for i in range(len(s)):
        for j in range(len(s)):
            if y[i] > y[j] and 1.0 + s[j] - s[i] > 0:
                value += 1.0 + s[j] - s[i]
                grad[j] += 1.0
                grad[i] -= 1.0
    return value, grad
