"""Distributed gradient boosting on ``xgboost.dask`` and LightGBM's own network, driven by rankwise losses.

.. math::

    g_i = \\frac{\\partial}{\\partial s_i} \\sum_q \\ell(s_q, y_q), \\qquad
    H_i = \\frac{\\partial^2}{\\partial s_i^2} \\sum_q \\ell(s_q, y_q)

Each worker computes ``(g, H)`` of its own rows with :func:`rankwise.losses.as_objective`;
because every query lives on one worker (whole-query partitions, see
:func:`rankwise.distributed.whole_queries`) these are exactly the single-machine values. The
booster library then allreduces the gradient histograms across workers over its own
collective (XGBoost's rabit/collective, LightGBM's socket network), so the trees it grows are
the single-machine trees whenever the split candidates agree (features with at most
``max_bin`` distinct values, or a pre-computed quantile sketch).

References
----------
T. Chen and C. Guestrin. XGBoost: a scalable tree boosting system. KDD 2016 (Sec. 3.3
weighted quantile sketch, Sec. 4 distributed training). Q. Meng et al. A communication-efficient
parallel algorithm for decision tree. NeurIPS 2016 (LightGBM data-parallel).
"""
from __future__ import annotations

import time
from urllib.parse import urlparse

import numpy as np

from rankwise.distributed._deps import require_dask, require_distributed
from rankwise.distributed._watch import watched, workers
from rankwise.distributed.partition import _check_frame, feature_columns, whole_queries
from rankwise.errors import InputError
from rankwise.models.gbdt import register_collection_fit

__all__ = ["fit_gbdt"]

GROUP = "_rankwise_group"
#: LightGBM's distributed tree learners (names and aliases)
PARALLEL_LEARNERS = frozenset({"data", "data_parallel", "feature", "feature_parallel", "voting", "voting_parallel"})


def _add_group_code(part, qid, starts, partition_info=None):
    """Dense group code increasing across partitions: groups before this partition + local group index.

    XGBoost stores qid as uint32 and needs it non-decreasing on each worker, so the codes are
    0..n_queries-1 in partition order.
    """
    k = 0 if partition_info is None else int(partition_info["number"])
    q = part[qid].to_numpy()
    if len(q) == 0:
        return part.assign(**{GROUP: np.zeros(0, dtype=np.int64)})
    new = np.concatenate(([True], q[1:] != q[:-1]))
    return part.assign(**{GROUP: np.int64(starts[k]) + np.cumsum(new).astype(np.int64) - 1})


def _n_groups(part, qid):
    q = part[qid].to_numpy()
    return int(np.count_nonzero(q[1:] != q[:-1]) + 1) if len(q) else 0


def _group_sizes(part, qid):
    import pandas as pd

    q = part[qid].to_numpy()
    if len(q) == 0:
        return pd.Series([], dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    return pd.Series(np.diff(np.append(starts, len(q))).astype(np.int64))


def fit_gbdt(model, frame, *, client=None, qid: str = "qid", label: str = "label", features=None,
             timeout: float | None = None):
    """Fit a :class:`rankwise.models.GBDTRanker` on a Dask collection with the same loss and parameters.

    The distributed counterpart of ``GBDTRanker.fit``: ``fit_gbdt(GBDTRanker("listnet",
    backend="xgboost", ...), frame)``. (``GBDTRanker.fit`` itself does not accept a Dask
    collection.)

    Parameters
    ----------
    model : rankwise.models.GBDTRanker
        Configured (``loss``, ``backend``, tree parameters, ``random_state``); fitted in place.
        ``backend="xgboost"`` trains with ``xgboost.dask.train``; ``backend="lightgbm"`` with LightGBM's
        data-parallel network, one rank per worker, rank r on partitions r, r + n, ... (n ranks, workers in
        address order), so that the same fit on the same cluster size gives the same model every run.
    frame : dask.dataframe.DataFrame
        Rows with ``qid``, ``label`` and feature columns, any layout (reshuffled into whole
        queries when needed).
    client : distributed.Client, optional
        Default: the current client.
    qid, label : str
    features : list of str, optional
        Feature columns in order (default: every numeric column except qid/label/doc_id/score).
    timeout : float, optional
        Seconds the training collective may take before :class:`rankwise.errors.WorkerLostError`
        (default: no limit; a dead worker is detected without it).

    Returns
    -------
    GBDTRanker
        ``model`` with ``booster_`` set: it predicts on numpy arrays as usual, or on a Dask
        collection through :func:`rankwise.distributed.predict`, and saves with ``model.save``.

    Notes
    -----
    ``eval_set``/``early_stopping_rounds``, sample weights, checkpoints and ``resume`` are not
    supported here (use the single-machine ``fit``). With ``backend="xgboost"`` and features of
    at most ``max_bin`` (256) distinct values the learned trees equal single-machine ones up to
    the order of floating-point histogram sums; with continuous features every worker sketches
    the quantiles of its own rows and XGBoost merges the sketches, so the histogram bins (split
    candidates), hence the trees, depend slightly on the number of workers (measured in
    ``benchmarks/results/bench_distributed.md``).

    A worker that dies during training (killed, out of memory) raises
    :class:`rankwise.errors.WorkerLostError` naming it as soon as the scheduler sees it gone: the
    booster's collective cannot finish without it, and no partial model is set (``model`` keeps
    its previous state). A worker lost earlier in the call (while the rows are partitioned) raises
    the same error before training: Dask would recompute its partitions, but the group sizes and
    rows handed to the booster could then disagree (measured: a LightGBM shape error).
    """
    from rankwise.models import GBDTRanker
    from rankwise._validation import fit_seed

    require_dask()
    distributed = require_distributed()
    if isinstance(model, type):
        raise InputError(f"model must be a configured instance, e.g. GBDTRanker('listnet', backend='xgboost'); "
                         f"got the class {model.__name__}")
    if not isinstance(model, GBDTRanker):
        raise InputError(f"model must be a rankwise.models.GBDTRanker; got {type(model).__name__}")
    _check_frame(frame, [qid, label])
    model._check_params()
    if model.early_stopping_rounds is not None:
        raise InputError("fit_gbdt does not support early_stopping_rounds (no eval_set on Dask yet); "
                         "set early_stopping_rounds=None")
    feats = feature_columns(frame, qid=qid, label=label, features=features)
    if client is None:
        try:
            client = distributed.get_client()
        except ValueError:
            raise InputError("fit_gbdt needs a dask.distributed Client: pass client= or create one "
                             "(distributed.Client(...)) before calling") from None
    watch_from = workers(client)  # a worker lost from here on (partitioning included) fails the fit cleanly
    native, obj = model._objective()
    seed = fit_seed(model.random_state) % (2 ** 31)
    frame = whole_queries(frame[[qid, label] + feats], qid=qid)
    t0 = time.perf_counter()
    if model.backend == "xgboost":
        booster = _fit_xgboost(model, frame, client, qid, label, feats, native, obj, seed, (timeout, watch_from))
    else:
        booster = _fit_lightgbm(model, frame, client, qid, label, feats, native, obj, seed, (timeout, watch_from))
    from rankwise.train.history import History

    model.booster_ = booster
    model.n_features_in_ = len(feats)
    model.history_ = History()
    model.fit_time_ = time.perf_counter() - t0
    model.n_estimators_ = model._n_trees()
    return model


def _fit_xgboost(model, frame, client, qid, label, feats, native, obj, seed, watch):
    import xgboost as xgb
    import xgboost.dask as dxgb

    dask, _ = require_dask()
    distributed = require_distributed()
    frame = frame.persist()
    counts = dask.compute(*[dask.delayed(_n_groups)(p, qid) for p in frame.to_delayed()])
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    if starts[-1] >= 2 ** 32:
        raise InputError(f"{int(starts[-1])} queries: XGBoost stores query ids as uint32 (at most 2**32 queries)")
    meta = frame._meta.assign(**{GROUP: np.zeros(0, dtype=np.int64)})
    framed = frame.map_partitions(_add_group_code, qid, starts, meta=meta).persist()
    distributed.wait(framed)
    # framed holds the same rows plus the group codes: release the first persisted copy now, so
    # that the workers do not keep both for the whole training (one copy of the rows fewer)
    del frame
    X = framed[feats].astype(np.float32)
    dtrain = dxgb.DaskDMatrix(client, X, framed[label], qid=framed[GROUP], missing=np.nan)
    params = model._xgb_params(native, seed)
    out = watched(client, lambda: dxgb.train(client, params, dtrain, num_boost_round=int(model.n_estimators),
                                             obj=obj, verbose_eval=False),
                  what="fit_gbdt (xgboost)", timeout=watch[0], start=watch[1])
    booster = out["booster"]
    if not isinstance(booster, xgb.Booster):  # pragma: no cover
        raise RuntimeError("xgboost.dask.train returned no booster")
    # GBDTRanker predicts on plain arrays: drop the column names the DataFrame gave the booster
    booster.feature_names = None
    booster.feature_types = None
    return booster


def _free_port() -> int:
    """A TCP port free on this worker now (LightGBM binds it when its network starts)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _lgb_rank(params, rounds, feats, qid, label, *parts):
    """One LightGBM data-parallel rank: its whole-query partitions concatenated in partition order, trained
    over the network ``params`` describe; the model text (every rank ends with the same model)."""
    import lightgbm as lgb

    X = np.concatenate([p[feats].to_numpy(dtype=np.float32) for p in parts])
    y = np.concatenate([p[label].to_numpy() for p in parts])
    sizes = np.concatenate([_group_sizes(p, qid).to_numpy() for p in parts])
    data = lgb.Dataset(X, label=y, group=sizes, params={"verbosity": -1}, free_raw_data=True)
    booster = lgb.train(params, data, num_boost_round=rounds)
    text = booster.model_to_string()
    booster.free_network()
    return text


def _fit_lightgbm(model, frame, client, qid, label, feats, native, obj, seed, watch):
    """LightGBM's data-parallel training (``tree_learner="data"``), one rank per worker, launched here rather
    than by ``lightgbm.dask``: that module orders its ranks as the scheduler lists the workers holding the
    data, which changes from run to run, and a rank's rows decide its share of the bin boundaries, so the
    same fit gave another model one run in four (measured: max |Δscore| 0.40 on 200 queries). Here rank r
    holds partitions r, r + n, r + 2n, ... (n ranks, workers in address order): the model is a function of
    the data, the parameters and the number of workers."""
    import lightgbm as lgb

    from rankwise import losses

    params = model._lgb_params(native, seed)
    params["objective"] = native if obj is None else losses.as_objective(model.loss, "lightgbm",
                                                                         **dict(model.loss_params or {}))
    learner = params.setdefault("tree_learner", "data")
    if learner not in PARALLEL_LEARNERS:
        raise InputError(f"backend_params tree_learner={learner!r}: a Dask fit trains one LightGBM rank per worker, "
                         f"which needs a parallel tree learner, one of {sorted(PARALLEL_LEARNERS)} (default 'data')")
    rounds = int(model.n_estimators)
    frame = frame.persist()

    def train():  # every step that waits on a worker runs watched: a task pinned to a dead one never runs
        parts = client.compute(frame.to_delayed())  # futures, in partition order
        lengths = client.gather(client.map(len, parts, pure=False))
        parts = [p for p, k in zip(parts, lengths) if k > 0]
        if not parts:
            raise InputError("fit_gbdt: the frame has no rows")
        ranks = sorted(workers(client) or ())[:len(parts)]
        n = len(ranks)
        ports = client.gather([client.submit(_free_port, workers=[w], allow_other_workers=False, pure=False)
                               for w in ranks])
        network = {"machines": ",".join(f"{urlparse(w).hostname}:{port}" for w, port in zip(ranks, ports)),
                   "num_machines": n} if n > 1 else {}
        ncores = client.ncores()
        futures = [client.submit(_lgb_rank, dict(params, num_threads=int(ncores.get(w, 1)), **network,
                                                 **({"local_listen_port": ports[r]} if network else {})),
                                 rounds, feats, qid, label, *parts[r::n], workers=[w], allow_other_workers=False,
                                 pure=False)
                   for r, w in enumerate(ranks)]
        return client.gather(futures)[0]

    text = watched(client, train, what="fit_gbdt (lightgbm)", timeout=watch[0], start=watch[1])
    return lgb.Booster(model_str=text)


# GBDTRanker.fit(dask_frame) comes here (the model layer cannot import this package).
register_collection_fit("dask", fit_gbdt)
