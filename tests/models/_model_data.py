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




def make_heavy_tailed(n_queries=80, n_features=136, seed=0, tail=3.0):
    """MSLR-like raw features: each synthetic (Gaussian) feature x becomes ``scale * exp(a x)``, a
    log-normal with a heavy right tail (a up to ``tail``) and a raw scale from 1e-2 to 1e6, as
    MSLR-WEB's unnormalised counts, PageRank and BM25 columns; labels keep MSLR's histogram and
    lists MSLR's lengths (rankwise.data.make_synthetic). Returns (X, y, qid, n_train_rows): the
    first 5/8 of the queries for training, the rest held out."""
    from rankwise.data import make_synthetic

    full = make_synthetic(n_queries, n_features=n_features, seed=seed)
    rng = np.random.default_rng(seed + 1)
    a = rng.uniform(0.5, tail, n_features)
    scale = 10.0 ** rng.uniform(-2, 6, n_features)
    X = np.exp(a * full.X.astype(np.float64)) * scale
    cut = int(full.query_offsets[n_queries * 5 // 8])
    return X, full.labels, full.qid, cut
