"""What every rankwise model shares: the scikit-learn estimator contract for rankers."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from rankwise._validation import check_features, check_ranking_input
from rankwise.errors import InputError, NotFittedError


class BaseRanker(BaseEstimator):
    """Base class of rankwise rankers.

    Subclasses store their constructor arguments untouched, validate in ``fit`` (through
    :func:`rankwise._validation.check_ranking_input`), set fitted attributes ending in ``_``
    (at least ``n_features_in_``) and return ``self``. ``predict(X)`` returns one score per row.
    """

    _estimator_type = "ranker"

    def _check_is_fitted(self) -> None:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X, y, qid=...) first")

    def _check_predict_features(self, X, *, allow_nan: bool = False):
        self._check_is_fitted()
        Xv = check_features(X, allow_nan=allow_nan)
        if Xv.shape[1] != self.n_features_in_:
            raise InputError(f"X has {Xv.shape[1]} features but {type(self).__name__} was fitted with "
                             f"{self.n_features_in_}")
        return Xv

    def score(self, X, y=None, *, qid=None, sample_weight=None) -> float:
        """Mean NDCG@10 (exp2 gain, ties averaged, empty queries 0) of ``predict(X)``."""
        from rankwise.metrics import ndcg

        data = check_ranking_input(X, y, qid)
        scores = self.predict(data.X)
        return float(ndcg(scores, data.y, qid=np.repeat(np.arange(data.n_queries), np.diff(data.offsets)),
                          k=10, gain="exp2", ties="average", empty=0.0))
