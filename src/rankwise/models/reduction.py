"""Ranking by reduction to binary classification (Daumé, *A Course in Machine Learning*, ch. "Learning to rank").

Training (NaiveRankTrain / RankTrain): every ordered pair ``u ≠ v`` of a query with different
labels becomes a binary example

.. math::

    (x_{uv},\\; y = \\operatorname{sign}(\\sigma_v - \\sigma_u),\\; \\omega(\\sigma_u, \\sigma_v))

with ``σ`` the position in the ideal ranking (1 = top), so ``y = +1`` when ``u`` should come
first, and the weight ``ω`` passed to the classifier as ``sample_weight``. The learner then
minimises the ω-ranking loss ``Σ_{u≠v} [σ_u < σ_v] [σ̂_v < σ̂_u] ω(σ_u, σ_v)``.

Inference: ``"aggregate"`` (NaiveRankTest: ``score_u += f(x_uv)``, ``score_v −= f(x_uv)`` over
all ordered pairs, then sort) or ``"quicksort"`` (RankTest: randomised QuickSort whose
comparison of ``u`` with the pivot ``p`` sends ``u`` first with the classifier's probability
that ``u`` precedes ``p``; expected O(n log n) pair evaluations).

References
----------
H. Daumé III. *A Course in Machine Learning*, ch. "Learning to rank" (Algorithms NaiveRankTrain,
NaiveRankTest, RankTrain, RankTest), 2017.

N. Ailon and M. Mohri. An efficient reduction of ranking to classification. COLT 2008.
"""
from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from rankwise._validation import Interval, Options, limit_threads, warn_user
from rankwise.errors import InputError
from rankwise.metrics.correlation import ideal_positions as _list_ideal_positions
from rankwise.models.base import BaseRanker, warn_unscaled

__all__ = ["PairwiseReductionRanker", "ideal_positions", "make_pairs", "pair_weights", "pair_features",
           "CLASSIFIERS", "make_classifier"]

_WEIGHTS = ("none", "kemeny", "ndcg")
_FEATURES = ("difference", "concat")
_INFERENCE = ("aggregate", "quicksort")
_DENSE_PAIR_LIMIT = 3000  # lists up to this length sample pairs from the full valid-pair set


def ideal_positions(labels, offsets) -> np.ndarray:
    """σ: 1-based position of each row in its query's ideal ranking (label descending).

    Rows with equal labels share the mean of their positions (the expectation over random
    tie-breaking), so ``σ`` does not depend on the input order. Per query this is
    :func:`rankwise.metrics.correlation.ideal_positions` (the one definition).
    """
    y = np.asarray(labels, dtype=np.float64)
    out = np.empty(len(y), dtype=np.float64)
    for q in range(len(offsets) - 1):
        a, b = offsets[q], offsets[q + 1]
        if b > a:
            out[a:b] = _list_ideal_positions(y[a:b])
    return out


def _valid_pairs_of_query(yq):
    diff = yq[:, None] != yq[None, :]
    u, v = np.nonzero(diff)
    return u, v


def make_pairs(labels, offsets, *, pairs="all", random_state=None):
    """Ordered pairs ``(u, v)`` of rows of one query with different labels, and ``y = ±1``.

    Parameters
    ----------
    labels : ndarray, shape (n_rows,)
    offsets : ndarray of int64
        Query boundaries (rows of query q at ``offsets[q]:offsets[q+1]``).
    pairs : "all" or int
        ``"all"``: every ordered pair with different labels (both ``(u, v)`` and ``(v, u)``).
        An int ``m``: ``m`` ordered pairs per query drawn uniformly without replacement among the
        valid ones (all of them when a query has fewer), reproducibly from ``random_state``.

    Returns
    -------
    u, v : ndarray of int64
        Row indices; ``y`` : ndarray of int64, +1 when ``labels[u] > labels[v]``.
    """
    y = np.asarray(labels, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    us, vs = [], []
    for q in range(len(offsets) - 1):
        a, b = int(offsets[q]), int(offsets[q + 1])
        n = b - a
        if n < 2:
            continue
        yq = y[a:b]
        if pairs == "all":
            u, v = _valid_pairs_of_query(yq)
        else:
            m = int(pairs)
            _, counts = np.unique(yq, return_counts=True)
            n_valid = n * n - int(np.sum(counts.astype(np.int64) ** 2))
            if n_valid == 0:
                continue
            if n_valid <= m:
                u, v = _valid_pairs_of_query(yq)
            elif n <= _DENSE_PAIR_LIMIT:
                u, v = _valid_pairs_of_query(yq)
                pick = np.sort(rng.choice(len(u), size=m, replace=False))
                u, v = u[pick], v[pick]
            else:  # long list: rejection sampling of distinct valid ordered pairs
                seen: set = set()
                while len(seen) < m:
                    cu = rng.integers(0, n, size=2 * m)
                    cv = rng.integers(0, n, size=2 * m)
                    for x, z in zip(cu.tolist(), cv.tolist()):
                        if yq[x] != yq[z] and (x, z) not in seen:
                            seen.add((x, z))
                            if len(seen) == m:
                                break
                arr = np.array(sorted(seen), dtype=np.int64)
                u, v = arr[:, 0], arr[:, 1]
        us.append(u + a)
        vs.append(v + a)
    if not us:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    u = np.concatenate(us).astype(np.int64)
    v = np.concatenate(vs).astype(np.int64)
    return u, v, np.where(y[u] > y[v], 1, -1).astype(np.int64)


def pair_weights(sigma_u, sigma_v, weights):
    """ω(σ_u, σ_v) for each pair.

    ``"kemeny"``: ω = 1. ``"ndcg"``: ω = |1/log2(1+σ_u) − 1/log2(1+σ_v)|, the change of the DCG
    discount when the two positions swap, so mistakes near the top cost more; rescaled to mean 1
    over the training pairs (a global constant, which only rebalances against the classifier's
    regularisation). A callable is called as ``omega(sigma_u, sigma_v)`` on float arrays of
    1-based ideal positions and must return one finite non-negative weight per pair (used as is).
    """
    su = np.asarray(sigma_u, dtype=np.float64)
    sv = np.asarray(sigma_v, dtype=np.float64)
    if callable(weights):
        try:
            w = np.asarray(weights(su, sv), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"weights callable failed on arrays of positions: {exc}") from None
        if w.shape != su.shape:
            raise InputError(f"weights callable must return one weight per pair (shape {su.shape}); "
                             f"got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError("weights callable must return finite non-negative weights")
        return w
    if weights == "kemeny":
        return np.ones_like(su)
    if weights == "ndcg":
        w = np.abs(1.0 / np.log2(1.0 + su) - 1.0 / np.log2(1.0 + sv))
        mean = w.mean() if len(w) else 0.0
        return w / mean if mean > 0 else np.ones_like(su)
    raise InputError(f"weights must be one of {_WEIGHTS} or a callable; got {weights!r}")


def pair_features(X, u, v, kind="difference"):
    """``x_uv``: ``x_u − x_v`` (``"difference"``) or ``[x_u, x_v]`` (``"concat"``); dense or CSR."""
    if kind == "difference":
        return X[u] - X[v]
    if kind == "concat":
        if sp.issparse(X):
            return sp.hstack([X[u], X[v]], format="csr")
        return np.hstack([X[u], X[v]])
    raise InputError(f"pair_features must be one of {_FEATURES}; got {kind!r}")


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _seed_from(random_state) -> int:
    """An int seed from ``random_state`` (scikit-learn ``check_random_state`` semantics).

    An int is used as is (must be ≥ 0); a ``numpy.random.Generator`` or ``RandomState`` is
    consumed (one draw), None draws from fresh OS entropy. The seed is stored by ``fit`` so that
    every ``predict`` of the fitted model starts from the same state.
    """
    if _is_int(random_state):
        if random_state < 0:
            raise InputError(f"random_state must be a non-negative int, a numpy Generator/RandomState or None; "
                             f"got {random_state!r}")
        return int(random_state)
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, dtype=np.uint32)[0])
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**32 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**32 - 1, dtype=np.int64))
    raise InputError(f"random_state must be an int, a numpy Generator/RandomState or None; got {random_state!r}")


def _logistic(random_state=None):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000)


def _linear_svc(random_state=None):
    from sklearn.svm import LinearSVC

    return LinearSVC(random_state=random_state)


def _lightgbm(random_state=None):
    from lightgbm import LGBMClassifier

    return LGBMClassifier(random_state=random_state, verbose=-1, n_jobs=1)


#: the classifiers a saved PairwiseReductionRanker can hold (saved without pickle: coefficients or
#: LightGBM model text), by short name -> (scikit-learn class name, factory(random_state)).
#: Trees, forests and HistGradientBoosting work from Python but cannot be saved.
CLASSIFIERS = {"logistic": ("LogisticRegression", _logistic), "linear_svc": ("LinearSVC", _linear_svc),
               "lightgbm": ("LGBMClassifier", _lightgbm)}


def make_classifier(name: str, random_state=None):
    """A classifier of :data:`CLASSIFIERS` by short name (what ``rankwise train --param classifier=`` takes)."""
    if name not in CLASSIFIERS:
        raise InputError(f"classifier must be one of {', '.join(CLASSIFIERS)} (the classifiers a saved model can "
                         f"hold without pickle; others work from the Python API); got {name!r}")
    return CLASSIFIERS[name][1](random_state)


class PairwiseReductionRanker(BaseRanker):
    """Ranker that reduces ranking to weighted binary classification with any scikit-learn classifier.

    .. math::

        \\min_f \\; \\sum_q \\sum_{u \\ne v} [\\sigma_u < \\sigma_v]\\, [f \\text{ puts } v \\text{ before } u]\\;
        \\omega(\\sigma_u, \\sigma_v)

    Parameters
    ----------
    estimator : scikit-learn classifier or None
        Cloned and fitted on the pairs (None: ``LogisticRegression(max_iter=1000)``).
    weights : {"none", "kemeny", "ndcg"} or callable
        ``"none"``: NaiveRankTrain, no ``sample_weight``. Otherwise RankTrain with
        ``sample_weight = ω(σ_u, σ_v)``, see :func:`pair_weights`.
    pairs : "all" or int
        All valid ordered pairs, or that many sampled per query (see :func:`make_pairs`).
    pair_features : {"difference", "concat"}
    inference : {"aggregate", "quicksort"}
        ``"aggregate"`` needs a real-valued ``f``: ``decision_function`` when the classifier has
        one, else ``2·P(+1) − 1``, else its ±1 predictions. ``"quicksort"`` needs
        ``predict_proba``.
    random_state : int, numpy Generator, RandomState or None
        Seeds pair sampling and the QuickSort pivots/coin flips. scikit-learn semantics: an int
        gives the same model and predictions every time; a ``Generator``/``RandomState`` is
        consumed — ``fit`` draws one seed from it (so two fits differ) and stores it as
        ``random_seed_``; every ``predict`` restarts from that seed, so a fitted model's
        predictions are reproducible either way (a model saved with a generator stores the drawn
        seed as its ``random_state``); None draws fresh entropy at ``fit`` (predictions of that
        fitted model are still reproducible).
    batch_size : int
        Pair rows per classifier call at inference. Pair indices are generated per block of at
        most ``batch_size`` pairs (a long query is split into blocks of rows), so inference memory
        is O(batch_size + n) whatever the list length.
    standardize : bool
        Centre and scale every feature on the training rows before forming pairs (scale only for
        sparse ``X``), so that a scale-sensitive classifier (the default regularised
        LogisticRegression) sees comparable features; ``predict`` applies the same transform.
        With ``standardize=False`` and feature scales more than 1e6 apart, ``fit`` warns.
    verbose : "auto" or bool
        A progress bar while ``fit`` builds the training pairs: ``"auto"`` shows it only when
        stderr is a terminal; True forces it (e.g. in a notebook), False hides it.
    n_jobs : int, optional
        Threads of ``fit`` and ``predict`` (scikit-learn's convention, -1: every CPU this process
        may use): the BLAS and OpenMP pools the classifier runs on (through threadpoolctl), torch
        and rankwise's compiled kernels, and the classifier's own ``n_jobs`` where it has one set. None: the libraries'
        defaults (the default LogisticRegression's lbfgs then uses every BLAS thread: about 3× the
        CPU of ``n_jobs=1`` on 2 cores for the same model).

    Attributes
    ----------
    estimator_ : the fitted classifier
    n_pairs_ : int
        Number of training pairs.
    n_features_in_ : int
    random_seed_ : int
        The seed of pair sampling and QuickSort inference (``random_state`` itself when an int).
    scaler_mean_, scaler_scale_ : ndarray, shape (n_features,)
        The standardisation (zeros and ones with ``standardize=False``).

    References
    ----------
    H. Daumé III. *A Course in Machine Learning*, ch. "Learning to rank", Algorithms 17–20.
    N. Ailon and M. Mohri. An efficient reduction of ranking to classification. COLT 2008.
    """

    _parameter_constraints = {
        "weights": [Options(*_WEIGHTS), "callable"],
        "pairs": [Options("all"), Interval("int", 1)],
        "pair_features": [Options(*_FEATURES)],
        "inference": [Options(*_INFERENCE)],
        "random_state": ["random_state"],
        "batch_size": [Interval("int", 1)],
        "standardize": ["boolean"],
        "verbose": [Options("auto"), "boolean"],
        "n_jobs": ["n_jobs"],
    }

    def __init__(self, estimator=None, *, weights="none", pairs="all", pair_features="difference",
                 inference="aggregate", random_state=None, batch_size=500_000, standardize=True, verbose="auto",
                 n_jobs=None):
        self.estimator = estimator
        self.weights = weights
        self.pairs = pairs
        self.pair_features = pair_features
        self.inference = inference
        self.random_state = random_state
        self.batch_size = batch_size
        self.standardize = standardize
        self.verbose = verbose
        self.n_jobs = n_jobs

    @property
    def _listwise_predict(self):
        return True

    # -- parameters -----------------------------------------------------------------------------
    def _check_params(self):
        self._validate_params()
        est = self.estimator
        if est is None:
            est = make_classifier("logistic")
        if not hasattr(est, "fit") or not (hasattr(est, "predict") or hasattr(est, "predict_proba")):
            raise InputError(f"estimator must be a scikit-learn classifier (with fit and predict); got {est!r}")
        if self.inference == "quicksort" and not hasattr(est, "predict_proba"):
            raise InputError(f"inference='quicksort' needs a classifier with predict_proba (the probability "
                             f"that u precedes the pivot); {type(est).__name__} has none. Use "
                             "inference='aggregate', or a probabilistic classifier (e.g. LogisticRegression, "
                             "or CalibratedClassifierCV around this one)")
        if not isinstance(self.weights, str) or self.weights != "none":
            from sklearn.utils.validation import has_fit_parameter

            if not has_fit_parameter(est, "sample_weight"):
                raise InputError(f"weights={self.weights!r} passes omega as sample_weight, but "
                                 f"{type(est).__name__}.fit takes no sample_weight; use weights='none' or a "
                                 "classifier that accepts sample weights")
        return est

    # -- fit --------------------------------------------------------------------------------------
    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None):
        """Build the pairs of every query, fit the classifier on them; returns ``self``.

        ``sample_weight`` (one per row) multiplies the weight of pair (u, v) by ``w_u · w_v``, as
        the item weights of the pairwise losses do. With ``eval_set`` the validation NDCG@10 of
        the fitted model is kept in ``history_`` (training is one classifier fit: no curve).
        ``group`` (query sizes) may replace ``qid``.
        """
        from sklearn.base import clone

        from rankwise.models._torch import Standardizer

        est = self._check_params()
        seed = _seed_from(self.random_state)
        data, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set, group=group)
        from rankwise.train.progress import pairs_with_progress  # a bar while the pairs are built (issue 16.11)

        u, v, yp = pairs_with_progress(make_pairs, data.y, data.offsets, pairs=self.pairs, random_state=seed,
                                       verbose=self.verbose, desc=type(self).__name__)
        if len(u) == 0:
            raise InputError("no query has two rows with different labels, so there is no pair to learn from")
        sc = Standardizer.fit(data.X, bool(self.standardize))
        self.scaler_mean_, self.scaler_scale_ = sc.mean, sc.scale
        if not self.standardize:
            warn_unscaled(data.X, type(self).__name__)
        Xp = pair_features(self._transform(data.X), u, v, self.pair_features)
        pw = None
        if self.weights != "none":
            sigma = ideal_positions(data.y, data.offsets)
            pw = pair_weights(sigma[u], sigma[v], self.weights)
        if data.sample_weight is not None:
            rw = data.sample_weight[u] * data.sample_weight[v]
            pw = rw if pw is None else pw * rw
        kwargs = {} if pw is None else {"sample_weight": pw}
        est = clone(est)
        if self.n_jobs is not None and est.get_params(deep=False).get("n_jobs") is not None:
            est.set_params(n_jobs=self.n_jobs)  # a classifier told its own threads follows n_jobs
        with limit_threads(self.n_jobs):
            self.estimator_ = est.fit(Xp, yp, **kwargs)
        classes = list(getattr(self.estimator_, "classes_", [-1, 1]))
        if 1 not in classes:
            raise InputError("the classifier did not learn class +1; every sampled pair had the same direction "
                             "(increase pairs)")
        self.n_pairs_ = int(len(u))
        self.n_features_in_ = int(data.X.shape[1])
        self.random_seed_ = seed
        self.history_ = {}
        if val is not None:
            self.history_ = {"ndcg@10": [self._validation_ndcg(val)]}
        self._check_trained(data, f"(the {type(self.estimator_).__name__} fitted on {self.n_pairs_} pairs)")
        return self

    def _transform(self, X):
        from rankwise.models._torch import Standardizer

        mean = getattr(self, "scaler_mean_", None)
        if mean is None or not self.standardize:
            return X
        return Standardizer(mean, self.scaler_scale_).transform(X)

    def _validation_ndcg(self, val) -> float:
        from rankwise.metrics import ndcg

        qidx = np.repeat(np.arange(val.n_queries), np.diff(val.offsets))
        return float(ndcg(self._scores_grouped(val.X, val.offsets), val.y, k=10, qid=qidx))

    # -- pair evaluation ----------------------------------------------------------------------------
    def _pos_column(self):
        classes = list(self.estimator_.classes_)
        return classes.index(1)

    def _pair_decision(self, Xp):
        est = self.estimator_
        if hasattr(est, "decision_function"):
            d = np.asarray(est.decision_function(Xp), dtype=np.float64)
            if d.ndim == 1:
                return d if list(est.classes_)[1] == 1 else -d
        if hasattr(est, "predict_proba"):
            return 2.0 * np.asarray(est.predict_proba(Xp), dtype=np.float64)[:, self._pos_column()] - 1.0
        return np.where(np.asarray(est.predict(Xp)) == 1, 1.0, -1.0)

    def _pair_proba(self, Xp):
        return np.asarray(self.estimator_.predict_proba(Xp), dtype=np.float64)[:, self._pos_column()]

    def _batched(self, fn, X, u, v):
        out = np.empty(len(u), dtype=np.float64)
        bs = int(self.batch_size)
        for s in range(0, len(u), bs):
            # in float64: a float32 product's last bits depend on how the rows fall into BLAS blocks, so
            # one pair would score differently in another batch (another partition, another query order)
            out[s:s + bs] = fn(pair_features(X, u[s:s + bs], v[s:s + bs], self.pair_features).astype(np.float64))
        return out

    # -- inference --------------------------------------------------------------------------------
    def _pair_blocks(self, offsets):
        """Yield ``(u, v)``: all ordered pairs u ≠ v within each query, in blocks of ≤ batch_size pairs.

        Short queries are packed together; a query with more than ``batch_size`` pairs is split
        into blocks of rows (each row with all m − 1 others), so no block holds all m² pairs of a
        long list: memory O(max(batch_size, m)).
        """
        bs = int(self.batch_size)
        us, vs, tot = [], [], 0
        for q in range(len(offsets) - 1):
            a, b = int(offsets[q]), int(offsets[q + 1])
            m = b - a
            if m < 2:
                continue
            if m * (m - 1) <= bs:
                if tot + m * (m - 1) > bs and us:
                    yield np.concatenate(us), np.concatenate(vs)
                    us, vs, tot = [], [], 0
                uu, vv = np.nonzero(~np.eye(m, dtype=bool))
                us.append(uu + a)
                vs.append(vv + a)
                tot += m * (m - 1)
                continue
            if us:
                yield np.concatenate(us), np.concatenate(vs)
                us, vs, tot = [], [], 0
            rows = max(1, bs // (m - 1))
            cols = np.arange(a, b, dtype=np.int64)
            for r0 in range(a, b, rows):
                r1 = min(r0 + rows, b)
                u = np.repeat(np.arange(r0, r1, dtype=np.int64), m)
                v = np.tile(cols, r1 - r0)
                keep = u != v
                yield u[keep], v[keep]
        if us:
            yield np.concatenate(us), np.concatenate(vs)

    def _aggregate(self, X, offsets):
        self._check_pair_budget(offsets)
        n = X.shape[0]
        score = np.zeros(n, dtype=np.float64)
        for u, v in self._pair_blocks(offsets):
            f = self._batched(self._pair_decision, X, u, v)
            score += np.bincount(u, weights=f, minlength=n) - np.bincount(v, weights=f, minlength=n)
        return score

    @staticmethod
    def _check_pair_budget(offsets):
        """Refuse up front a query whose m(m - 1) ordered pairs exceed the pair budget of the pair losses
        (:func:`rankwise.losses.max_pairs`, ``RANKWISE_MAX_PAIRS``): one query of 10^6 rows would be 10^12
        classifier calls, hours of work in bounded memory."""
        from rankwise.losses._utils import pair_budget

        budget = pair_budget()
        m = np.diff(np.asarray(offsets, dtype=np.int64)).astype(np.float64)
        over = np.flatnonzero(m * (m - 1) > budget)
        if len(over):
            q = int(over[np.argmax(m[over])])
            rows = int(m[q])
            raise InputError(f"PairwiseReductionRanker.predict: query {q} (0-based, of {len(m)}) has {rows:,} rows, "
                             f"so inference='aggregate' classifies {rows * (rows - 1):,} ordered pairs, more than the "
                             f"pair budget of {budget:,.0f} per query; use inference='quicksort' (about 2 n ln n "
                             f"comparisons: ~{2 * rows * np.log(rows):,.0f} here; set_params(inference='quicksort')), "
                             "split the query, or raise the budget with rankwise.losses.max_pairs(N) (a context "
                             "manager; None: no limit) or the environment variable RANKWISE_MAX_PAIRS=N")

    def _quicksort(self, X, offsets):
        """Level-synchronous randomised QuickSort: one classifier call per recursion level."""
        rng = np.random.default_rng(getattr(self, "random_seed_", None))
        n = X.shape[0]
        position = np.zeros(n, dtype=np.int64)  # 0 = top of its query
        segments = [(0, np.arange(offsets[q], offsets[q + 1])) for q in range(len(offsets) - 1)]
        self.n_comparisons_ = 0
        while segments:
            pivots, bases, members = [], [], []
            for base, idx in segments:
                if len(idx) == 1:
                    position[idx[0]] = base
                elif len(idx) > 1:
                    j = int(rng.integers(len(idx)))
                    pivots.append(idx[j])
                    bases.append(base)
                    members.append(np.delete(idx, j))
            if not pivots:
                break
            u = np.concatenate(members)
            p = np.repeat(np.array(pivots, dtype=np.int64), [len(m) for m in members])
            prob = self._batched(self._pair_proba, X, u, p)  # P(u precedes pivot)
            first = rng.random(len(u)) < prob
            self.n_comparisons_ += len(u)
            segments = []
            start = 0
            for piv, base, mem in zip(pivots, bases, members):
                f = first[start:start + len(mem)]
                start += len(mem)
                left, right = mem[f], mem[~f]
                position[piv] = base + len(left)
                segments.append((base, left))
                segments.append((base + len(left) + 1, right))
        sizes = np.diff(offsets)
        return (np.repeat(sizes, sizes) - position).astype(np.float64)

    def _scores_grouped(self, X, offsets):
        X = self._transform(X)
        if self.inference == "quicksort":
            if not hasattr(self.estimator_, "predict_proba"):
                raise InputError(f"inference='quicksort' needs predict_proba; {type(self.estimator_).__name__} has none")
            return self._quicksort(X, offsets)
        return self._aggregate(X, offsets)

    def _predict_input(self, data):
        self._check_predict_features_only(data.X)
        with limit_threads(getattr(self, "n_jobs", None)):
            return self._scores_grouped(data.X, data.offsets)

    def predict(self, X, *, qid=None):
        """Scores whose order within each query is the predicted ranking.

        ``qid`` groups the rows into queries (pairs are formed within a query). Without it, all
        rows form one list: allowed for ``"aggregate"`` on a single query, with a ``UserWarning``
        when there are several rows, since scores then compare every row with every other row
        (other scores than per query, and quadratic in the number of rows); ``"quicksort"``
        refuses it (positions are meaningful only within a query). With ``"quicksort"`` the
        score of a row is ``n_q − position`` (position 0 = top), so sorting by score gives the
        QuickSort order.
        """
        with limit_threads(getattr(self, "n_jobs", None)):
            return self._predict_checked(X, qid)

    def _predict_checked(self, X, qid):
        Xv = self._check_predict_features(X)
        n = Xv.shape[0]
        g = self._check_predict_qid(qid, n)
        if g is None:
            if self.inference == "quicksort":
                raise InputError("predict with inference='quicksort' needs qid= (one query id per row): "
                                 "the order is built within each query")
            if n > 2:
                warn_user(f"PairwiseReductionRanker.predict(X) got no qid, so all {n} rows are scored as ONE query "
                          "(every row compared with every other: other scores than per query, and quadratic time). "
                          "If X holds several queries, call predict(X, qid=qid); for one query, pass qid to "
                          "silence this warning")
            return self._scores_grouped(Xv, np.array([0, n], dtype=np.int64))
        if g.order is None:
            return self._scores_grouped(Xv, g.offsets)
        grouped = self._scores_grouped(Xv[g.order], g.offsets)
        out = np.empty(n, dtype=np.float64)
        out[g.order] = grouped
        return out

    # -- persistence ------------------------------------------------------------------------------
    def _get_params_state(self):
        if callable(self.weights):
            raise InputError("cannot save a PairwiseReductionRanker with a callable weights (code is never "
                             "saved); refit with weights='none', 'kemeny' or 'ndcg' to save it")
        params = self.get_params(deep=False)
        if not (params["random_state"] is None or _is_int(params["random_state"])):
            params["random_state"] = self.random_seed_  # a generator is saved as the seed drawn from it
        est = params.pop("estimator")
        params["estimator"] = None if est is None else _estimator_spec(est)
        return params

    @classmethod
    def _params_from_state(cls, params):
        params = dict(params)
        spec = params.get("estimator")
        params["estimator"] = None if spec is None else _estimator_from_spec(spec)
        return params

    def _get_state(self):
        est = self.estimator_
        name = type(est).__name__
        state = {"n_features_in_": self.n_features_in_, "n_pairs_": self.n_pairs_, "estimator_class": name,
                 "classes": [int(c) for c in est.classes_], "random_seed_": self.random_seed_,
                 "history_": {k: [float(v) for v in vals] for k, vals in getattr(self, "history_", {}).items()}}
        scaler = {"scaler_mean_": np.asarray(self.scaler_mean_, dtype=np.float64),
                  "scaler_scale_": np.asarray(self.scaler_scale_, dtype=np.float64)}
        if name in ("LogisticRegression", "LinearSVC"):
            return state, {"coef": np.asarray(est.coef_), "intercept": np.atleast_1d(np.asarray(est.intercept_)),
                           **scaler}
        if name == "LGBMClassifier":
            text = est.booster_.model_to_string()
            return state, {"lightgbm_model": np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy(), **scaler}
        raise InputError(f"cannot save a PairwiseReductionRanker around {name}: only LogisticRegression, LinearSVC "
                         "and LGBMClassifier are saved without pickle (coefficients / LightGBM model text). "
                         "Other scikit-learn classifiers can only be pickled, which rankwise does not do")

    def _set_state(self, state, arrays):
        self.history_ = {k: list(v) for k, v in state.get("history_", {}).items()}
        name = state["estimator_class"]
        classes = np.array(state["classes"])
        if name in ("LogisticRegression", "LinearSVC"):
            from sklearn.base import clone

            est = make_classifier("logistic") if self.estimator is None else clone(self.estimator)
            est.coef_ = np.asarray(arrays["coef"])  # dtype kept: float32 pairs give float32 coefficients
            est.intercept_ = np.asarray(arrays["intercept"])
            est.classes_ = classes
            est.n_features_in_ = est.coef_.shape[1]
            if name == "LogisticRegression":
                est.n_iter_ = np.zeros(1, dtype=np.int32)
        elif name == "LGBMClassifier":
            from rankwise.models._booster_text import check_lightgbm_text

            text = bytes(np.asarray(arrays["lightgbm_model"], dtype=np.uint8)).decode("utf-8")
            check_lightgbm_text(text)  # before LightGBM parses it: a malformed model string can crash it
            est = _LightGBMPairClassifier(text, classes)
        else:
            raise InputError(f"cannot load a PairwiseReductionRanker around {name!r}")
        self.estimator_ = est
        self.n_features_in_ = int(state["n_features_in_"])
        d = self.n_features_in_
        self.scaler_mean_ = np.asarray(arrays.get("scaler_mean_", np.zeros(d)), dtype=np.float64)
        self.scaler_scale_ = np.asarray(arrays.get("scaler_scale_", np.ones(d)), dtype=np.float64)
        if self.scaler_mean_.shape != (d,) or self.scaler_scale_.shape != (d,) or \
                not (np.all(np.isfinite(self.scaler_mean_)) and np.all(self.scaler_scale_ > 0)):
            raise ValueError(f"scaler arrays must be finite with shape ({d},) and positive scales")
        self.n_pairs_ = int(state["n_pairs_"])
        seed = state.get("random_seed_", self.random_state if _is_int(self.random_state) else None)
        self.random_seed_ = None if seed is None else int(seed)


_SAVEABLE = tuple(cls for cls, _ in CLASSIFIERS.values())


def _estimator_spec(est):
    name = type(est).__name__
    if name not in _SAVEABLE:
        raise InputError(f"cannot save a PairwiseReductionRanker around {name}: only {', '.join(_SAVEABLE)} are "
                         "saved without pickle; other classifiers could only be pickled, which rankwise does not do")
    params = est.get_params(deep=False)
    try:
        json.dumps(params)
    except TypeError as exc:
        raise InputError(f"cannot save {name}: its parameters are not plain values ({exc})") from None
    return {"class": name, "params": params}


def _estimator_from_spec(spec):
    name = spec.get("class")
    params = spec.get("params", {})
    factory = next((f for cls, f in CLASSIFIERS.values() if cls == name), None)
    if factory is None:
        raise InputError(f"unknown estimator class {name!r} in model file; known: {', '.join(_SAVEABLE)}")
    return type(factory())(**params)


class _LightGBMPairClassifier:
    """A loaded LightGBM binary classifier: ``predict_proba`` from the saved model text, no pickle."""

    def __init__(self, model_text: str, classes):
        import lightgbm as lgb

        self.booster_ = lgb.Booster(model_str=model_text)
        self.classes_ = np.asarray(classes)

    def decision_function(self, X):
        return np.asarray(self.booster_.predict(X, raw_score=True), dtype=np.float64)

    def predict_proba(self, X):
        p = np.asarray(self.booster_.predict(X), dtype=np.float64)
        return np.column_stack([1.0 - p, p])  # booster predicts P(classes_[1])
