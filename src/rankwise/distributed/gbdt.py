"""Distributed gradient boosting over XGBoost's and LightGBM's own collectives, driven by rankwise losses.

.. math::

    g_i = \\frac{\\partial}{\\partial s_i} \\sum_q \\ell(s_q, y_q), \\qquad
    H_i = \\frac{\\partial^2}{\\partial s_i^2} \\sum_q \\ell(s_q, y_q)

Each worker computes ``(g, H)`` of its own rows with :func:`rankwise.losses.as_objective`;
because every query lives on one worker (whole-query partitions, see
:func:`rankwise.distributed.whole_queries`) these are exactly the single-machine values. The
booster library then allreduces the gradient histograms across workers over its own
collective (XGBoost's rabit/collective, LightGBM's socket network), so the trees it grows are
the single-machine trees whenever the split candidates agree (features with at most
``max_bin`` distinct values, or a pre-computed quantile sketch). rankwise starts the ranks itself,
one per worker, rank r on partitions r, r + n, r + 2n, ... (workers in address order), so the
rows each rank sketches and bins, hence the model, do not depend on where Dask placed the
partitions.

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

#: LightGBM's distributed tree learners (names and aliases)
PARALLEL_LEARNERS = frozenset({"data", "data_parallel", "feature", "feature_parallel", "voting", "voting_parallel"})


def _group_sizes(part, qid) -> np.ndarray:
    """The sizes of the consecutive runs of one query id in a whole-query partition, in row order."""
    q = part[qid].to_numpy()
    if len(q) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    return np.diff(np.append(starts, len(q))).astype(np.int64)


def _n_groups(part, qid) -> int:
    return len(_group_sizes(part, qid))


def _rank_rows(parts, feats, qid, label):
    """One rank's rows: its whole-query partitions concatenated in partition order, as float32 features,
    labels and query sizes."""
    X = np.concatenate([p[feats].to_numpy(dtype=np.float32) for p in parts])
    y = np.concatenate([p[label].to_numpy() for p in parts])
    return X, y, np.concatenate([_group_sizes(p, qid) for p in parts])


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
        ``backend="xgboost"`` trains with ``xgboost.train`` over XGBoost's tracker and collective;
        ``backend="lightgbm"`` with LightGBM's data-parallel network; both one rank per worker, rank r on
        partitions r, r + n, ... (n ranks, workers in address order), so that the same fit on the same
        cluster size gives the same model every run.
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


def _xgb_tracker(n_workers, host):
    """Start XGBoost's tracker for ``n_workers`` ranks ordered by task id, listening on ``host``; its worker
    arguments. Runs on the scheduler, which every worker reaches; the tracker thread ends with the collective."""
    import threading

    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=n_workers, host_ip=host, sortby="task")
    tracker.start()
    threading.Thread(target=tracker.wait_for, name="rankwise-xgboost-tracker", daemon=True).start()
    return tracker.worker_args()


def _xgb_rank(params, rounds, obj, collective, rank, feats, qid, label, *parts):
    """One XGBoost rank: its whole-query partitions concatenated in partition order, trained over the tracker's
    collective as rank ``rank``; rank 0 returns the model (UBJSON bytes, every rank ends with the same one)."""
    import xgboost as xgb
    from xgboost import collective as coll

    X, y, sizes = _rank_rows(parts, feats, qid, label)
    # the tracker sorts ranks by task id as strings: zero-padded, so that rank 10 comes after rank 9
    with coll.CommunicatorContext(**collective, dmlc_task_id=f"rankwise-xgboost-{rank:06d}"):
        if coll.get_rank() != rank:  # pragma: no cover - the tracker sorts by task id
            raise RuntimeError(f"XGBoost's tracker made rank {rank} rank {coll.get_rank()}")
        dtrain = xgb.DMatrix(X, label=y, missing=np.nan, nthread=int(params["nthread"]))
        dtrain.set_group(sizes)
        booster = xgb.train(params, dtrain, num_boost_round=rounds, obj=obj, verbose_eval=False)
        return bytes(booster.save_raw("ubj")) if rank == 0 else None


def _fit_xgboost(model, frame, client, qid, label, feats, native, obj, seed, watch):
    """XGBoost's distributed ``hist`` training, one rank per worker, launched here rather than by
    ``xgboost.dask``: that module gives each worker the partitions it happens to hold, and a rank's rows decide
    its share of the quantile sketch (the split candidates), so the same fit gave another model in 3 runs of 4
    (8 partitions, 2 workers). Here rank r holds partitions r, r + n, r + 2n, ... (n ranks, workers in address
    order): the model is a function of the data, the parameters and the number of workers."""
    import xgboost as xgb

    distributed = require_distributed()
    params = model._xgb_params(native, seed)
    rounds = int(model.n_estimators)

    def train():  # every step that waits on a worker runs watched: a task pinned to a dead one never runs
        parts, ranks = _rank_parts(client, frame)  # computed once, here: one copy of the rows on the workers
        n = len(ranks)
        queries = sum(client.gather(client.map(_n_groups, parts, qid=qid, pure=False)))
        if queries >= 2 ** 32:
            raise InputError(f"{queries} queries: XGBoost stores query ids as uint32 (at most 2**32 queries)")
        host = distributed.comm.get_address_host(client.scheduler.address)
        collective = client.run_on_scheduler(_xgb_tracker, n, host)
        ncores = client.ncores()
        futures = [client.submit(_xgb_rank, dict(params, nthread=int(ncores.get(w, 1))), rounds, obj, collective,
                                 r, feats, qid, label, *parts[r::n], workers=[w], allow_other_workers=False,
                                 pure=False)
                   for r, w in enumerate(ranks)]
        return client.gather(futures)[0]

    raw = watched(client, train, what="fit_gbdt (xgboost)", timeout=watch[0], start=watch[1])
    booster = xgb.Booster(model_file=bytearray(raw))
    # GBDTRanker predicts on plain arrays: the booster has no column names (none were given to the DMatrix)
    booster.feature_names = None
    booster.feature_types = None
    return booster


def _rank_parts(client, frame):
    """The frame's non-empty partitions (futures, in partition order) and the workers that train on them, one
    rank each, in address order: rank r takes partitions r, r + n, r + 2n, ... (n = len(ranks))."""
    parts = client.compute(frame.to_delayed())  # futures, in partition order
    lengths = client.gather(client.map(len, parts, pure=False))
    parts = [p for p, k in zip(parts, lengths) if k > 0]
    if not parts:
        raise InputError("fit_gbdt: the frame has no rows")
    return parts, sorted(workers(client) or ())[:len(parts)]


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

    X, y, sizes = _rank_rows(parts, feats, qid, label)
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

    def train():  # every step that waits on a worker runs watched: a task pinned to a dead one never runs
        parts, ranks = _rank_parts(client, frame)  # computed once, here: one copy of the rows on the workers
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
