"""Naive references for rankwise.distributed: written straight from the definitions, loops only."""
from __future__ import annotations

import math


def partitions_hold_whole_queries(partitions, qid="qid") -> bool:
    """Every query id appears in exactly one partition, and its rows are contiguous there."""
    owner = {}
    for k, part in enumerate(partitions):
        seen_here = []
        for q in part[qid].tolist():
            if q in owner and owner[q] != k:
                return False
            owner[q] = k
            if seen_here and seen_here[-1] != q and q in seen_here:
                return False  # rows of q not contiguous in the partition
            if not seen_here or seen_here[-1] != q:
                seen_here.append(q)
    return True


def ndcg_at_k(scores, labels, qids, k):
    """Mean NDCG@k (gain 2^y - 1, discount 1/log2(1 + rank)) for scores without ties; empty query -> 0.

    K. Järvelin and J. Kekäläinen. Cumulated gain-based evaluation of IR techniques. ACM TOIS 20(4), 2002.
    """
    lists = {}
    order = []
    for s, y, q in zip(scores, labels, qids):
        if q not in lists:
            lists[q] = []
            order.append(q)
        lists[q].append((s, y))
    values = {}
    for q in order:
        items = lists[q]
        ranked = sorted(items, key=lambda t: -t[0])
        dcg = sum((2 ** y - 1) / math.log2(i + 2) for i, (_, y) in enumerate(ranked[:k]))
        ideal = sorted((y for _, y in items), reverse=True)
        idcg = sum((2 ** y - 1) / math.log2(i + 2) for i, y in enumerate(ideal[:k]))
        values[q] = dcg / idcg if idcg > 0 else 0.0
    return values


def standardization_stats(rows, *, sparse=False):
    """Per-feature centre and scale of ``rows`` (a list of lists of floats), straight from the definitions.

    Dense: mean and population standard deviation. Sparse: no centring, root mean square.
    A scale of at most 1e-12 becomes 1 (constant feature), as in rankwise's Standardizer.
    """
    n, d = len(rows), len(rows[0])
    means, scales = [], []
    for j in range(d):
        col = [float(r[j]) for r in rows]
        mu = 0.0 if sparse else math.fsum(col) / n
        sd = math.sqrt(math.fsum((v - mu) ** 2 for v in col) / n)
        means.append(mu)
        scales.append(sd if sd > 1e-12 else 1.0)
    return means, scales
