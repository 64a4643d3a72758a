"""Data-parallel training of LinearRanker / NeuralRanker with PyTorch DistributedDataParallel (gloo, CPU).

.. math::

    \\nabla_\\theta \\frac{1}{|B|} \\sum_{q \\in B} \\ell(f_\\theta(X_q), y_q)
    = \\frac{1}{R} \\sum_{r=1}^{R} \\nabla_\\theta \\Bigl[\\frac{R}{|B|}
      \\sum_{q \\in B \\cap S_r} \\ell(f_\\theta(X_q), y_q)\\Bigr]

Queries are sharded whole across the ``R`` ranks (query ``q`` goes to rank ``q mod R``). Every
rank draws the *same* global minibatch schedule ``B_1, B_2, ...`` from the seed (the
single-process schedule of :func:`rankwise.train.batching.query_batches`), computes the loss of
the queries of ``B`` it owns scaled by ``R/|B|``, and DDP's allreduce averages the gradients —
which gives exactly the single-process minibatch gradient (right-hand side = left-hand side).
With the same seed and data the learned weights therefore match single-process
``model.fit`` up to the order of floating-point sums.

References
----------
S. Li et al. PyTorch Distributed: experiences on accelerating data parallel training.
VLDB 2020. D. P. Kingma and J. Ba. Adam: a method for stochastic optimization. ICLR 2015.
"""
from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import numpy as np

from rankwise.errors import InputError

__all__ = ["fit_ddp", "train_rank"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for the gloo rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shard_queries(n_queries: int, world_size: int, rank: int) -> np.ndarray:
    """Global indices of the queries rank ``rank`` owns: ``q`` with ``q mod world_size == rank``."""
    return np.arange(rank, n_queries, world_size, dtype=np.int64)


def _plan(model, X, y, qid, sample_weight):
    """Validate and preprocess on the full data exactly as ``model.fit`` does; return the training config."""
    import torch

    from rankwise.models import LinearRanker, NeuralRanker
    from rankwise.models._torch import Standardizer, fit_seed

    if isinstance(model, LinearRanker):
        model._check_params()
        if model.solver not in ("adam", "ogd"):
            raise InputError(f"fit_ddp trains minibatch solvers; LinearRanker(solver={model.solver!r}) is not one: "
                             "use solver='adam' or 'ogd'")
    elif isinstance(model, NeuralRanker):
        model._hidden = model._check_params()
    else:
        raise InputError(f"model must be a rankwise LinearRanker or NeuralRanker; got {type(model).__name__}")
    if model.early_stopping_rounds is not None:
        raise InputError("fit_ddp does not support early_stopping_rounds (no eval_set); set it to None")
    train, _ = model._validate_fit(X, y, qid, sample_weight=sample_weight)
    seed = fit_seed(model.random_state)
    sc = Standardizer.fit(train.X, bool(model.standardize))
    model.scaler_mean_, model.scaler_scale_ = sc.mean, sc.scale
    if isinstance(model, LinearRanker):
        model._fit_feature_map(train.X.shape[1], seed)
        averaged = model.solver == "ogd"
        lr = model.lr if model.lr is not None else (0.1 if averaged else 0.01)
        batch = model.batch_queries if model.batch_queries is not None else (1 if averaged else 16)
        cfg = dict(kind="linear", averaged=averaged, lr=float(lr), batch=int(batch), epochs=int(model.max_iter),
                   alpha=float(model.alpha), l1=float(model.l1), radius=model.radius, weight_decay=0.0)
    else:
        cfg = dict(kind="neural", averaged=False, lr=float(model.lr), batch=int(model.batch_queries),
                   epochs=int(model.epochs), alpha=0.0, l1=0.0, radius=None, weight_decay=float(model.weight_decay))
    model.n_features_in_ = train.X.shape[1]
    Z = model._transform(train.X)
    if hasattr(Z, "toarray"):
        Z = Z.toarray()
    cfg["seed"] = int(seed)
    del torch
    return cfg, np.asarray(Z, dtype=np.float32), train.y, train.offsets, train.sample_weight


def _write_shards(tmp: Path, Z, y, offsets, w, world_size: int):
    sizes = np.diff(offsets)
    for r in range(world_size):
        qs = shard_queries(len(sizes), world_size, r)
        rows = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in qs]) if len(qs) else np.zeros(0, int)
        loc = np.concatenate(([0], np.cumsum(sizes[qs]))).astype(np.int64)
        arrays = dict(Z=Z[rows], y=y[rows], offsets=loc, global_sizes=sizes)
        if w is not None:
            arrays["w"] = w[rows]
        np.savez(tmp / f"shard{r}.npz", **arrays)


def train_rank(model, cfg: dict, shard: dict, rank: int, world_size: int):
    """The per-rank training loop (call inside an initialised ``torch.distributed`` process group).

    ``shard`` holds this rank's queries (``Z`` transformed features, ``y``, local ``offsets``,
    optional ``w``) and ``global_sizes`` (list length of every query, for the shared schedule);
    rank ``r`` must hold queries ``r, r + R, r + 2R, ...`` in order. Usable under ``torchrun``
    on a real cluster. Returns ``(module, history)``.
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from rankwise.train.batching import gather_padded, query_batches
    from rankwise.train.loop import epoch_seed, resolve_loss, train_loss_sum
    from rankwise.train.optim import make_averaged_ogd

    Z, y, off = shard["Z"], shard["y"], shard["offsets"]
    w = shard.get("w")
    gsizes = np.asarray(shard["global_sizes"], dtype=np.int64)
    goff = np.concatenate(([0], np.cumsum(gsizes))).astype(np.int64)
    n_q = max(int(np.count_nonzero(gsizes > 0)), 1)
    seed = cfg["seed"]
    torch.manual_seed(seed)
    module = model._build_module(Z.shape[1])
    ddp = DDP(module)
    if cfg["averaged"]:
        optimizer = make_averaged_ogd(module.parameters(), lr=cfg["lr"], radius=cfg["radius"])
    elif cfg["kind"] == "linear":
        optimizer = torch.optim.Adam(module.parameters(), lr=cfg["lr"])
    else:
        optimizer = torch.optim.AdamW(module.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    penalty = None
    if cfg["kind"] == "linear" and (cfg["alpha"] or cfg["l1"]):
        wt = module.linear.weight
        alpha, l1 = cfg["alpha"], cfg["l1"]
        penalty = lambda: 0.5 * alpha * (wt * wt).sum() + l1 * wt.abs().sum()  # noqa: E731
    loss_fn = resolve_loss(model.loss, model.loss_params)
    dummy_x = torch.zeros((1, 1, Z.shape[1]), dtype=torch.float32)
    dummy_where = torch.ones((1, 1), dtype=torch.bool)
    history = []
    for epoch in range(cfg["epochs"]):
        es = epoch_seed(seed, epoch)
        rng = np.random.default_rng(es)
        torch.manual_seed(es)
        ddp.train()
        for qs in query_batches(goff, cfg["batch"], rng=rng):
            mine = qs[qs % world_size == rank] // world_size  # local positions of the owned queries
            optimizer.zero_grad(set_to_none=True)
            if len(mine):
                Xb, yb, wb, where, _ = gather_padded(Z, y, off, mine, w)
                s = ddp(torch.from_numpy(Xb), torch.from_numpy(where))
                loss = loss_fn(s, torch.from_numpy(yb).to(s.dtype), torch.from_numpy(where),
                               None if wb is None else torch.from_numpy(wb).to(s.dtype)) * (world_size / len(qs))
            else:  # this rank owns none of the batch: join the allreduce with a zero gradient
                loss = ddp(dummy_x, dummy_where).sum() * 0.0
            if penalty is not None:
                loss = loss + penalty()
            if not torch.isfinite(loss):
                raise FloatingPointError(f"rank {rank}: training loss became {float(loss)} at epoch {epoch}; "
                                         "lower the learning rate or standardise the features")
            loss.backward()
            optimizer.step()
        if cfg["averaged"]:
            optimizer.swap_average()
        total = torch.tensor([train_loss_sum(module, loss_fn, Z, y, off, w) if len(off) > 1 else 0.0],
                             dtype=torch.float64)
        dist.all_reduce(total)
        if cfg["averaged"]:
            optimizer.swap_average()
        history.append({"epoch": epoch, "loss": float(total[0]) / n_q})
    if cfg["averaged"]:
        optimizer.swap_average()
    module.eval()
    return module, history


def _rank_main(rank, world_size, port, tmp, model, cfg, threads):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    from datetime import timedelta

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=cfg.get("timeout", 600)))
    try:
        with np.load(Path(tmp) / f"shard{rank}.npz") as f:
            shard = {k: f[k] for k in f.files}
        module, history = train_rank(model, cfg, shard, rank, world_size)
        if rank == 0:
            state = {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
            np.savez(Path(tmp) / "state.npz", **state)
            np.save(Path(tmp) / "history.npy", np.array([h["loss"] for h in history], dtype=np.float64))
        dist.barrier()
    finally:
        dist.destroy_process_group()


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
        Number of processes (ranks); queries are sharded whole, ``q mod world_size``.
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
    Processes are started with ``torch.multiprocessing.spawn`` and rendezvous on
    ``tcp://127.0.0.1:<free port>``; each loads only its shard (written to a temporary
    directory as ``.npz``). On a cluster, call :func:`train_rank` under ``torchrun`` instead
    (docs/distributed.md). Preprocessing (standardisation, feature map) is fitted on the
    full data first, as in ``model.fit``. No eval_set / early stopping / checkpoints.
    """
    import torch
    import torch.multiprocessing as mp

    if not isinstance(world_size, (int, np.integer)) or world_size < 1:
        raise InputError(f"world_size must be a positive integer; got {world_size!r}")
    if not isinstance(threads_per_rank, (int, np.integer)) or threads_per_rank < 1:
        raise InputError(f"threads_per_rank must be a positive integer; got {threads_per_rank!r}")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        raise InputError("this torch build has no gloo backend; fit_ddp needs torch.distributed with gloo")
    cfg, Z, yy, offsets, w = _plan(model, X, y, qid, sample_weight)
    cfg["timeout"] = float(timeout)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rankwise-ddp-") as tmp:
        _write_shards(Path(tmp), Z, yy, offsets, w, int(world_size))
        port = free_port()
        mp.spawn(_rank_main, args=(int(world_size), port, tmp, model, cfg, int(threads_per_rank)),
                 nprocs=int(world_size), join=True)
        with np.load(Path(tmp) / "state.npz") as f:
            state = {k: torch.from_numpy(np.array(f[k])) for k in f.files}
        losses = np.load(Path(tmp) / "history.npy")
    torch.manual_seed(cfg["seed"])
    module = model._build_module(Z.shape[1])
    module.load_state_dict(state)
    module.eval()
    from rankwise.train.history import History

    model.history_ = History()
    for e, v in enumerate(losses.tolist()):
        model.history_.record(epoch=e, loss=v)
    model.module_ = module
    model.fit_time_ = time.perf_counter() - t0
    if cfg["kind"] == "linear":
        model._sync_from_module()
        del model.module_
    return model
