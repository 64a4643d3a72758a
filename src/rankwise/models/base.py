"""What every rankwise model shares: the scikit-learn estimator contract for rankers.

Estimator contract
------------------
Every ranker has the same signatures::

    fit(X, y, *, qid=None, sample_weight=None, eval_set=None, group=None)
    predict(X, *, qid=None)
    score(X, y, *, qid=None, sample_weight=None)        # mean NDCG@10

``qid`` (one query id per row) is required by ``fit`` and ``score``; ``group`` (LightGBM's
query sizes) may replace it in ``fit``. ``predict`` takes ``qid`` where a row's score depends on
the other rows of its query (the attention ``NeuralRanker``, the pairwise reduction); other
models check its length and ignore it. Subclasses store their constructor arguments untouched,
declare their parameters' constraints in ``_parameter_constraints`` (checked in one place,
:func:`rankwise._validation.check_params`, at the start of ``fit``), validate the data through
:meth:`BaseRanker._validate_fit` (which wraps :func:`rankwise.data.ranking_input.check_ranking_input`),
set fitted attributes ending in ``_`` (at least ``n_features_in_``, and ``feature_names_in_``
when ``X`` is a DataFrame with string column names, checked again by ``predict``) and return
``self``. ``feature_names_`` (set by :meth:`BaseRanker._validate_fit`, kept by ``save``) names the
training columns when the data named them -- a DataFrame's string columns or a
:class:`~rankwise.data.RankingDataset`'s ``feature_names`` (a feature log's) -- and is what an
export addresses the engine's features by; ``predict`` does not check it. Common hyper-parameters have one name in every model: ``learning_rate``,
``max_iter`` (iterations or epochs; ``n_estimators`` for boosting rounds), ``alpha`` (ℓ2),
``random_state``, ``n_jobs``. Names a model used before (``lr``, ``epochs``, ``weight_decay``,
``n_epochs``, ``C``) still work for one release, with a ``DeprecationWarning``.

``qid`` reaches ``fit`` and ``score`` inside scikit-learn meta-estimators through metadata
routing (without it, ``fit`` raises an :class:`~rankwise.errors.InputError` inside
``GridSearchCV`` / ``cross_validate`` rather than letting every score become NaN)::

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

import sys

import numpy as np
from sklearn.base import BaseEstimator

from rankwise._validation import check_features, check_params, feature_names_of, set_deprecated, warn_user
from rankwise.data.ranking_input import RankingInput, check_ranking_input
from rankwise.errors import InputError, NotFittedError, UntrainedModelWarning
from rankwise.models import persistence


def _qid_will_not_reach_score() -> str | None:
    """Inside scikit-learn's ``_fit_and_score`` whose ``estimator.score`` gets no ``qid``: the caller's name.

    Without metadata routing, ``GridSearchCV(...).fit(X, y, qid=qid)`` passes ``qid`` to ``fit``
    only; every fold's ``score`` then fails and scikit-learn records NaN and picks an arbitrary
    "best" model. Detected from the caller's frames (any surprise there: not detected).
    """
    try:
        f = sys._getframe(2)
        for _ in range(40):
            if f is None:
                return None
            if f.f_code.co_name == "_fit_and_score" and \
                    str(f.f_globals.get("__name__", "")).startswith("sklearn.model_selection"):
                score_params = f.f_locals.get("score_params") or {}
                scorer = f.f_locals.get("scorer")
                scorers = getattr(scorer, "_scorers", {"score": scorer})
                uses_score = any(type(sc).__name__ == "_PassthroughScorer" for sc in scorers.values())
                return "scikit-learn" if uses_score and "qid" not in score_params else None
            f = f.f_back
    except Exception:  # noqa: BLE001 - introspection is best effort
        return None
    return None


def warn_unscaled(X, owner: str, *, ratio: float = 1e6) -> None:
    """Warn when a model told not to standardise gets features whose scales differ by more than ``ratio``."""
    import scipy.sparse as sp

    if X.shape[0] < 2:
        return
    if sp.issparse(X):
        scale = np.sqrt(np.asarray(X.multiply(X).mean(axis=0)).ravel())
    else:
        scale = np.asarray(X, dtype=np.float64).std(axis=0)
    scale = scale[scale > 0]
    if len(scale) > 1 and scale.max() > ratio * scale.min():
        warn_user(f"{owner}(standardize=False): the feature scales (standard deviations) range from "
                  f"{scale.min():.3g} to {scale.max():.3g}; a regularised or gradient-trained model then "
                  "learns mostly from the largest features. Use standardize=True (the default) or scale X first")


_ROUTING_HINT = ("enable scikit-learn's metadata routing: sklearn.set_config(enable_metadata_routing=True); "
                 "est.set_fit_request(qid=True).set_score_request(qid=True); then search.fit(X, y, qid=qid, "
                 "groups=qid) with a GroupKFold")


class BaseRanker(persistence.ParamsInFile, BaseEstimator):
    """Base class of rankwise rankers (see the module docstring for the contract)."""

    _estimator_type = "ranker"
    #: parameters that may differ between a checkpoint and the ``fit(..., resume=...)`` continuing it
    _resume_free_params: tuple[str, ...] = ()
    #: ``{name: [constraint, ...]}`` checked by :meth:`_validate_params` (see rankwise._validation)
    _parameter_constraints: dict = {}
    #: old parameter name -> new name, or (new name, function old value -> new value)
    _deprecated_params: dict = {}
    #: whether predict's scores depend on the other rows of the query (predict then uses qid)
    _listwise_predict = False
    #: whether NaN features are accepted (as missing values)
    _allow_nan = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            persistence.register_model(cls)

    # -- parameters ---------------------------------------------------------------------------
    def _init_deprecated(self, old: dict) -> None:
        """Apply constructor arguments given under a deprecated name (``__init__(..., **old)``)."""
        for name, value in old.items():
            self._set_deprecated(name, value)

    def _set_deprecated(self, name, value) -> None:
        set_deprecated(self, name, value, self._deprecated_params)

    def set_params(self, **params):
        for name in [n for n in params if n in self._deprecated_params]:
            self._set_deprecated(name, params.pop(name))
        return super().set_params(**params)

    def _validate_params(self) -> None:
        """Check every constructor parameter against ``_parameter_constraints`` (one message format)."""
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = bool(self._allow_nan)
        tags.target_tags.required = True
        return tags

    # -- fitted state -------------------------------------------------------------------------
    def _check_is_fitted(self) -> None:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X, y, qid=...) first")

    def _check_feature_names(self, X) -> None:
        """``X``'s column names against ``feature_names_in_`` (scikit-learn's rule and messages)."""
        fitted = getattr(self, "feature_names_in_", None)
        names = feature_names_of(X)
        if fitted is None and names is None:
            return
        if fitted is None:
            warn_user(f"X has feature names, but {type(self).__name__} was fitted without feature names")
            return
        if names is None:
            if hasattr(X, "columns") or not hasattr(X, "query_offsets"):
                warn_user(f"X does not have valid feature names, but {type(self).__name__} was fitted with "
                          "feature names")
            return
        if len(fitted) == len(names) and np.all(fitted == names):
            return
        unexpected = sorted(set(names) - set(fitted))
        missing = sorted(set(fitted) - set(names))

        def listing(title, items):
            shown = "".join(f"- {n}\n" for n in items[:5]) + ("- ...\n" if len(items) > 5 else "")
            return f"{title}\n{shown}"
        msg = "The feature names should match those that were passed during fit.\n"
        if unexpected:
            msg += listing("Feature names unseen at fit time:", unexpected)
        if missing:
            msg += listing("Feature names seen at fit time, yet now missing:", missing)
        if not unexpected and not missing:
            msg += "Feature names must be in the same order as they were in fit.\n"
        msg += "Select the training columns in their training order: X[model.feature_names_in_]"
        raise InputError(msg)

    def _check_predict_features(self, X, *, allow_nan: bool | None = None):
        self._check_is_fitted()
        self._check_feature_names(X)
        allow_nan = self._allow_nan if allow_nan is None else allow_nan
        Xv = check_features(X, allow_nan=allow_nan, min_features=1)
        self._check_n_features(Xv)
        return Xv

    def _check_n_features(self, X) -> None:
        if X.shape[1] != self.n_features_in_:
            raise InputError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input (it was fitted with {self.n_features_in_})")

    @staticmethod
    def _check_predict_qid(qid, n: int):
        """The grouping of ``predict``'s rows: ``None``, or a :class:`rankwise.data.groups.Grouping`."""
        if qid is None:
            return None
        from rankwise.data.groups import group_by_qid

        q = np.asarray(qid)
        if q.ndim != 1 or len(q) != n:
            raise InputError(f"qid has shape {q.shape} but X has {n} rows; one query id per row is expected")
        return group_by_qid(q, name="qid")

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
    def _validate_fit(self, X, y, qid, *, sample_weight=None, eval_set=None, group=None, allow_nan: bool = False
                      ) -> tuple[RankingInput, RankingInput | None]:
        """Validate training data and the optional ``eval_set``; warn about one-document queries.

        Also records ``feature_names_in_`` (a DataFrame with string column names) and refuses,
        inside scikit-learn's model selection without metadata routing, a ``fit`` whose ``score``
        will not receive ``qid``.
        """
        caller = _qid_will_not_reach_score()
        if caller is not None and (qid is not None or group is not None):
            raise InputError("qid reached fit but will not reach score: scikit-learn's model selection "
                             "(GridSearchCV, cross_validate, ...) without metadata routing passes qid to fit only, "
                             "so every score would be NaN and the best model arbitrary. To fix, "
                             + _ROUTING_HINT)
        if qid is None and group is None and not hasattr(X, "query_offsets") and caller is not None:
            raise InputError("fit got no qid inside scikit-learn's model selection; to pass it, " + _ROUTING_HINT)
        names = feature_names_of(X)
        train = check_ranking_input(X, y, qid, sample_weight=sample_weight, group=group,
                                    allow_nan_features=allow_nan, min_features=1)
        if train.X.shape[0] == 0:
            raise InputError("X has 0 sample(s) (0 rows); fit needs at least one query with two or more documents")
        if train.X.shape[0] == 1:
            raise InputError("X has 1 sample (n_samples = 1): a ranker needs at least one query with two or more "
                             "documents to learn an order")
        sizes = np.diff(train.offsets)
        if np.all(sizes < 2):
            raise InputError(f"every query in qid has a single document ({train.n_queries} queries); "
                             "a ranker needs queries with at least two documents to learn an order")
        n_single = int(np.count_nonzero(sizes < 2))
        if n_single:
            warn_user(f"{n_single} of {train.n_queries} queries have a single document; they carry no "
                      "ordering information and contribute nothing to pairwise or listwise losses")
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
        if names is not None:
            self.feature_names_in_ = names
        else:
            self.__dict__.pop("feature_names_in_", None)
        data_names = names if names is not None else getattr(X, "feature_names", None) if hasattr(
            X, "query_offsets") else None
        if data_names is not None:
            self.feature_names_ = [str(n) for n in data_names]
        else:
            self.__dict__.pop("feature_names_", None)
        return train, val

    # -- the end of fit: did training move the model? ----------------------------------------------
    def _check_trained(self, train: RankingInput, how: str = "", *, moved: bool | None = None) -> None:
        """Set ``untrained_`` and warn (:class:`~rankwise.errors.UntrainedModelWarning`) when the
        fitted model ranks like a constant scorer -- every training query's documents scored alike
        (to 1e-12 relative), so any validation metric equals a constant scorer's -- or, with
        ``moved=False``, when its parameters never left their start. Every trainer calls it as the
        last step of ``fit``; the command line refuses to save such a model (``rankwise train``)."""
        scores = np.asarray(self._predict_input(train), dtype=np.float64)
        sizes = np.diff(train.offsets)
        nonempty = sizes > 0  # reduceat over each non-empty query's rows
        spread = np.zeros(0)
        if np.any(nonempty):
            starts = train.offsets[:-1][nonempty]
            spread = (np.maximum.reduceat(scores, starts) - np.minimum.reduceat(scores, starts))[sizes[nonempty] > 1]
        scale = float(np.abs(scores).max()) if len(scores) else 0.0
        constant = bool(np.all(spread <= 1e-12 * max(scale, 1e-300)))
        self.untrained_ = constant or moved is False
        if not self.untrained_:
            return
        name = type(self).__name__
        what = (f"scores every document of each of the {int(np.count_nonzero(sizes > 1))} training queries alike "
                "(a constant scorer: every ranking metric equals a constant's)" if constant
                else "did not move from its start (its parameters are those it began with)")
        warn_user(f"{name} {what}{' ' + how if how else ''}; the model is untrained. {self._untrained_hint()}",
                  UntrainedModelWarning)

    def _untrained_hint(self) -> str:
        """What to change when :meth:`_check_trained` finds the model untrained (models say more)."""
        return ("Check that the labels vary within queries, standardise the features, raise the learning rate "
                "or the number of iterations")

    # -- prediction / scoring -----------------------------------------------------------------
    def _predict_input(self, data: RankingInput) -> np.ndarray:
        """Scores of validated, query-grouped rows (models scoring a whole list override this)."""
        return self._predict_rows(self._check_predict_features_only(data.X))

    def _check_predict_features_only(self, X):
        """The feature-count check of predict for already validated rows (names were checked by the caller)."""
        self._check_is_fitted()
        self._check_n_features(X)
        return X

    def _predict_rows(self, X) -> np.ndarray:
        """Scores of validated rows (row-wise models implement this; predict calls it)."""
        raise NotImplementedError

    def predict(self, X, *, qid=None) -> np.ndarray:
        """One score per row; higher ranks first.

        ``qid`` (one query id per row) is used by models whose score of a row depends on the
        other rows of its query; the others check its length and ignore it.
        """
        Xv = self._check_predict_features(X)
        self._check_predict_qid(qid, Xv.shape[0])
        return self._predict_rows(Xv)

    def score(self, X, y=None, *, qid=None, sample_weight=None) -> float:
        """Mean NDCG@10 (exp2 gain, ties averaged, empty queries 0) of the model's scores.

        With ``sample_weight`` (one weight per row, the same for every row of a query; the
        layout GBDT libraries use for query weights) it is the weighted mean over queries,
        :math:`\\sum_q w_q \\mathrm{NDCG@10}_q / \\sum_q w_q`.
        """
        from rankwise.metrics import ndcg

        self._check_is_fitted()
        self._check_feature_names(X)
        if qid is None and not hasattr(X, "query_offsets"):
            hint = (" Inside GridSearchCV / cross_validate, " + _ROUTING_HINT) if _qid_will_not_reach_score() else ""
            raise InputError("qid is required: one query id per row, e.g. score(X, y, qid=qid) (NDCG@10 is a mean "
                             "over queries)." + hint)
        data = check_ranking_input(X, y, qid, sample_weight=sample_weight, method="score", min_features=1,
                                   allow_nan_features=self._allow_nan)
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
    def _get_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        raise NotImplementedError(f"{type(self).__name__} does not implement saving (_get_state/_set_state)")

    def _set_state(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement loading (_get_state/_set_state)")

    def save(self, path):
        """Save the fitted model to ``path`` (JSON + arrays in one ``.npz``; no pickle).

        Load it back with :func:`rankwise.load`.
        """
        return persistence.save(self, path)
