"""Baselines that rank by one feature: popularity and item mean for recommendation.

A learned ranker is worth its cost only if it beats the obvious orderings. In recommendation those
are **popularity** (most-rated items first) and **item mean** (best-rated items first), both
measured on the training period only. :func:`rankwise.data.recsys.candidate_features` already
computes them without leakage (as of each user's cutoff, the user's own rating left out) as the
columns ``item_count`` and ``item_mean_rating``; the baselines score each row by that column, so
they see exactly the information the models see and nothing more.

.. math::

    s_{\\text{pop}}(u, i) = |R_i^{<t_u}|, \\qquad
    s_{\\text{mean}}(u, i) = \\frac{1}{|R_i^{<t_u}|} \\sum_{r \\in R_i^{<t_u}} r

with :math:`R_i^{<t_u}` the training ratings of item ``i`` by other users before ``u``'s cutoff
(no rating: the global mean before :math:`t_u`). They have the rankers' contract, ``fit(X, y, *,
qid=None, sample_weight=None, eval_set=None)`` / ``predict(X, *, qid=None)``, so they fit in any
loop or table of models; ``fit`` learns nothing but where the column is.

References
----------
P. Cremonesi, Y. Koren and R. Turrin. Performance of recommender algorithms on top-N
recommendation tasks. RecSys 2010 (popularity as the baseline every model must beat).
"""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.models.base import BaseRanker

__all__ = ["FeatureRanker", "PopularityRanker", "ItemMeanRanker"]


def _column_names(X):
    """Column names carried by ``X`` (RankingDataset, pandas DataFrame), else None."""
    names = getattr(X, "feature_names", None)
    if names is None and hasattr(X, "columns") and hasattr(X, "iloc"):
        names = [str(c) for c in X.columns]
    return None if names is None else list(names)


class FeatureRanker(BaseRanker):
    """Ranker whose score is one feature column: ``s(x) = x_j`` (or ``−x_j`` with ``ascending``).

    Parameters
    ----------
    feature : int or str
        The column: an index, or a name looked up in ``X``'s feature names at ``fit`` (``X`` a
        :class:`~rankwise.data.RankingDataset` or a pandas DataFrame).
    ascending : bool
        Rank small values first.

    Attributes
    ----------
    feature_index_ : int
    n_features_in_ : int
    """

    def __init__(self, feature=0, *, ascending=False):
        self.feature = feature
        self.ascending = ascending

    def _resolve(self, X) -> int:
        names = _column_names(X)
        f = self.feature
        if isinstance(f, str):
            if names is None:
                raise InputError(f"feature={f!r} is a column name but X has no feature names; pass X as a "
                                 "RankingDataset or a pandas DataFrame, or give the column index")
            if f not in names:
                raise InputError(f"feature={f!r} is not a column of X; its columns are {names}")
            return names.index(f)
        if isinstance(f, (bool, np.bool_)) or not isinstance(f, (int, np.integer)):
            raise InputError(f"feature must be a column index or name; got {f!r}")
        return int(f)

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None):
        """Find the column (and check the data as every ranker does); returns ``self``.

        ``y``, ``qid``, ``sample_weight`` are validated but not used: nothing is learned.
        ``eval_set`` fills ``history_`` with the validation NDCG@10, as for the other rankers.
        """
        if not isinstance(self.ascending, (bool, np.bool_)):
            raise InputError(f"ascending must be True or False; got {self.ascending!r}")
        j = self._resolve(X)
        data, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set)
        n_features = int(data.X.shape[1])
        if not 0 <= j < n_features:
            raise InputError(f"feature={self.feature!r} is out of range for X with {n_features} features")
        self.feature_index_ = j
        self.n_features_in_ = n_features
        self.history_ = {}
        if val is not None:
            from rankwise.metrics import ndcg

            qidx = np.repeat(np.arange(val.n_queries), np.diff(val.offsets))
            self.history_ = {"ndcg@10": [float(ndcg(self._score(val.X), val.y, qid=qidx, k=10))]}
        return self

    def _score(self, Xv) -> np.ndarray:
        col = Xv[:, self.feature_index_]
        col = np.asarray(col.todense()).ravel() if hasattr(col, "todense") else np.asarray(col).ravel()
        col = col.astype(np.float64)
        return -col if self.ascending else col

    def _predict_rows(self, Xv) -> np.ndarray:
        """Scores of validated rows (the hook of the rankers' shared ``predict`` and ``score``)."""
        return self._score(Xv)

    def predict(self, X, *, qid=None):
        """The column's values (negated with ``ascending``), one score per row; ``qid`` is not needed
        (its length is checked)."""
        Xv = self._check_predict_features(X)
        if qid is not None and np.shape(qid) != (Xv.shape[0],):
            raise InputError(f"qid has shape {np.shape(qid)} but X has {Xv.shape[0]} rows; one query id per row "
                             "is expected")
        return self._score(Xv)

    def _get_state(self):
        return {"n_features_in_": self.n_features_in_, "feature_index_": self.feature_index_,
                "history_": {k: [float(v) for v in vals] for k, vals in getattr(self, "history_", {}).items()}}, {}

    def _set_state(self, state, arrays):
        self.n_features_in_ = int(state["n_features_in_"])
        self.feature_index_ = int(state["feature_index_"])
        if not 0 <= self.feature_index_ < self.n_features_in_:
            raise InputError(f"corrupt model file: feature_index_ {self.feature_index_} is outside "
                             f"0..{self.n_features_in_ - 1}")
        self.history_ = {k: list(v) for k, v in state.get("history_", {}).items()}


class PopularityRanker(FeatureRanker):
    """Most popular first: the score is the item's training-period rating count (``item_count``).

    The count comes from :func:`rankwise.data.recsys.candidate_features` (ratings by other users
    before the user's cutoff). ``feature`` may name or index another count column.
    """

    def __init__(self, feature="item_count", *, ascending=False):
        super().__init__(feature, ascending=ascending)


class ItemMeanRanker(FeatureRanker):
    """Best rated first: the score is the item's training-period mean rating (``item_mean_rating``).

    Items without a rating before the cutoff get the global mean (see
    :func:`rankwise.data.recsys.candidate_features`), so they sit in the middle, not at the bottom.
    """

    def __init__(self, feature="item_mean_rating", *, ascending=False):
        super().__init__(feature, ascending=ascending)
