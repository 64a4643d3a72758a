"""Gradient-boosted tree rankers grown by LightGBM or XGBoost on any rankwise loss."""
from __future__ import annotations

import os

import time
import unicodedata

import numpy as np
import scipy.sparse as sp

from rankwise._validation import (Interval, Options, available_cpus, check_positive_int, check_vector, fit_seed,
                                  limit_threads, warn_user)
from rankwise.errors import InputError
from rankwise.models import _booster_text, _xgb_sum, persistence
from rankwise.models.base import BaseRanker
from rankwise.train.early_stopping import EarlyStopping, resolve_metric
from rankwise.train.history import History
from rankwise.train.progress import Progress

_BACKENDS = ("lightgbm", "xgboost")
_NATIVE = {"lightgbm": ("lambdarank", "rank_xendcg"), "xgboost": ("rank:ndcg", "rank:pairwise", "rank:map")}


def _check_no_inf(X, name: str = "X"):
    data = X.data if sp.issparse(X) else X
    if np.isinf(data).any():
        raise InputError(f"{name} contains inf values ({int(np.isinf(data).sum())} entries); GBDTRanker treats NaN "
                         "as a missing value but inf is not allowed: replace it by NaN or a finite value")


def _check_native_labels(backend: str, native: str, y: np.ndarray, *params) -> None:
    """The label rules of the libraries' own ranking objectives, checked before the library sees the
    labels (whose messages name parameters rankwise users never set).

    LightGBM's ``lambdarank`` and ``rank_xendcg`` and XGBoost's ``rank:ndcg`` take relevance grades:
    non-negative integers (LightGBM: below the length of ``label_gain``, 31 by default);
    ``rank:map`` takes binary labels; ``rank:pairwise`` takes any real label.
    """
    if native == "rank:pairwise" or y.size == 0:
        return
    loss = f"native:{native}"
    if native == "rank:map":
        if not np.all((y == 0) | (y == 1)):
            bad = y[(y != 0) & (y != 1)][0]
            raise InputError(f"loss={loss!r} needs binary labels (0 or 1); got label {bad:g}. Binarise the labels, "
                             "or use loss='native:rank:pairwise' or a rankwise loss (e.g. 'lambdarank')")
        return
    frac = (y != np.round(y)) | (y < 0)
    if np.any(frac):
        bad = y[frac][0]
        raise InputError(f"loss={loss!r} needs relevance grades: non-negative integers; got label {bad:g}. Round "
                         "or bin the labels, or use a rankwise loss that takes real-valued labels (e.g. "
                         "'lambdarank' or 'listnet')")
    if backend == "lightgbm":
        gains = next((p["label_gain"] for p in params if p and p.get("label_gain") is not None), None)
        n = 31 if gains is None else len(gains)
        if float(y.max()) >= n:
            raise InputError(f"loss={loss!r}: LightGBM's gain table has {n} grades (0..{n - 1}); got label "
                             f"{float(y.max()):g}. Pass loss_params={{'label_gain': [...]}} with one gain per grade")


#: characters a booster's feature name cannot hold: LightGBM refuses its JSON specials and splits the
#: names on spaces, XGBoost refuses ``[``, ``]`` and ``<``
_NAME_SPECIALS = frozenset('",:[]{}<')


def booster_feature_names(names) -> list[str] | None:
    """The feature names handed to LightGBM / XGBoost for the model's column names ``names``.

    Every character that a booster cannot hold in a name -- whitespace, control and other
    non-printing characters, and any of ``" , : [ ] { } <`` -- becomes ``_``. If the names are
    then not all distinct (``"a b"`` and ``"a_b"``) or one is empty, every name gets its column
    index appended (``a_b_0``, ``a_b_1``), which makes them distinct. ``None`` stays ``None``
    (the libraries' defaults, ``Column_0`` / ``f0``, are used).
    """
    if names is None:
        return None
    out = ["".join("_" if c in _NAME_SPECIALS or unicodedata.category(c)[0] in "CZ" else c for c in str(n))
           for n in names]
    if len(set(out)) != len(out) or "" in out:
        out = [f"{n}_{i}" for i, n in enumerate(out)]
    return out


# Fitters for out-of-core collections, registered by the layers above (``rankwise.distributed``
# registers ``"dask"`` when imported), so that this module never imports upwards.
_COLLECTION_FIT: dict = {}


def register_collection_fit(kind: str, fit) -> None:
    """Let ``GBDTRanker.fit`` hand a ``kind`` collection (``"dask"``) to ``fit(model, frame, *, label, qid)``."""
    _COLLECTION_FIT[kind] = fit


def _on_engine(loss: str, loss_params) -> bool:
    """Whether the rankwise objective of ``loss`` runs on the compiled engine (then no torch is loaded)."""
    from rankwise.losses.registry import spec

    sp = spec(loss)
    return sp.kernel is not None and sp.kernel(dict(loss_params or {})) is not None


#: the Philox counter word that separates the row-subsample stream from any other draw keyed by the seed
_BAG_STREAM = 0x62616767
#: the counter word of LightGBM's per-round column-sampler seeds (:func:`_round_seed`)
_COLUMN_STREAM = 0x636f6c73
#: the counter word of XGBoost's per-round column subsets (:func:`_xgb_columns`)
_XGB_COLUMN_STREAM = 0x78636f6c
#: the counter words of the other per-round library seeds (:func:`_round_seed`): LightGBM's ``bagging_seed``,
#: ``objective_seed`` and ``extra_seed``, XGBoost's ``seed``
_LGB_BAG_STREAM = 0x6c626167
_LGB_OBJECTIVE_STREAM = 0x6c6f626a
_LGB_EXTRA_STREAM = 0x6c657874
_XGB_SEED_STREAM = 0x78736564


def _bag_rows(seed: int, rnd: int, n: int, fraction: float) -> np.ndarray:
    """The rows in boosting round ``rnd``'s subsample: each of the ``n`` rows independently with
    probability ``fraction`` (LightGBM's bagging rule), drawn from a counter-based generator (Philox)
    keyed by ``seed`` at counter ``rnd`` -- a function of ``(seed, rnd)`` alone, so an interrupted
    and resumed fit draws the samples of the uninterrupted one, whatever the threads."""
    gen = np.random.Generator(np.random.Philox(key=int(seed), counter=[0, int(rnd), _BAG_STREAM, 0]))
    return gen.random(n) < fraction


def _round_seed(seed: int, rnd: int, stream: int = _COLUMN_STREAM) -> int:
    """A library seed for round ``rnd`` drawn from ``(seed, rnd)`` alone (Philox, counter word ``stream``):
    in 1 .. 2**31 - 1 and never the previous round's, so that a generator the library restarts only when
    its seed changes restarts every round. ``stream=_COLUMN_STREAM``: LightGBM's ``feature_fraction_seed``."""
    def draw(r):
        gen = np.random.Generator(np.random.Philox(key=int(seed), counter=[0, int(r), int(stream), 0]))
        return int(gen.integers(1, 2 ** 31 - 1))
    s = draw(rnd)
    return s if rnd == 0 or s != draw(rnd - 1) else s % (2 ** 31 - 2) + 1


def _xgb_columns(seed: int, rnd: int, n_features: int, fraction: float) -> np.ndarray:
    """XGBoost's ``feature_weights`` for round ``rnd``: 1 on a uniform subset of the columns drawn from
    ``(seed, rnd)`` alone (Philox, as :func:`_bag_rows`), 0 elsewhere. The subset has XGBoost's own size
    for ``colsample_bytree`` (``max(1, int(float32(fraction) * n_features))``, in float32 as its column
    sampler computes it), so XGBoost's weighted draw of that many columns takes exactly these: the
    columns of a round no longer depend on XGBoost's generator, which restarts with a resumed booster."""
    k = max(1, int(np.float32(fraction) * np.float32(n_features)))
    gen = np.random.Generator(np.random.Philox(key=int(seed), counter=[0, int(rnd), _XGB_COLUMN_STREAM, 0]))
    weights = np.zeros(n_features, dtype=np.float32)
    weights[gen.choice(n_features, size=k, replace=False)] = 1.0
    return weights


#: LightGBM's names of the parameters that draw at random, with their aliases (LightGBM's ``config.h``):
#: ``backend_params`` given under an alias are renamed, so that the per-round reseeding sees them
_LGB_ALIASES = {"bagging_fraction": ("bagging", "sub_row", "subsample"), "bagging_freq": ("subsample_freq",),
                "bagging_seed": ("bagging_fraction_seed",), "feature_fraction": ("sub_feature", "colsample_bytree"),
                "feature_fraction_bynode": ("sub_feature_bynode", "colsample_bynode"),
                "extra_trees": ("extra_tree",), "boosting": ("boost", "boosting_type")}
#: LightGBM's bagging draws a row when ``NextFloat() < bagging_fraction``, NextFloat being k / 32768
_LGB_FLOAT_STEPS = 32768


def _lgb_canonical(params: dict) -> dict:
    """``params`` with LightGBM's aliases of the sampling parameters (:data:`_LGB_ALIASES`) renamed."""
    out = dict(params)
    for name, aliases in _LGB_ALIASES.items():
        for a in aliases:
            if a in out:
                out.setdefault(name, out.pop(a))
    return out


def _lgb_uses_subset(fraction: float, n_rows: int, freq: int) -> bool:
    """LightGBM's choice of bagging into a copied subset (``ResetSampleConfig``), as far as the fraction
    decides it: bag size ``int(fraction * rows)`` over rows over ``bagging_freq`` at most 0.5."""
    return (int(fraction * n_rows) / n_rows) / freq <= 0.5 if n_rows else False


def _twin_fraction(fraction: float, n_rows: int, freq: int = 1) -> float:
    """Another ``bagging_fraction`` that draws exactly the rows ``fraction`` draws from the same generators:
    the same count of LightGBM's uniform values k / 32768 below it, and the same bag size
    ``int(fraction * n_rows)`` where one exists -- else (``fraction * n_rows`` a whole number and
    ``fraction`` one of the k / 32768) the same choice of LightGBM's subset strategy, the one thing its
    bag size decides before the bag is drawn. Setting the fraction to the other value of the pair is what
    makes LightGBM re-create its bagging generators (it re-creates them only when a fraction changes, not
    when ``bagging_seed`` alone does)."""
    f = float(fraction)
    below = int(np.ceil(f * _LGB_FLOAT_STEPS))  # k / 32768 < f  <=>  k < f * 32768 (exact in float64)
    fallback = None
    for direction in (0.0, 2.0):
        g = f
        for _ in range(64):
            g = float(np.nextafter(g, direction))
            if not (0.0 < g < 1.0 and int(np.ceil(g * _LGB_FLOAT_STEPS)) == below):
                continue
            if int(g * n_rows) == int(f * n_rows):
                return g
            if fallback is None and _lgb_uses_subset(g, n_rows, freq) == _lgb_uses_subset(f, n_rows, freq):
                fallback = g
    if fallback is None:
        raise InputError(f"bagging_fraction={f!r} with {n_rows} training rows: LightGBM's bagging cannot be "
                         "reseeded every round at this exact value; change it in its last digits")
    return fallback


def _started(obj, init: np.ndarray):
    """``obj`` (a LightGBM custom objective) at the scores ``init + preds``: boosting starts from the per-row
    score ``init`` while the booster's own trees (and so its predictions) leave it out -- the rule of
    LightGBM's ``init_score``. The library's training scores hold the trees alone, so a resumed booster
    (whose training scores LightGBM sets to its trees' prediction, dropping a Dataset's ``init_score``)
    starts where the interrupted fit stopped. (XGBoost keeps a DMatrix's ``base_margin`` under a resumed
    booster: it gets the start there, for every objective.)"""
    def started_objective(preds, data):
        return obj(np.asarray(preds, dtype=np.float64) + init, data)
    started_objective.__name__ = getattr(obj, "__name__", "objective")
    return started_objective


def _row_objective(objective, order, n: int):
    """A library custom objective from ``objective.grad_hess(scores)`` (``GBDTRanker.fit(objective=...)``):
    the scores handed over in the caller's row order, the gradient and Hessian taken back to the rows'
    query-grouped order, checked (n finite values each, Hessian positive)."""
    inv = None if order is None else np.argsort(order)

    def row_objective(preds, data):
        s = np.asarray(preds, dtype=np.float64)
        out = objective.grad_hess(s if inv is None else s[inv])
        try:
            g, h = (np.asarray(v, dtype=np.float64) for v in out)
        except (TypeError, ValueError):
            raise InputError(f"objective.grad_hess must return (grad, hess) arrays; got {type(out).__name__}") from None
        if g.shape != (n,) or h.shape != (n,):
            raise InputError(f"objective.grad_hess must return a gradient and a Hessian of {n} values (one per "
                             f"training row); got shapes {g.shape} and {h.shape}")
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(h)) and np.all(h > 0)):
            raise InputError("objective.grad_hess returned a non-finite gradient or a Hessian that is not positive")
        return (g, h) if order is None else (g[order], h[order])
    return row_objective


def _bagged(obj, fraction: float, seed: int, first_round: int):
    """``obj`` (a LightGBM or XGBoost custom objective, called once per round) with the gradient and
    Hessian of the rows outside the round's subsample set to 0: those rows add nothing to any split
    or leaf value, as if the library had left them out of the round (XGBoost's own ``subsample``
    does exactly this)."""
    calls = [int(first_round)]

    def bagged_objective(preds, data):
        grad, hess = obj(preds, data)
        out = ~_bag_rows(seed, calls[0], len(grad), fraction)
        calls[0] += 1
        grad, hess = np.array(grad, dtype=np.float64), np.array(hess, dtype=np.float64)
        grad[out] = 0.0
        hess[out] = 0.0
        return grad, hess
    bagged_objective.__name__ = getattr(obj, "__name__", "objective")
    return bagged_objective


class _LgbReseeder:
    """Make every draw LightGBM makes in round r a function of ``(seed, r)``, whatever the booster's history.

    LightGBM's generators live in the booster and a resumed booster starts them afresh, so, before each
    round, ``__call__`` resets (``Booster.reset_parameter``) the seed of each generator the parameters use:

    - bagging (``bagging_fraction < 1``, ``bagging_freq = k > 0``, by row or by query): ``bagging_seed`` of
      the bag ``r // k``, with ``bagging_fraction`` switched to its twin value (:func:`_twin_fraction`) every
      call -- LightGBM re-creates its bagging generators (seeded ``bagging_seed + block``) and bags again
      only when a fraction changes. The bag of rounds ``jk .. jk + k - 1`` is drawn again in each of them
      from the same seed: the same rows, as LightGBM keeps one bag for k rounds;
    - column sampling (``feature_fraction`` or ``feature_fraction_bynode < 1``): ``feature_fraction_seed``
      (LightGBM restarts its column sampler when that seed changes; :func:`_round_seed`);
    - ``rank_xendcg``'s per-query generators: ``objective_seed`` with the objective itself (re-created);
    - ``extra_trees``: ``extra_seed`` (the per-feature generators restart at every parameter reset).

    The seeds of the parameters (``bagging_seed``, ...) given in ``backend_params`` are the streams' keys
    instead of the fit's seed. The draws have LightGBM's distribution; only the generators are restarted.
    """

    def __init__(self, params: dict, seed: int, done: int, n_rows: int):
        self.done, self.calls = int(done), 0
        self.bag = None
        fraction = float(params.get("bagging_fraction", 1.0))
        freq = int(params.get("bagging_freq", 0))
        if fraction < 1.0 and freq > 0:
            self.bag = (fraction, _twin_fraction(fraction, n_rows, freq), freq, int(params.get("bagging_seed", seed)))
        self.columns = (float(params.get("feature_fraction", 1.0)) < 1.0
                        or float(params.get("feature_fraction_bynode", 1.0)) < 1.0)
        self.column_key = int(params.get("feature_fraction_seed", seed))
        self.objective = params.get("objective") if params.get("objective") == "rank_xendcg" else None
        self.objective_key = int(params.get("objective_seed", seed))
        self.extra = str(params.get("extra_trees", False)).strip().lower() in ("true", "1", "+", "yes")
        self.extra_key = int(params.get("extra_seed", seed))
        # GOSS re-creates its generators (from bagging_seed) at every parameter reset: without a new seed
        # each round the resets above would have it draw the same numbers every round
        self.goss = "goss" in (str(params.get("data_sample_strategy", "")).lower(),
                               str(params.get("boosting", "")).lower())
        self.bag_key = int(params.get("bagging_seed", seed))

    def __bool__(self) -> bool:
        return bool(self.bag or self.columns or self.objective or self.extra)

    def __call__(self, booster) -> None:
        r = self.done + self.calls
        new = {}
        if self.bag is not None:
            fraction, twin, freq, key = self.bag
            new["bagging_seed"] = _round_seed(key, r // freq, _LGB_BAG_STREAM)
            new["bagging_fraction"] = twin if self.calls % 2 == 0 else fraction  # the booster starts at fraction
        if self.columns:
            new["feature_fraction_seed"] = _round_seed(self.column_key, r, _COLUMN_STREAM)
        if self.objective is not None:
            new.update(objective=self.objective, objective_seed=_round_seed(self.objective_key, r,
                                                                            _LGB_OBJECTIVE_STREAM))
        if self.extra:
            new["extra_seed"] = _round_seed(self.extra_key, r, _LGB_EXTRA_STREAM)
        if self.goss:
            new["bagging_seed"] = _round_seed(self.bag_key, r, _LGB_BAG_STREAM)
        self.calls += 1
        booster.reset_parameter(new)


#: XGBoost's tree updaters of ``tree_method="hist"``, alternated round to round (``sync`` does nothing in one
#: process) so that XGBoost re-creates its updater -- and the column sampler that updater seeds from the
#: global generator on its first tree -- every round, as it does in a resumed booster's first round
_XGB_UPDATERS = ("grow_quantile_histmaker", "sync,grow_quantile_histmaker")


def _xgb_updaters(params: dict, pinned: bool):
    """The two updater sequences :class:`GBDTRanker` alternates when XGBoost samples rows or columns with its
    own generator (``subsample``, ``colsample_bylevel`` / ``_bynode``, or ``colsample_bytree`` not pinned by
    :func:`_xgb_columns`), else None.

    XGBoost draws from one global generator, reseeded when the ``seed`` parameter changes, and from the
    column sampler of its tree updater, seeded from the global generator on the updater's first tree. A
    resumed booster has a new updater, so its first round draws once more than the uninterrupted fit's:
    reseeding alone does not make a resume exact. Each round therefore sets ``seed`` from ``(seed, round)``
    and the other sequence of the pair -- the updater of ``tree_method`` with or without ``sync`` in
    front, which does nothing in one process -- so that XGBoost builds a new updater every round, in an
    uninterrupted fit as in a resumed one. None too where the updater is the caller's (``updater`` in
    ``backend_params``) or the tree method has no CPU updater here: those resumes warn."""
    sampled = any(float(params.get(k, 1.0)) < 1.0 for k in ("subsample", "colsample_bylevel", "colsample_bynode"))
    sampled = sampled or (float(params.get("colsample_bytree", 1.0)) < 1.0 and not pinned)
    base = {"hist": "grow_quantile_histmaker", "approx": "grow_histmaker",
            "exact": "grow_colmaker,prune"}.get(str(params.get("tree_method", "hist")))
    if not sampled or base is None or "updater" in params or str(params.get("device", "cpu")) != "cpu":
        return None
    return base, "sync," + base


class GBDTRanker(BaseRanker):
    """Gradient-boosted trees whose gradients come from a rankwise loss.

    .. math::

        F_{t}(x) = F_{t-1}(x) + \\eta\\, h_t(x), \\qquad
        h_t \\approx \\arg\\min_h \\sum_i \\bigl(g_i h(x_i) + \\tfrac12 H_i h(x_i)^2\\bigr),
        \\quad g = \\nabla_s \\ell(s, y),\\ H = \\operatorname{diag} \\nabla^2_s \\ell(s, y)

    The trees are grown by LightGBM or XGBoost; ``(g, H)`` come from
    :func:`rankwise.losses.as_objective` applied to the query-grouped scores, so any registered
    loss drives the boosting. ``loss="native:lambdarank"`` (LightGBM) or ``"native:rank:ndcg"``
    (XGBoost) uses the library's own objective instead, for comparison.

    Parameters
    ----------
    loss : str
        A name in ``rankwise.losses.REGISTRY`` or ``"native:<objective>"``. Default
        ``"lambdarank"``: LambdaMART's objective (ΔNDCG-weighted RankNet with LightGBM's
        normalisation, truncated at the top 50: both chosen on validation queries, docs/losses.md)
        on the compiled engine, chosen by measurement against the other rankwise objectives and
        LightGBM's own lambdarank (BENCHMARKS.md, section Training). ``lambdaloss`` (NDCG-Loss2++)
        scored as well on validation, at a little more CPU per round (every pair, not the top 50).
    loss_params : dict, optional
        Loss hyperparameters (native objectives: extra library parameters).
    backend : {"lightgbm", "xgboost"}
    n_estimators, learning_rate, num_leaves, max_depth, min_child_samples, subsample,
    colsample_bytree, reg_lambda
        Tree and boosting parameters (mapped to each library's names; ``num_leaves`` is
        LightGBM's, ``max_depth`` XGBoost's main size control). ``subsample < 1`` is row-level
        bagging every round (each row kept with that probability); with a rankwise loss the rows
        are drawn by rankwise from ``(random_state, round)`` alone and the others get gradient and
        Hessian 0, so a fit resumed from a checkpoint equals the uninterrupted one (docs/models.md,
        "Row subsampling"); a native objective uses the library's bagging. ``colsample_bytree < 1``
        is the library's column sampling. Every draw left to a library (these, the sampling
        parameters of ``backend_params``, LightGBM's ``rank_xendcg`` and ``extra_trees``) runs on
        its generator reseeded from ``(random_state, round)`` before every round, for the same
        reason (XGBoost's ``colsample_bytree`` is pinned to a subset drawn from it).
    backend_params : dict, optional
        Further parameters passed to the library unchanged (e.g. LightGBM's ``linear_tree`` or
        ``categorical_feature="0,3"``; LightGBM's aliases of its sampling parameters, such as
        ``subsample``, are renamed to the names they stand for). ``feature_types`` (XGBoost, e.g.
        ``["q", "c", ...]``) goes to its ``DMatrix`` with ``enable_categorical``: ``"c"`` marks a
        categorical column.
    eval_metric, early_stopping_rounds, random_state, n_jobs, verbose
        Validation metric string, patience in boosting rounds, seed, threads, progress bar.
    loss_every : int or None, default 10
        Record the training loss in ``history_`` every ``loss_every`` rounds (rounds 0, k, 2k,
        ...; ``None`` in between), as LightGBM's ``metric_freq``; ``None``: never (LightGBM's
        default, which computes no training metric unless asked). The objective computes the
        loss value only in the rounds that record it: for the pair losses the value (a ``log`` per
        pair) costs about as much as the gradient and Hessian together, which do not need it.
        *Changed*: the loss used to be computed and recorded every round (now ``loss_every=1``).

    Attributes
    ----------
    booster_ : lightgbm.Booster or xgboost.Booster
        Every round boosted. Its feature names are the model's column names (a DataFrame's, or a
        RankingDataset's ``feature_names``) as :func:`booster_feature_names` adapts them.
    n_estimators_ : int
        Trees in the booster (rounds boosted).
    best_iteration_, best_score_ : int, float
        With ``early_stopping_rounds`` only: the best round (0-based) on ``eval_set`` and its
        metric; ``predict`` then uses rounds ``0..best_iteration_``, and ``save`` writes those
        ``best_iteration_ + 1`` trees only (the booster in the file predicts what ``predict``
        does). Without early stopping the whole booster predicts, even when an ``eval_set`` was
        given.
    history_ : History
        One entry per boosting round: ``"iteration"``; ``"loss"`` (rankwise losses only, not
        native objectives; in the rounds ``loss_every`` selects, None in the others): the
        training objective, mean over queries, at the scores that round's tree was fitted to --
        the model after ``iteration`` rounds, computed by that round's gradient call itself (so
        the model after the last round has none); and the ``eval_metric`` on ``eval_set`` after
        the round, when one is given.
    eval_scores_ : ndarray
        With ``eval_set``: the raw scores of its rows after the last round boosted. They are kept
        round to round and each new tree's output is added (LightGBM's validation score updater;
        for XGBoost the new tree's leaves added in double), so validating costs one tree per round,
        not the whole booster; they equal ``predict``'s scores with every tree.
    n_features_in_ : int

    Notes
    -----
    ``predict`` returns double scores on both backends: LightGBM's own (it sums in double), and for
    XGBoost the trees' float32 leaf values added in double to the base margin, tree after tree (XGBoost
    decides the splits, ``predict(pred_leaf=True)``; its own ``predict(output_margin=True)`` sums in
    float32 and differs by that sum's rounding, about 1e-7 relative over a hundred trees).

    NaN features are missing values: both libraries learn a default direction for them at each
    split. ``inf`` is refused. Results are deterministic for a fixed ``random_state`` and ``n_jobs``.

    References
    ----------
    J. H. Friedman. Greedy function approximation: a gradient boosting machine. Annals of
    Statistics 29(5), 2001. G. Ke et al. LightGBM: a highly efficient gradient boosting decision
    tree. NeurIPS 2017. T. Chen and C. Guestrin. XGBoost: a scalable tree boosting system. KDD 2016.
    """

    _resume_free_params = ("n_estimators", "verbose", "loss_every")
    _allow_nan = True  # NaN features are missing values
    _parameter_constraints = {
        "loss": ["string"],
        "backend": [Options(*_BACKENDS)],
        "n_estimators": [Interval("int", 1)],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "num_leaves": [Interval("int", 2)],
        "max_depth": [None, Interval("int", 1)],
        "min_child_samples": [Interval("int", 0)],
        "subsample": [Interval("real", 0, 1, closed="right")],
        "colsample_bytree": [Interval("real", 0, 1, closed="right")],
        "reg_lambda": [Interval("real", 0)],
        "backend_params": [None, "dict"],
        "eval_metric": ["string"],
        "early_stopping_rounds": [None, Interval("int", 1)],
        "random_state": [None, Interval("int", 0)],
        "n_jobs": [None, Interval("int", 1)],
        "verbose": [Options("auto"), "boolean"],
        "loss_every": [None, Interval("int", 1)],
    }

    def __init__(self, loss="lambdarank", *, loss_params=None, backend="lightgbm", n_estimators=100, learning_rate=0.1,
                 num_leaves=31, max_depth=None, min_child_samples=20, subsample=1.0, colsample_bytree=1.0,
                 reg_lambda=0.0, backend_params=None, eval_metric="ndcg@10", early_stopping_rounds=None,
                 random_state=None, n_jobs=None, verbose="auto", loss_every=10):
        self.loss = loss
        self.loss_params = loss_params
        self.backend = backend
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_depth = max_depth
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.reg_lambda = reg_lambda
        self.backend_params = backend_params
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.loss_every = loss_every

    # -- parameters ---------------------------------------------------------------------------
    def _native(self):
        """The library objective of ``loss="native:<name>"`` (checked against the backend), else None."""
        if not isinstance(self.loss, str):
            raise InputError(f"loss must be a rankwise loss name or 'native:<objective>'; got {type(self.loss).__name__}")
        if not self.loss.startswith("native:"):
            return None
        name = self.loss[len("native:"):]
        if name not in _NATIVE[self.backend]:
            raise InputError(f"loss {self.loss!r}: {self.backend} native ranking objectives are "
                             f"{', '.join('native:' + n for n in _NATIVE[self.backend])}")
        if self.loss_params is not None and not isinstance(self.loss_params, dict):
            raise InputError(f"loss_params must be a dict of {self.backend} parameters for {self.loss!r}; "
                             f"got {type(self.loss_params).__name__} {self.loss_params!r}")
        return name

    def _objective(self, on_value=None, start=0):
        """``(native_name, None)`` or ``(None, objective_fn)``, built once per fit: the loss, its
        hyperparameters and its compiled kernel are resolved here, not in every round. ``on_value``
        receives the summed loss in the rounds ``loss_every`` selects (``start``: the index of the
        first round boosted); in the other rounds the objective does not compute it."""
        native = self._native()
        if native is not None:
            return native, None
        from rankwise import losses
        from rankwise.losses.registry import check_hyper

        hyper = check_hyper(losses.get(self.loss), self.loss_params, loss=self.loss, param="loss_params")
        return None, losses.as_objective(self.loss, self.backend, n_jobs=self.n_jobs, on_value=on_value,
                                         value_every=self.loss_every, first_call=int(start), **hyper)

    def _check_params(self):
        self._validate_params()

    def _threads(self) -> int:
        """The library's threads: ``n_jobs``, or (None) the CPUs this process may actually use (affinity
        mask and cgroup quota, :func:`rankwise._validation.available_cpus`), not the machine's core
        count that LightGBM's and XGBoost's OpenMP default to; capped by ``OMP_NUM_THREADS`` where it is
        set, which the libraries' own default honours too (and a forked child of a one-thread process
        inherits no OpenMP pool that could deadlock it)."""
        if self.n_jobs is not None:
            return int(self.n_jobs)
        n = available_cpus()
        omp = os.environ.get("OMP_NUM_THREADS", "").strip()
        return min(n, int(omp)) if omp.isdigit() and int(omp) >= 1 else n

    def _bags_rows(self, native) -> bool:
        """Whether rankwise draws the row subsample itself (:func:`_bag_rows`): for its own objectives
        with ``subsample < 1``; a native objective uses the library's bagging, reseeded every round."""
        return native is None and self.subsample < 1

    def _reseeds_columns(self, native) -> bool:
        """Whether rankwise pins XGBoost's per-tree columns to a subset drawn from ``(seed, round)``
        (:func:`_xgb_columns`, under any objective): ``colsample_bytree < 1`` and no column-sampling parameter
        of XGBoost's own in ``backend_params`` (those run on XGBoost's generator, reseeded every round:
        :func:`_xgb_updaters`). LightGBM's column sampler is reseeded every round (:class:`_LgbReseeder`)."""
        own = {"colsample_bytree", "colsample_bynode", "colsample_bylevel", "feature_weights"}
        return self.backend == "xgboost" and self.colsample_bytree < 1 and not own & set(self.backend_params or {})

    def _lgb_params(self, native, seed, library_bagging=True):
        """LightGBM's parameters; ``library_bagging=False`` when rankwise draws the row subsample."""
        frac = float(self.subsample) if library_bagging else 1.0
        p = {"objective": native if native else "none", "learning_rate": float(self.learning_rate),
             "num_leaves": int(self.num_leaves), "max_depth": -1 if self.max_depth is None else int(self.max_depth),
             "min_data_in_leaf": int(self.min_child_samples), "bagging_fraction": frac,
             "bagging_freq": 1 if frac < 1 else 0, "feature_fraction": float(self.colsample_bytree),
             "lambda_l2": float(self.reg_lambda), "seed": seed, "deterministic": True, "force_row_wise": True,
             "verbosity": -1, "metric": "None",
             # keep features LightGBM could not split on: on tiny data it then grows constant trees, as
             # LGBMRanker does, instead of aborting ("num_features() > 0") under a custom objective
             "feature_pre_filter": False}
        p["num_threads"] = self._threads()
        if native:
            p.update(_lgb_canonical(self.loss_params or {}))
        p.update(_lgb_canonical(self.backend_params or {}))
        return p

    def _xgb_params(self, native, seed, library_bagging=True):
        """XGBoost's parameters; ``library_bagging=False`` when rankwise draws the row subsample."""
        p = {"eta": float(self.learning_rate), "max_depth": 6 if self.max_depth is None else int(self.max_depth),
             "min_child_weight": 0.0 if native is None else 1.0,
             "subsample": float(self.subsample) if library_bagging else 1.0,
             "colsample_bytree": float(self.colsample_bytree), "lambda": float(self.reg_lambda) or 1e-6,
             "seed": seed, "tree_method": "hist", "disable_default_eval_metric": 1, "verbosity": 0,
             "max_leaves": int(self.num_leaves) if self.max_depth is None else 0}
        if native:
            p["objective"] = native
            p.update(self.loss_params or {})
        else:
            p["base_score"] = 0.0  # a custom objective starts from F_0 = 0 (no label-mean intercept)
        p["nthread"] = self._threads()
        p.update({k: v for k, v in (self.backend_params or {}).items() if k != "feature_types"})  # DMatrix's
        return p

    # -- fit ----------------------------------------------------------------------------------
    def _fit_dask(self, frame, y, qid, sample_weight, eval_set, checkpoint, resume):
        if sample_weight is not None or eval_set is not None or checkpoint is not None or resume is not None:
            raise InputError("fit on a Dask collection takes no sample_weight, eval_set, checkpoint or resume; "
                             "use in-memory arrays for those")
        if not (y is None or isinstance(y, str)) or not (qid is None or isinstance(qid, str)):
            raise InputError("with a Dask DataFrame X, y and qid are column names (default 'label' and 'qid'); "
                             f"got {type(y).__name__} and {type(qid).__name__}")
        fit_collection = _COLLECTION_FIT.get("dask")
        if fit_collection is None:
            raise InputError("fitting on a Dask collection needs rankwise.distributed: `import rankwise.distributed` "
                             "first (pip install 'rankwise[dask]'), or call rankwise.distributed.fit_gbdt")
        return fit_collection(self, frame, label=y or "label", qid=qid or "qid")

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None, checkpoint=None,
            checkpoint_every=10, resume=None, init_score=None, eval_init_score=None, eval_sample_weight=None,
            objective=None, resume_inexact=False):
        """Boost ``n_estimators`` rounds on rows ``X`` grouped by ``qid`` (or a RankingDataset).

        ``eval_set`` is scored with ``eval_metric`` each round and recorded in ``history_``;
        with ``early_stopping_rounds`` boosting stops after that many rounds without improvement
        and ``predict`` uses the best round (without it the final booster is kept).
        ``checkpoint=path`` saves the booster every ``checkpoint_every`` rounds and ``resume=path``
        continues boosting from such a file (up to ``n_estimators`` rounds in all; a checkpoint
        that already has them is loaded as it is). The resumed fit equals the uninterrupted one bit for
        bit, row and column sampling included (every random draw of round r comes from
        ``(random_state, r)``); where the library's draws cannot restart (LightGBM's GOSS and DART,
        XGBoost's DART, an ``updater`` of the caller's) a resume is refused, with the reason, unless
        ``resume_inexact=True``: it then goes on and warns that its later trees differ.

        A Dask DataFrame ``X`` (``rankwise[dask]``, after ``import rankwise.distributed``) is
        boosted on its cluster by :func:`rankwise.distributed.fit_gbdt`; ``y`` and ``qid`` are then
        column names (default ``"label"`` and ``"qid"``).

        ``init_score`` (one finite value per row of ``X``, in the caller's row order) is the raw score
        boosting starts from, LightGBM's ``init_score`` and XGBoost's ``base_margin``: the first tree is
        fitted to the loss's gradient at ``init_score`` (no start of the model's own), and, as in
        LightGBM (``LGBMModel.fit(init_score=...)``), the trees do not contain it: ``predict`` returns
        the trees' score alone, so the model's score of a row is ``init_score + predict(X)`` -- the
        caller adds the start back (``eval_scores_`` likewise leaves it out). With ``eval_set``,
        ``eval_init_score`` (one value per validation row) is required: ``eval_metric`` and early
        stopping see ``eval_init_score + score``. A fit resumed from a checkpoint takes the same
        ``init_score`` and equals the uninterrupted fit (with a rankwise loss on either backend, and a
        native objective on XGBoost; LightGBM replaces the start of a resumed booster by its trees'
        prediction, so a native LightGBM objective refuses ``init_score`` with ``resume``).

        ``eval_metric="loss"`` scores ``eval_set`` with the training loss itself (rankwise losses only): its
        value summed over the validation queries, each row weighted by ``eval_sample_weight`` (optional, as
        ``sample_weight``), divided by the number of validation queries, lower is better; ``history_``
        records it as ``"eval_loss"``.

        ``objective`` (for objectives with per-row data the loss registry cannot hold, such as the PBM click
        likelihood given each row's examination probability in :class:`rankwise.clicks.RegressionEM`) replaces
        the gradient of ``loss`` for this fit: an object whose ``grad_hess(scores)`` returns the gradient and a
        positive Hessian, one per training row, at ``scores`` (the rows' raw scores, ``init_score`` included,
        in the caller's row order) and, for ``eval_metric="loss"``, whose ``eval_loss(scores)`` returns the
        loss of the ``eval_set`` rows at theirs (lower is better). It weighs its rows itself (no
        ``sample_weight``); ``history_`` then records no training loss.
        """
        if hasattr(X, "__dask_graph__"):
            if any(v is not None for v in (init_score, eval_init_score, eval_sample_weight, objective)):
                raise InputError("fit on a Dask collection takes no init_score, eval_init_score, "
                                 "eval_sample_weight or objective; use in-memory arrays for those")
            return self._fit_dask(X, y, qid, sample_weight, eval_set, checkpoint, resume)
        self._check_params()
        checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
        train, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set, group=group,
                                        allow_nan=True)
        _check_no_inf(train.X)
        if val is not None:
            _check_no_inf(val.X, "eval_set X")
        if self.early_stopping_rounds is not None and val is None:
            raise InputError("early_stopping_rounds needs a validation set: pass eval_set=(X_val, y_val, qid_val)")
        n_q = max(int(np.count_nonzero(np.diff(train.offsets) > 0)), 1)
        last_loss = [None]

        def on_value(total_loss):  # the objective's loss at the scores of the current round
            last_loss[0] = total_loss / n_q
        seed = fit_seed(self.random_state) % (2 ** 31)
        done, init_text, history = 0, None, {}
        stopper = EarlyStopping(self.early_stopping_rounds)
        total = int(self.n_estimators)
        native = self._native()
        self._check_row_objective(objective, native, sample_weight, val)
        metric = self._eval_metric(val, eval_sample_weight, native, objective)
        if native is not None:
            _check_native_labels(self.backend, native, train.y, self.loss_params, self.backend_params)
        if resume is not None:
            state, arrays, tstate, _ = persistence.load_checkpoint(resume, self)
            self._check_resume_features(state, train.X.shape[1], resume)
            try:
                init_text = arrays["booster"]
                done = int(tstate["rounds"])
                _booster_text.check_booster_text(self.backend, persistence.array_to_text(init_text),
                                                 n_features=train.X.shape[1])
            except (KeyError, TypeError, ValueError) as exc:
                raise persistence.corrupt(resume, exc, "a GBDTRanker checkpoint") from None
            if done > total:
                raise InputError(f"resume={str(resume)!r}: the checkpoint already has {done} boosting rounds, more "
                                 f"than n_estimators={total}; raise n_estimators to at least {done}")
            history = state.get("history", {})
            stopper.load_state(tstate.get("stopper", {}))
            seed = int(tstate.get("seed", seed))  # the interrupted fit's (random_state=None drew one)
            self._warn_sampling_restarts(resume, done, total, native, resume_inexact)
        init, eval_init = self._check_init_scores(init_score, eval_init_score, train, val, native, resume)
        native, obj = self._objective(on_value, start=done)
        if objective is not None:
            obj = _row_objective(objective, train.order, train.X.shape[0])
        if obj is not None and init is not None and self.backend == "lightgbm":
            obj = _started(obj, init)
        if self._bags_rows(native):
            obj = _bagged(obj, float(self.subsample), seed, done)
        self.n_features_in_ = train.X.shape[1]
        names = getattr(self, "feature_names_in_", None)
        if names is None and hasattr(X, "query_offsets"):  # a RankingDataset's own names
            names = getattr(X, "feature_names", None)
        self._names = booster_feature_names(names)
        self.history_ = History(history)
        for k in ("best_iteration_", "best_score_", "eval_scores_"):  # from a previous fit of this instance
            self.__dict__.pop(k, None)
        remaining = total - done
        t0 = time.perf_counter()
        if remaining == 0:  # nothing left to boost: the checkpoint's booster is the model
            try:
                self._load_booster(persistence.array_to_text(init_text))
            except Exception as exc:
                raise persistence.corrupt(resume, exc, "a GBDTRanker checkpoint") from None
        else:
            with limit_threads(self.n_jobs):  # the loss engine, the compiled kernels, BLAS and OpenMP pools too
                self._boost(train, val, metric, native, obj, seed, remaining, init_text, done, total, stopper,
                            checkpoint, checkpoint_every, last_loss, init, eval_init)
        self.fit_time_ = time.perf_counter() - t0
        self.n_estimators_ = self._n_trees()
        if self.early_stopping_rounds is not None and stopper.best_step >= 0:
            self.best_iteration_ = int(stopper.best_step)
            self.best_score_ = float(stopper.best_value) * metric.sign
        self._check_trained(train, f"after {self.n_estimators_} boosting round(s)")
        return self

    @staticmethod
    def _check_row_objective(objective, native, sample_weight, val):
        if objective is None:
            return
        if not callable(getattr(objective, "grad_hess", None)):
            raise InputError(f"objective must have a grad_hess(scores) -> (grad, hess) method; got "
                             f"{type(objective).__name__}")
        if native is not None:
            raise InputError("objective replaces the gradient of a rankwise loss; a native loss ('native:...') is "
                             "the library's own objective")
        if sample_weight is not None:
            raise InputError("objective weighs its rows itself: give no sample_weight with it")

    def _eval_metric(self, val, eval_sample_weight, native, objective=None):
        """The validation metric ``f(scores, labels, offsets)`` of ``eval_metric`` (None without ``eval_set``):
        a metric string, or ``"loss"``, the training loss on ``eval_set`` weighted by ``eval_sample_weight``."""
        if val is None:
            if eval_sample_weight is not None:
                raise InputError("eval_sample_weight was given without eval_set")
            return None
        if self.eval_metric != "loss":
            if eval_sample_weight is not None:
                raise InputError(f"eval_sample_weight weighs the rows of eval_metric='loss' only; eval_metric="
                                 f"{self.eval_metric!r} takes no weights")
            return resolve_metric(self.eval_metric)
        if native is not None:
            raise InputError(f"eval_metric='loss' is the rankwise loss on eval_set; loss={self.loss!r} is the "
                             "library's own objective: choose a metric string such as 'ndcg@10'")
        if objective is not None:
            if not callable(getattr(objective, "eval_loss", None)) or eval_sample_weight is not None:
                raise InputError("eval_metric='loss' with objective= needs objective.eval_loss(scores) (it weighs "
                                 "the eval_set rows itself: no eval_sample_weight)")
            inv = None if val.order is None else np.argsort(val.order)

            def row_metric(scores, labels, offsets) -> float:
                s = np.asarray(scores, dtype=np.float64)
                return float(objective.eval_loss(s if inv is None else s[inv]))
            row_metric.__name__ = "eval_loss"
            row_metric.sign = -1.0
            return row_metric
        from rankwise import losses
        from rankwise.losses.registry import check_hyper

        w = None
        if eval_sample_weight is not None:
            w = check_vector(eval_sample_weight, val.X.shape[0], name="eval_sample_weight")
            if np.any(w < 0):
                raise InputError(f"eval_sample_weight must be non-negative; got {int(np.sum(w < 0))} negative "
                                 f"entries (min {float(w.min()):g})")
            w = w if val.order is None else w[val.order]
        hyper = check_hyper(losses.get(self.loss), self.loss_params, loss=self.loss, param="loss_params")
        n_q = max(int(np.count_nonzero(np.diff(val.offsets) > 0)), 1)
        loss, n_jobs = self.loss, self.n_jobs

        def metric(scores, labels, offsets) -> float:
            value = losses.grad_hess(loss, np.asarray(scores, dtype=np.float64), labels, offsets, weights=w,
                                     return_value=True, n_jobs=n_jobs, **hyper)[2]
            return float(value) / n_q
        metric.__name__ = "eval_loss"
        metric.sign = -1.0  # early stopping maximises sign * value
        return metric

    def _check_init_scores(self, init_score, eval_init_score, train, val, native, resume):
        """``init_score`` and ``eval_init_score`` as float64 vectors in the rows' query-grouped order (or None)."""
        if init_score is None:
            if eval_init_score is not None:
                raise InputError("eval_init_score is the start of the eval_set rows' scores: give init_score (the "
                                 "training rows' start) too, or neither")
            return None, None
        init = check_vector(init_score, train.X.shape[0], name="init_score")
        if train.order is not None:
            init = init[train.order]
        if native is not None and resume is not None and self.backend == "lightgbm":
            raise InputError(f"init_score with resume: LightGBM starts a resumed booster from its trees' prediction "
                             f"and drops the init_score, so loss={'native:' + native!r} cannot resume with one; use "
                             "a rankwise loss (e.g. 'lambdarank') or fit without resume")
        if val is None:
            if eval_init_score is not None:
                raise InputError("eval_init_score was given without eval_set")
            return init, None
        if eval_init_score is None:
            raise InputError("init_score with eval_set needs eval_init_score (one start per eval_set row): the "
                             "validation metric scores eval_init_score + the trees' score")
        eval_init = check_vector(eval_init_score, val.X.shape[0], name="eval_init_score")
        return init, eval_init if val.order is None else eval_init[val.order]

    def _unreproducible_draws(self, native) -> list[str]:
        """The parameters whose random draws a resumed booster cannot repeat (empty: a resume equals the
        uninterrupted fit). Row and column sampling, LightGBM's ``rank_xendcg`` and ``extra_trees`` are
        reseeded from ``(seed, round)`` every round (:class:`_LgbReseeder`, :func:`_xgb_updaters`,
        :func:`_bag_rows`, :func:`_xgb_columns`); what remains: LightGBM's GOSS (it samples only after the
        first ``1 / learning_rate`` rounds of a booster, counted again from 0 by a resumed one) and DART
        (its drops depend on the whole ensemble's history in the booster), XGBoost's DART, and XGBoost's
        sampling under an ``updater`` or ``device`` of the caller's."""
        if self.backend == "lightgbm":
            p = self._lgb_params(native, 0, library_bagging=not self._bags_rows(native))
            out = [f"{k}={p[k]!r}" for k in ("boosting", "data_sample_strategy")
                   if str(p.get(k, "")).lower() in ("goss", "dart")]
            return out
        p = self._xgb_params(native, 0, library_bagging=not self._bags_rows(native))
        out = [f"booster={p['booster']!r}"] if str(p.get("booster", "")).lower() == "dart" else []
        sampled = [f"{k}={p[k]!r}" for k in ("subsample", "colsample_bytree", "colsample_bylevel", "colsample_bynode")
                   if float(p.get(k, 1.0)) < 1.0 and not (k == "colsample_bytree" and self._reseeds_columns(native))]
        if sampled and _xgb_updaters(p, self._reseeds_columns(native)) is None:
            out += sampled
        return out

    def _warn_sampling_restarts(self, resume, done, total, native, inexact=False) -> None:
        """A resume whose later trees cannot equal the uninterrupted fit's (:meth:`_unreproducible_draws`) is
        refused, or, with ``resume_inexact=True``, says so instead of passing for it."""
        if done >= total:
            return
        drawn = self._unreproducible_draws(native)
        if not drawn:
            return
        why = (f"resume={str(resume)!r} with {', '.join(drawn)}: {self.backend} draws at random from a state that "
               f"restarts with the resumed booster, so rounds {done}..{total - 1} differ from those of an "
               "uninterrupted fit (same distribution, other trees)")
        if not inexact:
            raise InputError(f"{why}; pass resume_inexact=True to resume all the same, or fit from the start. Row "
                             "and column sampling (subsample, colsample_*, bagging_*, feature_fraction*) resume exactly")
        warn_user(f"{why}; row and column sampling (subsample, colsample_*, bagging_*, feature_fraction*) resume "
                  "exactly")

    def _untrained_hint(self) -> str:
        return (f"No tree split the training rows: lower min_child_samples (now {self.min_child_samples}), check that "
                "the labels vary within queries, or raise learning_rate / n_estimators")

    def _boost(self, train, val, metric, native, obj, seed, remaining, init_text, done, total, stopper,
               checkpoint, checkpoint_every, last_loss, init=None, eval_init=None):
        with Progress(total, desc=f"GBDTRanker[{self.backend}]", verbose=self.verbose, initial=done) as bar:
            def after_round(rnd, booster_text_fn, val_scores):
                if val_scores is not None:
                    self.eval_scores_ = val_scores
                rec = {"iteration": rnd}
                if last_loss[0] is not None:
                    rec["loss"] = last_loss[0]
                    last_loss[0] = None
                stop = False
                if val is not None:
                    value = metric(val_scores if eval_init is None else val_scores + eval_init, val.y, val.offsets)
                    rec[metric.__name__] = value
                    stop = stopper.update(rnd, metric.sign * value)
                self.history_.record(**rec)
                bar.update(1)
                if checkpoint is not None and ((rnd + 1) % checkpoint_every == 0 or rnd + 1 == total or stop):
                    self._write_ckpt(checkpoint, booster_text_fn(), rnd + 1, stopper, seed)
                return stop

            threads = None
            if obj is not None and not _on_engine(self.loss, self.loss_params):
                # An objective without a compiled kernel runs torch between rounds; two OpenMP pools (the GBDT
                # library's, spinning after each parallel region, and torch's) on the same cores
                # slow each round down by an order of magnitude, so torch runs single-threaded.
                import torch

                threads = torch.get_num_threads()
                torch.set_num_threads(1)
            try:
                if self.backend == "lightgbm":
                    self._fit_lgb(train, val, native, obj, seed, remaining, init_text, after_round, done,
                                  init if native else None)
                else:
                    self._fit_xgb(train, val, native, obj, seed, remaining, init_text, after_round, done, init)
            except Exception as exc:
                err = self._library_error(exc, train)
                if err is exc:
                    raise
                raise err from None
            finally:
                if threads is not None:
                    torch.set_num_threads(threads)

    def _library_error(self, exc, train):
        """A LightGBM/XGBoost error as a rankwise error that says what to change (other errors as they are)."""
        kind = type(exc).__name__
        if kind not in ("LightGBMError", "XGBoostError"):
            return exc
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else kind
        if "num_features()) > (0)" in msg:
            return InputError(f"LightGBM found no feature it can split on: with {train.X.shape[0]} rows and "
                              f"min_child_samples={self.min_child_samples} every feature is filtered out; lower "
                              "min_child_samples or fit on more rows")
        return InputError(f"{self.backend} refused the training run ({kind}: {msg}); check backend_params, "
                          "loss_params and the tree parameters")

    def _write_ckpt(self, path, text, rounds, stopper, seed):
        self._ckpt_text = text
        try:
            persistence.save_checkpoint(self, path, {"rounds": rounds, "stopper": stopper.state(), "seed": int(seed)},
                                        {})
        finally:
            self._ckpt_text = None

    def _fit_lgb(self, train, val, native, obj, seed, rounds, init_text, after_round, done, init_score=None):
        import lightgbm as lgb

        params = self._lgb_params(native, seed, library_bagging=not self._bags_rows(native))
        reseed = _LgbReseeder(params, seed, done, train.X.shape[0])
        if obj is not None:
            params["objective"] = obj
        sizes = np.diff(train.offsets)
        cats = params.get("categorical_feature")  # column indices: the Dataset's argument (LightGBM warns in params)
        if isinstance(cats, str) and all(t.strip().isdigit() for t in cats.split(",")) or \
                isinstance(cats, (list, tuple)) and all(isinstance(c, int) for c in cats):
            params.pop("categorical_feature")
            cats = [int(c) for c in (cats.split(",") if isinstance(cats, str) else cats)]
        else:
            cats = "auto"
        dtrain = lgb.Dataset(train.X, label=train.y, group=sizes, weight=train.sample_weight, init_score=init_score,
                             params={"verbosity": -1}, free_raw_data=False, categorical_feature=cats,
                             feature_name=self._names if self._names is not None else "auto")
        init = None if init_text is None else lgb.Booster(model_str=persistence.array_to_text(init_text))
        valid_sets, feval, latest = None, None, {}
        if val is not None:
            # LightGBM keeps the validation scores and adds each new tree's output (its own
            # ScoreUpdater, as for its built-in metrics); feval receives them every round
            valid_sets = [lgb.Dataset(val.X, label=val.y, group=np.diff(val.offsets), reference=dtrain,
                                      params={"verbosity": -1})]

            def keep_scores(preds, data):
                latest["scores"] = np.array(preds, dtype=np.float64)
                return "rankwise", 0.0, True
            feval = keep_scores

        def callback(env):
            val_scores = latest.pop("scores", None)
            if after_round(done + env.iteration - env.begin_iteration, lambda: env.model.model_to_string(),
                           val_scores):
                raise lgb.callback.EarlyStopException(env.iteration, [])

        callbacks = [callback]
        if reseed:
            callbacks.append(self._lgb_reseeding(params, reseed, obj is not None))
        booster = lgb.train(params, dtrain, num_boost_round=rounds, init_model=init, valid_sets=valid_sets,
                            feval=feval, callbacks=callbacks)
        self.booster_ = booster

    @staticmethod
    def _lgb_reseeding(params, reseed, custom):
        """The ``before_iteration`` callback that runs ``reseed`` (:class:`_LgbReseeder`) before each round.
        Under a custom objective the objective runs it instead (once per round, after lightgbm's own
        first-round parameter reset and before the round's bagging and tree), and the callback hands it the
        booster."""
        if reseed.columns:
            params["feature_fraction_seed"] = 0  # no round's seed: the first round restarts the sampler too
        if not custom:
            def reseed_round(env):
                reseed(env.model)
            reseed_round.before_iteration = True
            return reseed_round
        inner, holder = params["objective"], {}

        def reseeded_objective(preds, data):
            reseed(holder["booster"])
            return inner(preds, data)
        reseeded_objective.__name__ = getattr(inner, "__name__", "objective")
        params["objective"] = reseeded_objective

        def hand_booster(env):
            holder["booster"] = env.model
        hand_booster.before_iteration = True
        return hand_booster

    def _fit_xgb(self, train, val, native, obj, seed, rounds, init_text, after_round, done, init_score=None):
        import xgboost as xgb

        params = self._xgb_params(native, seed, library_bagging=not self._bags_rows(native))
        sizes = np.diff(train.offsets)
        types = (self.backend_params or {}).get("feature_types")
        dm_kw = {"missing": np.nan, "feature_names": self._names, "feature_types": types,
                 "enable_categorical": types is not None, "nthread": params["nthread"]}
        dtrain = xgb.DMatrix(train.X, label=train.y, **dm_kw)
        dtrain.set_group(sizes)
        if init_score is not None:  # the start of every objective: XGBoost adds it to the (float32) margins
            dtrain.set_base_margin(init_score)
        if train.sample_weight is not None:
            w = train.sample_weight
            starts = train.offsets[:-1]
            per_q = w[starts] if len(starts) else w[:0]
            if np.any(np.repeat(per_q, sizes) != w):
                raise InputError("sample_weight: the xgboost backend takes one weight per query; give every row "
                                 "of a query the same weight (or use backend='lightgbm' for per-row weights)")
            dtrain.set_weight(per_q)
        dval, kept = None, None
        if val is not None:
            # the validation rows' double scores (predict's) are kept: each round adds the new tree's leaves
            # instead of running every tree again
            dval = xgb.DMatrix(val.X, **dm_kw)
            kept = _xgb_sum.RunningScores(dval)
        init = None
        if init_text is not None:
            init = xgb.Booster()
            init.load_model(bytearray(np.asarray(init_text, dtype=np.uint8).tobytes()))
            init.feature_names, init.feature_types = self._names, types  # this fit's columns name the booster

        pinned = self._reseeds_columns(native)
        fraction = float(self.colsample_bytree)
        updaters = _xgb_updaters(params, pinned)

        class CB(xgb.callback.TrainingCallback):
            def before_iteration(cb, model, epoch, evals_log):
                if pinned:  # the tree of round done + epoch samples its columns from these weights only
                    dtrain.set_info(feature_weights=_xgb_columns(seed, done + epoch, train.X.shape[1], fraction))
                if updaters is not None:  # XGBoost's draws of this round from (seed, round) alone
                    model.set_param({"seed": _round_seed(seed, done + epoch, _XGB_SEED_STREAM),
                                     "updater": updaters[epoch % 2]})
                return False

            def after_iteration(cb, model, epoch, evals_log):
                scores = None if dval is None else kept.update(model)
                if scores is None and dval is not None:  # as in _predict_rows: XGBoost's own margin
                    scores = model.predict(dval, output_margin=True)
                return bool(after_round(done + epoch, lambda: bytes(model.save_raw("json")).decode("utf-8"),
                                        scores))

        booster = xgb.train(params, dtrain, num_boost_round=rounds, obj=obj, xgb_model=init, callbacks=[CB()],
                            verbose_eval=False)
        self.booster_ = booster

    def _n_trees(self) -> int:
        if self.backend == "lightgbm":
            return int(self.booster_.current_iteration())
        return int(self.booster_.num_boosted_rounds())

    # -- predict ------------------------------------------------------------------------------
    def _predict_rows(self, Xv):
        """One score per row: the raw boosted score of every round, or of rounds
        ``0..best_iteration_`` when ``early_stopping_rounds`` stopped the fit (an ``eval_set``
        alone does not truncate the booster); XGBoost's float32 leaves summed in double."""
        _check_no_inf(Xv)
        best = getattr(self, "best_iteration_", None)
        if self.backend == "lightgbm":
            return np.asarray(self.booster_.predict(Xv, raw_score=True, num_threads=self._threads(),
                                                    num_iteration=None if best is None else best + 1), dtype=np.float64)
        import xgboost as xgb

        threads = self._threads()
        self.booster_.set_param({"nthread": threads})
        rounds = int(self.booster_.num_boosted_rounds()) if best is None else best + 1

        def dmatrix(rows):
            return xgb.DMatrix(rows, missing=np.nan, nthread=threads)
        # XGBoost decides the splits; the float32 leaves are summed in double (_xgb_sum). The columns were
        # checked against feature_names_in_; the booster's names (given at fit or set later) only label its dumps
        out = _xgb_sum.predict_double(self.booster_, Xv, rounds, dmatrix)
        if out is None:  # no trees (gblinear), or an objective of backend_params unknown here: XGBoost's own margin
            out = self.booster_.predict(dmatrix(Xv), output_margin=True, iteration_range=(0, rounds),
                                        validate_features=False)
        return np.asarray(out, dtype=np.float64)

    # -- persistence: the library's own text format inside the rankwise file ---------------------
    def _booster_to_text(self) -> str:
        """The booster as the library writes it, with the trees ``predict`` uses: after early
        stopping rounds ``0..best_iteration_`` only, so that the text predicts what ``predict`` does."""
        best = getattr(self, "best_iteration_", None)
        if self.backend == "lightgbm":
            return self.booster_.model_to_string(num_iteration=-1 if best is None else best + 1)
        booster = self.booster_ if best is None else self.booster_[:best + 1]
        return bytes(booster.save_raw("json")).decode("utf-8")

    def _get_state(self):
        text = getattr(self, "_ckpt_text", None)  # set only while a checkpoint is written during fit
        if text is None:
            text = self._booster_to_text()
        state = {"n_features_in_": int(self.n_features_in_), "history": getattr(self, "history_", History()).to_dict()}
        for k in ("best_iteration_", "best_score_", "fit_time_", "n_estimators_"):
            if hasattr(self, k):
                state[k] = getattr(self, k)
        return state, {"booster": persistence.text_to_array(text)}

    def _set_state(self, state, arrays):
        self.n_features_in_ = int(state["n_features_in_"])
        self.history_ = History(state.get("history", {}))
        for k in ("best_iteration_", "best_score_", "fit_time_", "n_estimators_"):
            if k in state:
                setattr(self, k, state[k])
        self._load_booster(persistence.array_to_text(arrays["booster"]))

    def _load_booster(self, text: str) -> None:
        # validated before the library parses it: a malformed model string can crash LightGBM/XGBoost
        _booster_text.check_booster_text(self.backend, text, n_features=getattr(self, "n_features_in_", None))
        if self.backend == "lightgbm":
            import lightgbm as lgb

            self.booster_ = lgb.Booster(model_str=text)
        else:
            import xgboost as xgb

            b = xgb.Booster()
            b.load_model(bytearray(text.encode("utf-8")))
            self.booster_ = b
