"""Naive reference for rankwise.data.recsys: the time split and the candidate features written
straight from their definitions, with Python loops over every rating (slow and obvious on purpose).
"""
from __future__ import annotations

import math

import numpy as np


def temporal_split_naive(user, item, rating, ts, test_fraction, min_train=1):
    """Per user: cutoff = time of the ceil(f n)-th latest rating; test = ratings at or after it."""
    out_train, out_test, cutoffs = [], [], {}
    for u in sorted(set(user.tolist())):
        rows = [r for r in range(len(user)) if user[r] == u]
        times = sorted((ts[r] for r in rows), reverse=True)
        k = math.ceil(test_fraction * len(rows))
        cut = times[k - 1]
        train = [r for r in rows if ts[r] < cut]
        test = [r for r in rows if ts[r] >= cut]
        if len(train) < min_train:
            out_train += rows
        else:
            out_train += train
            out_test += test
            cutoffs[u] = cut
    return sorted(out_train), sorted(out_test), cutoffs


def features_naive(train_rows, user, item, rating, ts, cutoffs, cand_user, cand_item, genres_of, year_of):
    """One feature vector per candidate (u, i), from training ratings only, by the documented rules."""
    t0 = min(ts[r] for r in train_rows)
    last_of_user = {}
    for r in train_rows:
        last_of_user[user[r]] = max(last_of_user.get(user[r], -1), ts[r])
    out = []
    years = [y for y in year_of.values() if np.isfinite(y)]
    year_fill = float(np.mean(years)) if years else 0.0
    for u, i in zip(cand_user.tolist(), cand_item.tolist()):
        t = cutoffs[u] if u in cutoffs else last_of_user[u] + 1
        before = [r for r in train_rows if ts[r] < t]
        gmean = np.mean([rating[r] for r in before]) if before else np.mean([rating[r] for r in train_rows])
        R_i = [r for r in before if item[r] == i and user[r] != u]
        cnt = len(R_i)
        imean = np.mean([rating[r] for r in R_i]) if cnt else gmean
        d_last = (t - (max(ts[r] for r in R_i) if cnt else t0)) / 86400.0
        d_first = (t - min(ts[r] for r in R_i)) / 86400.0 if cnt else 0.0
        R_u = [r for r in train_rows if user[r] == u]
        ucount = len(R_u)
        umean = np.mean([rating[r] for r in R_u]) if ucount else gmean
        udays = (t - max(ts[r] for r in R_u)) / 86400.0 if ucount else 0.0
        g = genres_of[i]
        others = [r for r in R_u if item[r] != i]
        if g.sum() > 0:
            shares = [sum(genres_of[item[r]][k] for r in others) / max(len(others), 1) for k in range(len(g)) if g[k]]
            share = float(np.mean(shares))
        else:
            share = 0.0
        y = year_of[i] if np.isfinite(year_of[i]) else year_fill
        out.append([cnt, imean, d_last, d_first, y, ucount, umean, udays, share, *g.tolist()])
    return np.asarray(out, dtype=np.float64)
