r"""What the clicks of a log say about position bias once the relevance is given.

:func:`propensity_given_relevance` is regression-EM's M-step for θ on its own: with each shown document's
relevance probability γ fixed (the true relevance in a simulation, or any regression of it), the θ_k that
maximise the PBM likelihood of the clicks. With the true γ it shows the error the clicks' sampling noise alone
leaves; with γ from the features (cross-fitted) it shows how far the features identify θ.
"""
from __future__ import annotations

import numpy as np

from rankwise._validation import check_positive_int
from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError

__all__ = ["propensity_given_relevance"]


def propensity_given_relevance(log: ClickLog | ClickCounts, relevance, *, n_ranks: int | None = None) -> np.ndarray:
    r"""Per rank 1..R, the θ_k (relative to rank 1) that maximises the PBM log-likelihood of the clicks of
    ``log`` given the relevance:

    .. math:: \ell(\theta) = \sum_i c_i \log(\theta_{k_i}\gamma_i) + (n_i - c_i) \log(1 - \theta_{k_i}\gamma_i)

    over the (query, doc, rank) rows i of ``log.counts()`` (c clicks of n impressions at rank k), with γ the
    ``relevance`` of the row's (query, doc) pair: one probability per pair of ``log`` in the order of
    ``log.pair_keys()`` (values are clipped to [1e-6, 1 − 1e-6]). Each θ_k is found by bisection in (0, 1]
    (the likelihood is concave in θ_k); a rank where ℓ still rises at θ = 1 (or that the log never shows) gets 1
    before the scaling. ``n_ranks``: R (default: the deepest rank of the log). Returns the float64 array
    θ / θ_1 of length R (``propensity_`` form).
    """
    from rankwise.clicks.propensity import _theta_given_gamma

    if not isinstance(log, (ClickLog, ClickCounts)):
        raise InputError(f"log must be a ClickLog or ClickCounts; got {type(log).__name__}")
    counts = log.counts() if isinstance(log, ClickLog) else log
    try:
        gamma = np.asarray(relevance, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"relevance must be numeric, one probability per (query, doc) pair; got "
                         f"{type(relevance).__name__}") from None
    if gamma.shape != (counts.n_pairs,):
        raise InputError(f"relevance must hold one value per (query, doc) pair of the log ({counts.n_pairs}, in the "
                         f"order of log.pair_keys()); got shape {gamma.shape}")
    if not np.all(np.isfinite(gamma)):
        raise InputError("relevance contains NaN or inf")
    if len(counts.rank) == 0:
        raise InputError("the log has no impressions: no rank to estimate")
    R = int(counts.max_rank) if n_ranks is None else check_positive_int(n_ranks, "n_ranks")
    if R < counts.max_rank:
        raise InputError(f"n_ranks={R} is less than the deepest rank of the log ({counts.max_rank})")
    g = np.clip(gamma[counts.pair], 1e-6, 1 - 1e-6)
    th = _theta_given_gamma(np.asarray(counts.rank, dtype=np.int64) - 1, np.asarray(counts.clicks, dtype=np.float64),
                            np.asarray(counts.impressions, dtype=np.float64), g, R)
    return th / th[0]
