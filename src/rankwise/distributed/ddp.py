"""Data-parallel training of LinearRanker / NeuralRanker with PyTorch DistributedDataParallel (gloo, CPU).

.. math::

    \\nabla_\\theta \\frac{1}{|B|} \\sum_{q \\in B} \\ell(f_\\theta(X_q), y_q)
    = \\frac{1}{R} \\sum_{r=1}^{R} \\nabla_\\theta \\Bigl[\\frac{R}{|B|}
      \\sum_{q \\in B \\cap S_r} \\ell(f_\\theta(X_q), y_q)\\Bigr]

Queries are sharded whole across the ``R`` ranks: rank ``r`` holds the queries ``S_r``, and the
global query order is rank 0's queries (in its order), then rank 1's, and so on. Every rank
learns the list length of every query (one ``all_gather``) and draws the *same* global
minibatch schedule ``B_1, B_2, ...`` from the seed over global query indices (the
single-process schedule of :func:`rankwise.train.batching.query_batches`); it computes the loss
of the queries of ``B`` it owns scaled by ``R/|B|``, and DDP's allreduce averages the gradients
— which gives exactly the single-process minibatch gradient (right-hand side = left-hand side).
Preprocessing statistics (feature means and standard deviations for ``standardize=True``) are
combined with ``all_reduce`` over the ranks, so no rank ever needs another rank's rows. With the
same seed the learned weights therefore match single-process ``model.fit`` on the
concatenation of the shards up to the order of floating-point sums.

Two entry points:

* :func:`fit_shard` — call it on every rank of an initialised ``torch.distributed`` process group
  (``torchrun`` on one or many machines), each rank passing only its own shard;
  ``python -m rankwise.distributed.ddp train --data 'shard_{rank}.txt' ...`` is a ready-made
  per-rank script for ``torchrun`` (see :func:`main`).
* :func:`fit_ddp` — one call on one machine: shards in-memory data over ``world_size`` local
  processes and runs :func:`fit_shard` in each.

References
----------
S. Li et al. PyTorch Distributed: experiences on accelerating data parallel training.
VLDB 2020. D. P. Kingma and J. Ba. Adam: a method for stochastic optimization. ICLR 2015.
"""
from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from rankwise.errors import InputError, RankwiseError

__all__ = ["fit_shard", "fit_ddp", "shard_bounds", "main"]

_CHUNK = 65536  # rows per chunk of the float64 statistics passes (bounds the temporary memory)


def shard_bounds(offsets, world_size: int) -> np.ndarray:
    """Cut points ``0 = c_0 < c_1 < ... < c_R = n_queries``: rank ``r`` gets queries ``c_r .. c_{r+1}-1``.

    Whole queries, contiguous in the input order, cut where the row counts are closest to
    equal; every rank gets at least one query.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n_q = len(offsets) - 1
    if world_size > n_q:
        raise InputError(f"world_size={world_size} is larger than the number of queries ({n_q}); "
                         "every rank needs at least one query")
    targets = offsets[-1] * np.arange(1, world_size) / world_size
    cuts = np.concatenate(([0], np.searchsorted(offsets, targets), [n_q])).astype(np.int64)
    for r in range(1, world_size):
        cuts[r] = min(max(cuts[r], cuts[r - 1] + 1), n_q - (world_size - r))
    return cuts


# ----------------------------------------------------------------------------- collective helpers

def _agree(error, group=None):
    """Collective: every rank passes the exception it hit (or None); if any rank failed, all raise.

    Without this a rank that fails alone would leave the others waiting in their next
    collective until the process-group timeout. The failing rank re-raises its own exception;
    the others raise an InputError naming the failed ranks and their messages.
    """
    import torch.distributed as dist

    msgs = [None] * dist.get_world_size(group)
    mine = None if error is None else f"{type(error).__name__}: {error}"
    dist.all_gather_object(msgs, mine, group=group)
    failed = [(r, m) for r, m in enumerate(msgs) if m is not None]
    if not failed:
        return
    if error is not None:
        raise error
    raise InputError("; ".join(f"rank {r} failed: {m}" for r, m in failed))


def _gather(obj, group=None) -> list:
    import torch.distributed as dist

    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def _all_reduce_sum(arr: np.ndarray, group=None) -> np.ndarray:
    import torch
    import torch.distributed as dist

    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return t.numpy()


def _global_standardizer(X, enabled: bool, group=None):
    """Standardisation statistics ``(mean, scale)`` over the rows of every rank (the models' Standardizer rule).

    Dense: the mean from all-reduced column sums, then the (population) standard deviation from
    all-reduced sums of squared deviations about that mean — two passes, as numerically stable
    as the single-process ``np.std``. Sparse: no centring, scale = root mean square (as
    ``Standardizer.fit``). Sums in float64, in row chunks.
    """
    d = X.shape[1]
    if not enabled:
        return np.zeros(d), np.ones(d)
    n_rows = X.shape[0]
    if sp.issparse(X):
        sq = np.zeros(d)
        for a in range(0, n_rows, _CHUNK):
            c = X[a:a + _CHUNK].astype(np.float64)  # squares in float64, not float32
            sq += np.asarray(c.multiply(c).sum(axis=0)).ravel()
        tot = _all_reduce_sum(np.append(sq, n_rows), group)
        mean, scale = np.zeros(d), np.sqrt(tot[:d] / tot[d])
    else:
        s = np.zeros(d)
        for a in range(0, n_rows, _CHUNK):
            s += np.asarray(X[a:a + _CHUNK], dtype=np.float64).sum(axis=0)
        tot = _all_reduce_sum(np.append(s, n_rows), group)
        mean = tot[:d] / tot[d]
        ss = np.zeros(d)
        for a in range(0, n_rows, _CHUNK):
            ss += ((np.asarray(X[a:a + _CHUNK], dtype=np.float64) - mean) ** 2).sum(axis=0)
        scale = np.sqrt(_all_reduce_sum(ss, group) / tot[d])
    scale = np.where(scale > 1e-12, scale, 1.0)
    return mean, scale


# ----------------------------------------------------------------------------- model checks

def _check_model(model):
    """Validate the model's parameters for data-parallel training (the model's own checks)."""
    from rankwise.models import LinearRanker, NeuralRanker

    if isinstance(model, type):
        raise InputError(f"model must be a configured instance, e.g. LinearRanker('listnet', solver='adam'); "
                         f"got the class {model.__name__}")
    if not isinstance(model, (LinearRanker, NeuralRanker)):
        raise InputError(f"model must be a rankwise LinearRanker or NeuralRanker; got {type(model).__name__}")
    model._check_params()
    if getattr(model, "solver", "adam") not in ("adam", "ogd"):
        raise InputError(f"data-parallel training uses minibatch solvers; LinearRanker(solver={model.solver!r}) "
                         "is not one: use solver='adam' or 'ogd'")
    if model.early_stopping_rounds is not None:
        raise InputError("data-parallel training does not support early_stopping_rounds (no eval_set); "
                         "set it to None")
    model._make_loss()  # the model's own loss (a click learner's, DLA's, is not a registry name)


def _params_key(model) -> dict:
    """The model's parameters, comparable across processes (callables by qualified name, values by repr)."""
    def norm(v):
        if callable(v):
            return f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', type(v).__name__)}"
        return repr(v)
    return {k: norm(v) for k, v in model.get_params().items()}


def _DDPHooks(seed, **kwargs):
    """:class:`rankwise.train.loop.TrainingHooks` for one rank of a process group (class built on first use)."""
    global _DDP_HOOKS_CLASS
    if _DDP_HOOKS_CLASS is None:
        _DDP_HOOKS_CLASS = _make_hooks_class()
    return _DDP_HOOKS_CLASS(seed, **kwargs)


_DDP_HOOKS_CLASS = None


def _make_hooks_class():
    from rankwise.train.loop import TrainingHooks

    class DDPHooks(TrainingHooks):
        """The model's own loop on one rank: global statistics and schedule, DDP-averaged gradients."""

        check_gradients = True  # on the averaged gradients, alike on every rank: all ranks stop together

        def __init__(self, seed, *, rank, world_size, group, global_sizes, start, n_local):
            super().__init__(seed, verbose=None if rank == 0 else False)
            self.world_size, self.group = world_size, group
            self.goff = np.concatenate(([0], np.cumsum(global_sizes))).astype(np.int64)
            self.n_q = max(int(np.count_nonzero(np.asarray(global_sizes) > 0)), 1)
            self.start, self.n_local = start, n_local

        def scaler_stats(self, X, enabled):
            return _global_standardizer(X, enabled, self.group)

        def wrap(self, module):
            from torch.nn.parallel import DistributedDataParallel as DDP

            return DDP(module, process_group=self.group)  # its backward averages the gradients over ranks

        def batches(self, offsets, batch_queries, rng):
            from rankwise.train.batching import query_batches

            # the single-process schedule over global query indices; this rank's part of every batch, its
            # loss divided by |B|/R so that DDP's average over R ranks is the single-process minibatch gradient
            for qs in query_batches(self.goff, batch_queries, rng=rng):
                local = qs - self.start
                yield local[(local >= 0) & (local < self.n_local)], len(qs) / self.world_size

        def empty_batch_loss(self, module, n_features):
            import torch

            x = torch.zeros((1, 1, n_features), dtype=torch.float32)
            return module(x, torch.ones((1, 1), dtype=torch.bool)).sum() * 0.0  # joins the allreduce

        def reduce_sum(self, value):
            return float(_all_reduce_sum(np.array([value]), self.group)[0])

        def n_queries(self, offsets):
            return self.n_q

    return DDPHooks


# ----------------------------------------------------------------------------- per-rank training

def fit_shard(model, X, y=None, *, qid=None, sample_weight=None, group=None):
    """Fit ``model`` on this rank's shard; call on every rank of an initialised process group.

    Parameters
    ----------
    model : rankwise.models.LinearRanker (``solver="adam"`` or ``"ogd"``) or NeuralRanker
        Configured identically on every rank (checked); fitted in place on every rank.
    X, y, qid, sample_weight
        This rank's rows, as for ``model.fit`` (arrays with a per-row qid, or a RankingDataset as
        ``X``). Every query must live on exactly one rank (checked), and every rank needs at
        least one query.
    group : torch.distributed.ProcessGroup, optional
        Default: the whole world.

    Returns
    -------
    model
        Fitted, identical on every rank: its weights equal those of ``model.fit`` on the
        concatenation of the shards in rank order (rank 0's rows first) with the same
        ``random_state``, up to float32 summation order (for NeuralRanker: with ``dropout=0``,
        since dropout masks are drawn per rank). With ``random_state=None`` rank 0's seed is used.

    Notes
    -----
    Collectives, in order: one ``all_gather_object`` of every rank's parameters, sizes and seed;
    one of every rank's query ids and list lengths (8-16 bytes per query on every rank: 160 MB
    for 10M queries); two ``all_reduce`` of ``d + 1`` floats for the standardisation statistics;
    then DDP's gradient allreduce on every minibatch and one ``all_reduce`` of the training loss
    per epoch. A rank whose data fails validation makes every rank raise (no rank is left
    waiting in a collective).

    Examples
    --------
    Under ``torchrun --nproc_per_node=2 train.py`` (each rank reads only its own file)::

        import torch.distributed as dist
        from rankwise.data import read_svmlight
        from rankwise.models import LinearRanker
        from rankwise.distributed.ddp import fit_shard

        dist.init_process_group("gloo")
        shard = read_svmlight(f"train_{dist.get_rank()}.txt", dense=True)
        model = fit_shard(LinearRanker("listnet", solver="adam", random_state=0), shard)
        if dist.get_rank() == 0:
            model.save("model.rw")
        dist.destroy_process_group()
    """
    import torch.distributed as dist

    from rankwise._validation import fit_seed, warn_user
    from rankwise.data.ranking_input import check_ranking_input

    if not (dist.is_available() and dist.is_initialized()):
        raise InputError("fit_shard runs on every rank of an initialised torch.distributed process group: call "
                         "torch.distributed.init_process_group('gloo') first (torchrun sets RANK, WORLD_SIZE, "
                         "MASTER_ADDR and MASTER_PORT); to train on local processes use fit_ddp")
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    t0 = time.perf_counter()

    # 1. local validation; every rank learns whether any rank failed
    error = train = info = None
    try:
        _check_model(model)
        train = check_ranking_input(X, y, qid, sample_weight=sample_weight)
        if train.X.shape[0] == 0:
            raise InputError("this rank's shard has no rows; every rank needs at least one query")
        info = dict(params=_params_key(model), n_features=int(train.X.shape[1]), sparse=bool(sp.issparse(train.X)),
                    weighted=train.sample_weight is not None, seed=fit_seed(model.random_state))
    except Exception as exc:  # noqa: BLE001 - re-raised by _agree, on this rank and (as InputError) on the others
        error = exc
    _agree(error, group)

    # 2. what must agree across ranks (every rank sees the same gathered values: all raise alike)
    infos = _gather(info, group)
    for name in infos[0]["params"]:
        values = [i["params"].get(name) for i in infos]
        if any(v != values[0] for v in values):
            raise InputError(f"the model parameter {name!r} differs between ranks ("
                             + ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
                             + "); every rank must build the same model")
    for key, what in (("n_features", "the number of features"), ("sparse", "X is sparse"),
                      ("weighted", "sample_weight is given")):
        values = [i[key] for i in infos]
        if any(v != values[0] for v in values):
            raise InputError(f"{what} differs between ranks ("
                             + ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
                             + "); every rank must pass data of the same width and kind")
    seed = int(infos[0]["seed"])

    # 3. the global query order: rank 0's queries, then rank 1's, ...
    shards = _gather((np.diff(train.offsets).astype(np.int64), np.asarray(train.qids)), group)
    sizes = [s for s, _ in shards]
    gsizes = np.concatenate(sizes)
    start = int(sum(len(s) for s in sizes[:rank]))
    _check_disjoint([q for _, q in shards])
    if np.all(gsizes < 2):
        raise InputError(f"every query has a single document ({len(gsizes)} queries over {world_size} ranks); a "
                         "ranker needs queries with at least two documents to learn an order")
    n_single = int(np.count_nonzero(gsizes < 2))
    if n_single and rank == 0:
        warn_user(f"{n_single} of {len(gsizes)} queries have a single document; they carry no ordering "
                  "information and contribute nothing to pairwise or listwise losses")

    # 4. the model's own training loop; the hooks synchronise statistics, schedule and gradients
    hooks = _DDPHooks(seed, rank=rank, world_size=world_size, group=group, global_sizes=gsizes, start=start,
                      n_local=train.n_queries)
    model.fit_with_hooks(train, hooks)
    model.fit_time_ = time.perf_counter() - t0
    return model


def _check_disjoint(qid_lists) -> None:
    """Raise InputError when a query id is on two ranks (a query must not be split across ranks)."""
    owner = np.repeat(np.arange(len(qid_lists)), [len(q) for q in qid_lists])
    try:
        allq = np.concatenate(qid_lists)
        order = np.argsort(allq, kind="stable")
    except TypeError:  # ids of different types on different ranks: compare their text
        allq = np.concatenate([np.asarray(q).astype(str) for q in qid_lists])
        order = np.argsort(allq, kind="stable")
    s = allq[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if len(dup):
        i = dup[0]
        q, ranks = s[i].item() if hasattr(s[i], "item") else s[i], sorted({int(owner[order[i]]), int(owner[order[i + 1]])})
        raise InputError(f"query id {q!r} appears on ranks {ranks[0]} and {ranks[-1]}: a query must live on exactly one "
                         f"rank ({len(dup)} such ids); shard whole queries, with ids unique across shards")


# ----------------------------------------------------------------------------- local processes

def _rank_main(rank, world_size, tmp, model, threads, timeout):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    # a file store in the private temporary directory: no TCP port to pick ahead of time (a port
    # found free and then bound by the ranks can be taken in between: EADDRINUSE)
    dist.init_process_group("gloo", init_method=(Path(tmp) / "rendezvous").as_uri(), rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=timeout))
    try:
        with open(Path(tmp) / f"shard{rank}.pkl", "rb") as f:  # this rank's queries only
            shard = pickle.load(f)
        with warnings.catch_warnings():  # fit_ddp has already warned about single-document queries
            warnings.filterwarnings("ignore", message=r".*single document")
            fit_shard(model, shard["X"], shard["y"], qid=shard["qid"], sample_weight=shard["w"])
        if rank == 0:
            with open(Path(tmp) / "model.pkl", "wb") as f:
                pickle.dump(model._get_state(), f, protocol=pickle.HIGHEST_PROTOCOL)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _start_method() -> str:
    """``"forkserver"`` where the platform has it (Linux, macOS), else ``"spawn"``.

    A fresh interpreter per rank (``spawn``) imports torch, scikit-learn and rankwise again in every
    rank and every call: about 4.5 CPU s per rank before the first gradient. The fork server is
    started once per Python process, with :mod:`rankwise.distributed._rank_preload` loaded; each rank
    of each later call is a ``fork`` of it, so only the fit itself is paid. The server is
    multiprocessing's own (one per process, shared with any other forkserver user): its preload list is
    set only while it is not running yet, so a server the program started itself is used as it is.
    """
    import multiprocessing
    import multiprocessing.forkserver as fs

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    server = getattr(fs, "_forkserver", None)
    if server is not None and getattr(server, "_forkserver_pid", None) is None:
        # "__main__": multiprocessing's own default, kept (the main script imported once, in the server)
        multiprocessing.set_forkserver_preload(["__main__", "rankwise.distributed._rank_preload"])
    return "forkserver"


def fit_ddp(model, X, y=None, *, qid=None, sample_weight=None, world_size: int = 2, threads_per_rank: int = 1,
            timeout: float = 600.0):
    """Fit ``model`` by data-parallel minibatch training on ``world_size`` local processes (gloo).

    Parameters
    ----------
    model : rankwise.models.LinearRanker (``solver="adam"`` or ``"ogd"``) or NeuralRanker
        Configured with its usual parameters; fitted in place.
    X, y, qid, sample_weight
        As for ``model.fit`` (arrays with a per-row qid, or a RankingDataset as ``X``).
    world_size : int
        Number of processes (ranks); each gets a contiguous block of whole queries
        (:func:`shard_bounds`).
    threads_per_rank : int
        torch intra-op threads of each rank.
    timeout : float
        Seconds a collective may wait before the group fails.

    Returns
    -------
    model
        Fitted: its weights equal those of ``model.fit(X, y, qid=qid)`` with the same
        ``random_state`` up to float32 summation order (for NeuralRanker: with ``dropout=0``,
        since dropout masks are drawn per rank).

    Notes
    -----
    Processes are started by ``torch.multiprocessing.start_processes``: forked from
    :mod:`multiprocessing`'s fork server (with torch and the rankers loaded in it once per Python
    process) where the platform has one, else spawned as fresh interpreters (Windows). As with
    ``spawn``, the main script is imported again (by the fork server), so a script must keep its
    work under ``if __name__ == "__main__":``; the ranks see the environment variables the fork
    server started with (the first ``fit_ddp`` call of the process). They rendezvous through a file
    store in a private temporary directory (no TCP port chosen ahead of time); each loads only its shard (written to a temporary
    directory) and runs :func:`fit_shard`. On several machines run :func:`fit_shard` (or
    ``python -m rankwise.distributed.ddp train``) under ``torchrun`` instead. No eval_set /
    early stopping / checkpoints.
    """
    import torch
    import torch.multiprocessing as mp

    if isinstance(world_size, bool) or not isinstance(world_size, (int, np.integer)) or world_size < 1:
        raise InputError(f"world_size must be a positive integer; got {world_size!r}")
    if isinstance(threads_per_rank, bool) or not isinstance(threads_per_rank, (int, np.integer)) or threads_per_rank < 1:
        raise InputError(f"threads_per_rank must be a positive integer; got {threads_per_rank!r}")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        raise InputError("this torch build has no gloo backend; fit_ddp needs torch.distributed with gloo")
    _check_model(model)
    train, _ = model._validate_fit(X, y, qid, sample_weight=sample_weight)
    cuts = shard_bounds(train.offsets, int(world_size))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rankwise-ddp-") as tmp:
        for r in range(int(world_size)):
            qa, qb = int(cuts[r]), int(cuts[r + 1])
            a, b = int(train.offsets[qa]), int(train.offsets[qb])
            shard = dict(X=train.X[a:b], y=train.y[a:b],
                         qid=np.repeat(np.arange(qa, qb, dtype=np.int64), np.diff(train.offsets[qa:qb + 1])),
                         w=None if train.sample_weight is None else train.sample_weight[a:b])
            with open(Path(tmp) / f"shard{r}.pkl", "wb") as f:
                pickle.dump(shard, f, protocol=pickle.HIGHEST_PROTOCOL)
        mp.start_processes(_rank_main, args=(int(world_size), tmp, model, int(threads_per_rank), float(timeout)),
                           nprocs=int(world_size), join=True, start_method=_start_method())
        with open(Path(tmp) / "model.pkl", "rb") as f:
            state, arrays = pickle.load(f)
    model._set_state(state, arrays)
    model.__dict__.pop("_resumed_history", None)
    model.fit_time_ = time.perf_counter() - t0
    return model


# ----------------------------------------------------------------------------- torchrun script

_EXAMPLE = """example (2 processes on this machine; on several machines add --nnodes, --node-rank and
--rdzv-endpoint, see the torchrun docs):

  torchrun --standalone --nproc_per_node=2 -m rankwise.distributed.ddp train \\
      --data 'train_{rank}.txt' --model linear --loss listnet \\
      --params '{"solver": "adam", "max_iter": 20}' --random-state 0 --out model.rw
"""


def _read_shard(path: str, *, sparse: bool, n_features: int | None = None):
    from rankwise import data

    if not Path(path).is_file():
        raise InputError(f"--data: no file {path!r}")
    if path.endswith((".parquet", ".pq")):
        return data.read_parquet(path)
    return data.read_svmlight(path, dense=not sparse, n_features=n_features)


def main(argv=None) -> int:
    """``python -m rankwise.distributed.ddp train ...``: per-rank script for ``torchrun`` (see ``--help``)."""
    import argparse
    import json
    from datetime import timedelta

    p = argparse.ArgumentParser(
        prog="python -m rankwise.distributed.ddp",
        description="Data-parallel training of a rankwise LinearRanker or NeuralRanker with torch.distributed: run "
                    "one process per rank under torchrun; each rank reads only its own shard file.",
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="fit on the shards and save the model (rank 0)", epilog=_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--data", required=True,
                   help="this rank's shard, a path with {rank} (and optionally {world_size}) in it, e.g. "
                        "'train_{rank}.txt': LETOR/SVMlight (.gz too) or Parquet (.parquet, columns qid, label, "
                        "features). Query ids must be unique across shards.")
    t.add_argument("--model", choices=("linear", "neural"), default="linear")
    t.add_argument("--loss", default="listnet", help="a name in rankwise.losses.REGISTRY (default listnet)")
    t.add_argument("--params", default="{}",
                   help="JSON object of further constructor parameters, e.g. '{\"solver\": \"adam\", \"max_iter\": 20}'")
    t.add_argument("--random-state", type=int, default=0)
    t.add_argument("--out", required=True, help="where rank 0 saves the fitted model (read it with rankwise.load)")
    t.add_argument("--sparse", action="store_true", help="keep SVMlight features sparse (default: dense)")
    t.add_argument("--backend", default="gloo", help="torch.distributed backend (default gloo, CPU)")
    t.add_argument("--timeout", type=float, default=600.0, help="seconds a collective may wait (default 600)")
    t.add_argument("--threads", type=int, default=None, help="torch intra-op threads per rank")
    args = p.parse_args(argv)

    import torch
    import torch.distributed as dist

    from rankwise.models import LinearRanker, NeuralRanker

    if not dist.is_initialized():
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            print("error: RANK and WORLD_SIZE are not set; start this script with torchrun "
                  "(torchrun --nproc_per_node=N -m rankwise.distributed.ddp train ...)", file=sys.stderr)
            return 2
        dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        error = shard = model = None
        try:
            if world_size > 1 and "{rank}" not in args.data:
                raise InputError(f"--data {args.data!r} has no '{{rank}}': every rank would read the same file; "
                                 "name the shards e.g. 'train_{rank}.txt'")
            params = json.loads(args.params)
            if not isinstance(params, dict):
                raise InputError(f"--params must be a JSON object; got {args.params!r}")
            cls = LinearRanker if args.model == "linear" else NeuralRanker
            model = cls(args.loss, **{"random_state": args.random_state, "verbose": False, **params})
            if rank == 0 and not Path(args.out).resolve().parent.is_dir():
                raise InputError(f"--out {args.out!r}: the directory {str(Path(args.out).resolve().parent)!r} "
                                 "does not exist")
            path = args.data.format(rank=rank, world_size=world_size)
            shard = _read_shard(path, sparse=args.sparse)
        except json.JSONDecodeError as exc:
            error = InputError(f"--params is not valid JSON ({exc}): {args.params!r}")
        except TypeError as exc:  # unknown constructor parameter
            error = InputError(f"--params: {exc}")
        except Exception as exc:  # noqa: BLE001 - shared with every rank by _agree
            error = exc
        _agree(error)
        # SVMlight omits trailing zero features: every rank reads up to the largest index of any rank
        widths = _gather(int(shard.n_features))
        if max(widths) != shard.n_features and not args.data.endswith((".parquet", ".pq")):
            shard = _read_shard(path, sparse=args.sparse, n_features=max(widths))
        fit_shard(model, shard)
        n_queries = sum(_gather(int(shard.n_queries)))
        error = None
        if rank == 0:
            try:
                model.save(args.out)
            except Exception as exc:  # noqa: BLE001 - shared with every rank by _agree
                error = exc
        _agree(error)
        if rank == 0:
            print(f"rank 0: fitted {type(model).__name__}({args.loss!r}) on {world_size} ranks, {n_queries} "
                  f"queries; final training loss {model.history_['loss'][-1]:.6g}; saved to {args.out}", flush=True)
    except RankwiseError as exc:
        print(f"rank {rank}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    # run the function of the imported module (not of this ``__main__`` copy)
    from rankwise.distributed.ddp import main as _main

    code = _main()
    # The work is done (model saved, process group destroyed): leave without the interpreter's
    # finalisation, during which torch/gloo's C++ threads were once seen to abort a finished rank
    # ("terminate called without an active exception", SIGABRT) and so fail a successful torchrun.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
