"""Minimal MQ2008 reader for the metric cross-checks (labels, qid, docid, features)."""
from __future__ import annotations

import gzip
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=None)
def load_fold(path: str):
    labels, qids, docs, feats = [], [], [], []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            body, _, comment = line.partition("#")
            parts = body.split()
            labels.append(float(parts[0]))
            qids.append(parts[1].split(":", 1)[1])
            feats.append([float(p.split(":", 1)[1]) for p in parts[2:]])
            docs.append(comment.split("=", 1)[1].split()[0])
    return np.array(feats), np.array(labels), np.array(qids), np.array(docs)


def score_sets(X):
    """(a) model-like scores: a fixed random linear scorer; (b) the same rounded: ties everywhere."""
    w = np.random.default_rng(2026).normal(size=X.shape[1])
    s = X @ w
    return {"model": s, "rounded": np.round(s, 0)}
