from __future__ import annotations

import numpy as np


def make_data(n_queries=40, list_len=10, n_features=6, seed=0, shuffle=False):
    """Small synthetic ranking data: graded labels from a noisy linear score."""
    rng = np.random.default_rng(seed)
    n = n_queries * list_len
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    w = np.linspace(1.0, -0.5, n_features)
    z = X @ w + 0.3 * rng.normal(size=n)
    y = np.digitize(z, [-0.5, 0.5, 1.5]).astype(np.float64)
    qid = np.repeat(np.arange(n_queries), list_len)
    if shuffle:
        p = rng.permutation(n)
        X, y, qid = X[p], y[p], qid[p]
    return X, y, qid


