"""Naive references for the models: loops straight from the formulas (slow, small inputs only)."""
from __future__ import annotations

import itertools
import math

import numpy as np


def ndcg_at_k_ties_average(scores, labels, k: int) -> float:
    """NDCG@k, exp2 gain, log2(1 + rank) discount, averaged over every order of tied scores
    (brute force over the orders of each group of tied scores); a query without a relevant
    document scores 0."""
    scores = np.asarray(scores, float)
    labels = np.asarray(labels, float)
    gains = 2.0 ** labels - 1
    ideal = sorted(gains, reverse=True)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
    if idcg == 0:
        return 0.0
    # every order that sorts the scores descending: the groups of tied scores in descending
    # order, each group in every one of its internal orders (brute force within tie groups)
    groups = [np.flatnonzero(scores == v).tolist() for v in sorted(set(scores.tolist()), reverse=True)]
    values = []
    for parts in itertools.product(*[list(itertools.permutations(g)) for g in groups]):
        perm = [i for part in parts for i in part]
        values.append(sum(gains[p] / math.log2(i + 2) for i, p in enumerate(perm[:k])) / idcg)
    return float(np.mean(values))


def mean_ndcg(scores, labels, qid, k: int = 10) -> float:
    out = []
    for q in dict.fromkeys(np.asarray(qid).tolist()):
        m = np.asarray(qid) == q
        out.append(ndcg_at_k_ties_average(np.asarray(scores)[m], np.asarray(labels)[m], k))
    return float(np.mean(out))


def listnet_loss_and_grad(s, y):
    """ListNet top-one cross entropy of one list and its gradient in the scores (Cao et al. 2007):
    ℓ = -Σ_i softmax(y)_i log softmax(s)_i,  ∂ℓ/∂s = softmax(s) - softmax(y)."""
    py = np.exp(y - y.max())
    py /= py.sum()
    ps = np.exp(s - s.max())
    ps /= ps.sum()
    return float(-(py * np.log(ps)).sum()), ps - py


def listnet_linear_objective_grad(w, b, X, y, qid, alpha):
    """Gradient of (1/m) Σ_q ListNet(X_q w + b, y_q) + α/2 ||w||², one loop per query."""
    g = alpha * w.copy()
    queries = list(dict.fromkeys(qid.tolist()))
    for q in queries:
        m = qid == q
        _, gs = listnet_loss_and_grad(X[m] @ w + b, y[m])
        g += X[m].T @ gs / len(queries)
    return g


def averaged_ogd(grad_fns, w0, lr, radius=None):
    """Projected OGD with steps lr/sqrt(t) on the sequence of gradient functions; returns (last, average)."""
    w = np.array(w0, float)
    iterates = []
    for t, gf in enumerate(grad_fns, start=1):
        w = w - lr / math.sqrt(t) * gf(w)
        if radius is not None and np.linalg.norm(w) > radius:
            w = w * radius / np.linalg.norm(w)
        iterates.append(w.copy())
    return w, np.mean(iterates, axis=0)
