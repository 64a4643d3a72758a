"""What every rankwise model shares: the scikit-learn estimator contract for rankers.

Estimator contract
------------------
Subclasses store their constructor arguments untouched, validate in ``fit`` (through
:meth:`BaseRanker._validate_fit`, which wraps :func:`rankwise.data.ranking_input.check_ranking_input`),
set fitted attributes ending in ``_`` (at least ``n_features_in_``) and return ``self``.
``predict(X)`` returns one score per row (the one deviation: the listwise attention
``NeuralRanker`` needs ``predict(X, qid=qid)``, since a document's score depends on its query's
other documents). ``score(X, y, *, qid, sample_weight=None)`` is mean NDCG@10 (weighted
by query with ``sample_weight``).

``qid`` reaches ``fit`` and ``score`` inside scikit-learn meta-estimators through metadata
routing::

    sklearn.set_config(enable_metadata_routing=True)
    est = LinearRanker().set_fit_request(qid=True).set_score_request(qid=True)
    GridSearchCV(est, grid, cv=GroupKFold(3)).fit(X, y, qid=qid, groups=qid)

Saving and loading (protocol for every subclass)
------------------------------------------------
``model.save(path)`` and ``rankwise.load(path)`` write/read one ``.npz`` file with JSON metadata
and numeric arrays, never pickle (format described in :mod:`rankwise.models.persistence`).
Every subclass is registered by class name automatically; to be saveable it implements::

    def _get_state(self) -> tuple[dict, dict[str, np.ndarray]]: ...   # JSON-able scalars, arrays
    def _set_state(self, state: dict, arrays: dict[str, np.ndarray]) -> None: ...

and, only if some constructor parameter is not JSON-able, ``_get_params_state`` /
``_params_from_state``.
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator

from rankwise._validation import check_features
from rankwise.data.ranking_input import RankingInput, check_ranking_input
from rankwise.errors import InputError, NotFittedError
from rankwise.models import persistence


class BaseRanker(BaseEstimator):
    """Base class of rankwise rankers (see the module docstring for the contract)."""

    _estimator_type = "ranker"
    #: parameters that may differ between a checkpoint and the ``fit(..., resume=...)`` continuing it
    _resume_free_params: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            persistence.register_model(cls)

    # -- fitted state -------------------------------------------------------------------------
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

    def _check_resume_features(self, state: dict, n_features: int, path) -> None:
        """A checkpoint continues only on data with the features it was fitted on."""
        try:
            n_ckpt = int(state["n_features_in_"])
        except (KeyError, TypeError, ValueError) as exc:
            raise persistence.corrupt(path, exc, "a rankwise checkpoint") from None
        if n_ckpt != n_features:
            raise InputError(f"resume={str(path)!r}: the checkpoint was fitted on {n_ckpt} features but X has "
                             f"{n_features}; resume with the same features as the interrupted run")

    # -- validation ---------------------------------------------------------------------------
    def _validate_fit(self, X, y, qid, *, sample_weight=None, eval_set=None, allow_nan: bool = False
                      ) -> tuple[RankingInput, RankingInput | None]:
        """Validate training data and the optional ``eval_set``; warn about one-document queries."""
        train = check_ranking_input(X, y, qid, sample_weight=sample_weight, allow_nan_features=allow_nan)
        if train.X.shape[0] == 0:
            raise InputError("X has 0 rows; fit needs at least one query with two or more documents")
        sizes = np.diff(train.offsets)
        if np.all(sizes < 2):
            raise InputError(f"every query in qid has a single document ({train.n_queries} queries); "
                             "a ranker needs queries with at least two documents to learn an order")
        n_single = int(np.count_nonzero(sizes < 2))
        if n_single:
            warnings.warn(f"{n_single} of {train.n_queries} queries have a single document; they carry no "
                          "ordering information and contribute nothing to pairwise or listwise losses",
                          UserWarning, stacklevel=3)
        val = None
        if eval_set is not None:
            if isinstance(eval_set, list) and len(eval_set) == 1:
                eval_set = eval_set[0]
            if hasattr(eval_set, "query_offsets"):
                val = check_ranking_input(eval_set, prefix="eval_set ", allow_nan_features=allow_nan)
            elif isinstance(eval_set, tuple) and len(eval_set) == 3:
                val = check_ranking_input(*eval_set, prefix="eval_set ", allow_nan_features=allow_nan)
            else:
                raise InputError("eval_set must be (X_val, y_val, qid_val) or a RankingDataset; "
                                 f"got {type(eval_set).__name__}"
                                 + (f" of length {len(eval_set)}" if isinstance(eval_set, (tuple, list)) else ""))
            if val.X.shape[1] != train.X.shape[1]:
                raise InputError(f"eval_set X has {val.X.shape[1]} features but X has {train.X.shape[1]}; "
                                 "the validation set must have the same features as the training set")
        return train, val

    # -- prediction / scoring -----------------------------------------------------------------
    def _predict_input(self, data: RankingInput) -> np.ndarray:
        """Scores of validated, query-grouped rows (models scoring a whole list override this)."""
        return self.predict(data.X)

    def score(self, X, y=None, *, qid=None, sample_weight=None) -> float:
        """Mean NDCG@10 (exp2 gain, ties averaged, empty queries 0) of the model's scores.

        With ``sample_weight`` (one weight per row, the same for every row of a query; the
        layout GBDT libraries use for query weights) it is the weighted mean over queries,
        :math:`\\sum_q w_q \\mathrm{NDCG@10}_q / \\sum_q w_q`.
        """
        from rankwise.metrics import ndcg

        self._check_is_fitted()
        data = check_ranking_input(X, y, qid, sample_weight=sample_weight)
        scores = self._predict_input(data)
        sizes = np.diff(data.offsets)
        qidx = np.repeat(np.arange(data.n_queries), sizes)
        kw = dict(k=10, gain="exp2", ties="average", empty=0.0)
        if data.sample_weight is None:
            return float(ndcg(scores, data.y, qid=qidx, **kw))
        starts = data.offsets[:-1][sizes > 0]  # per-query values come for the non-empty queries
        w = data.sample_weight
        lo, hi = np.minimum.reduceat(w, starts), np.maximum.reduceat(w, starts)
        if np.any(lo != hi):
            q = int(np.flatnonzero(lo != hi)[0])
            q_id = data.qids[sizes > 0][q]
            q_id = q_id.item() if isinstance(q_id, np.generic) else q_id
            raise InputError("sample_weight must be the same for every row of a query (score weights whole "
                             f"queries); query {q_id!r} has row weights from {lo[q]:g} to {hi[q]:g}")
        if not lo.sum() > 0:
            raise InputError("sample_weight: the query weights sum to 0; give at least one query a positive weight")
        per_query = np.asarray(ndcg(scores, data.y, qid=qidx, reduction="none", **kw), dtype=np.float64)
        return float(np.dot(lo, per_query) / lo.sum())

    # -- persistence --------------------------------------------------------------------------
    def _get_params_state(self) -> dict:
        return self.get_params(deep=False)

    @classmethod
    def _params_from_state(cls, params: dict) -> dict:
        return params

    def _get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        raise NotImplementedError(f"{type(self).__name__} does not implement saving (_get_state/_set_state)")

    def _set_state(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement loading (_get_state/_set_state)")

    def save(self, path):
        """Save the fitted model to ``path`` (JSON + arrays in one ``.npz``; no pickle).

        Load it back with :func:`rankwise.load`.
        """
        return persistence.save(self, path)
