"""The one rule by which the click package splits queries: held-out queries and cross-fitting folds.

Every split of a click log (:func:`~rankwise.clicks.split_log_by_query`, :func:`~rankwise.clicks.select_clip`,
:func:`~rankwise.clicks.direct_relevance`, regression-EM's ``cross_fit`` and ``n_estimators="auto"``) shuffles
the queries with ``numpy.random.default_rng(random_state).permutation(n_queries)`` and cuts that permutation:
all rows of a query land on one side, and the same seed gives the same split everywhere.
"""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError


def query_codes(query, m: int, *, why: str) -> tuple[np.ndarray, int]:
    """``(code per row, number of queries)`` of a per-row query array of ``m`` rows (codes in order of first
    appearance). ``why`` names the option that needs the queries (in the error when ``query`` is None)."""
    import pandas as pd

    if query is None:
        raise InputError(f"{why} needs the query of every row (query=...; RegressionEM.fit passes it)")
    codes, _ = pd.factorize(np.asarray(query))
    if len(codes) != m:
        raise InputError(f"query must have one entry per row ({m}); got {len(codes)}")
    return codes, int(codes.max()) + 1 if len(codes) else 0


def query_folds(n_queries: int, n_folds: int, random_state) -> np.ndarray:
    """Fold ``0..n_folds-1`` of each of ``n_queries`` queries: the shuffled queries dealt round-robin."""
    return np.random.default_rng(random_state).permutation(n_queries) % n_folds


def held_out_queries(n_queries: int, fraction: float, random_state) -> np.ndarray:
    """Boolean mask over ``n_queries`` queries: a random ``fraction`` of them (rounded; at least one, never all)."""
    if n_queries < 2:
        raise InputError(f"holding out queries needs at least 2 queries (one is held out); got {n_queries}")
    n_val = min(max(int(round(fraction * n_queries)), 1), n_queries - 1)
    held = np.zeros(n_queries, dtype=bool)
    held[np.random.default_rng(random_state).permutation(n_queries)[:n_val]] = True
    return held
