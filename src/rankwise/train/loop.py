"""The minibatch training loop shared by the torch models (LinearRanker ogd/adam, NeuralRanker)."""
from __future__ import annotations

import math

import numpy as np

from rankwise.errors import InputError, TrainingDivergedError
from rankwise.train.batching import gather_padded, query_batches
from rankwise.train.progress import Progress


class TrainingHooks:
    """How :func:`run_epochs` talks to the world around one process; the defaults train alone.

    A distributed trainer (:mod:`rankwise.distributed.ddp`) subclasses it and passes it to the
    model's own loop (``model.fit_with_hooks(train, hooks)``) instead of re-implementing the loop:

    - :attr:`seed` — the seed of the schedule, the initial weights and the feature map;
    - :meth:`scaler_stats` — feature means and scales for standardisation;
    - :meth:`wrap` — the module used for the training forward pass (e.g. a
      ``DistributedDataParallel`` wrapper, whose backward averages the gradients over ranks);
    - :meth:`batches` — the minibatch schedule: ``(local query indices, divisor)`` pairs; the
      loss of a step is the summed loss of its local queries divided by the divisor;
    - :meth:`empty_batch_loss` — the loss of a step in which this process owns no query;
    - :meth:`reduce_sum` and :meth:`n_queries` — the epoch's training objective over all processes;
    - :attr:`check_gradients` — check the (synchronised) gradients for NaN/inf after backward
      rather than the local loss before it, so that every process stops together;
    - :attr:`verbose` — False silences the progress bar (ranks other than 0).
    """

    check_gradients = False

    def __init__(self, seed: int, verbose=None):
        self.seed = int(seed)
        self.verbose = verbose

    def scaler_stats(self, X, enabled: bool):
        """Per-feature ``(mean, scale)``; centring only for dense ``X`` (as the models' Standardizer)."""
        import scipy.sparse as sp

        d = X.shape[1]
        if not enabled:
            return np.zeros(d), np.ones(d)
        if sp.issparse(X):
            mean, scale = np.zeros(d), np.sqrt(np.asarray(X.multiply(X).mean(axis=0)).ravel())
        else:
            Xd = np.asarray(X, dtype=np.float64)
            mean, scale = Xd.mean(axis=0), Xd.std(axis=0)
        return mean, np.where(scale > 1e-12, scale, 1.0)

    def wrap(self, module):
        return module

    def batches(self, offsets, batch_queries: int, rng):
        for qs in query_batches(offsets, batch_queries, rng=rng):
            yield qs, len(qs)

    def empty_batch_loss(self, module, n_features: int):
        raise AssertionError("the single-process schedule has no empty batch")

    def reduce_sum(self, value: float) -> float:
        return value

    def n_queries(self, offsets) -> int:
        return max(int(np.count_nonzero(np.diff(offsets) > 0)), 1)


def resolve_loss(loss, loss_params: dict | None):
    """A callable ``f(scores, labels, where, weights) -> summed loss`` from a name or a function.

    Names resolve through :func:`rankwise.losses.compiled` (the loss on its compiled engine for CPU
    tensors, the torch form otherwise); a callable must have the rankwise loss
    signature ``fn(scores, labels, *, where=None, weights=None, reduction="mean", **hyper)``.
    ``loss_params`` must be a dict whose names are keyword-only parameters of the loss (checked
    here, before training, by the same rule as :func:`rankwise.losses.as_objective`).
    """
    from rankwise.losses.registry import check_hyper

    if isinstance(loss, str):
        from rankwise import losses

        # on CPU tensors the loss runs on its compiled kernel (same value and gradient, O(n) memory)
        fn, name = losses.compiled(loss), loss
    elif callable(loss):
        fn, name = loss, getattr(loss, "__name__", type(loss).__name__)
    else:
        raise InputError(f"loss must be a rankwise loss name (see rankwise.losses.REGISTRY) or a callable; "
                         f"got {type(loss).__name__}")
    params = check_hyper(fn, loss_params, loss=name, param="loss_params")
    return _SummedLoss(fn, params)


class _SummedLoss:
    """``f(scores, labels, where, weights) -> summed loss`` (a class, not a closure: models stay picklable)."""

    def __init__(self, fn, params: dict):
        self.fn, self.params = fn, params

    def __call__(self, scores, labels, where, weights=None):
        if weights is None:
            return self.fn(scores, labels, where=where, reduction="sum", **self.params)
        return self.fn(scores, labels, where=where, weights=weights, reduction="sum", **self.params)


def epoch_seed(seed: int, epoch: int) -> int:
    """Seed of one epoch: a resumed run draws the same batches and dropout masks as an uninterrupted one."""
    return int(np.random.SeedSequence([int(seed), int(epoch)]).generate_state(1)[0])


class PaddedBatches:
    """The batches of whole queries of the fixed schedule ``query_batches(offsets, batch_queries)`` (no
    shuffling), padded, for the passes that visit every query after each epoch -- the training objective, the
    validation scores: iterating gives ``(Xb, yb, wb, where, rows)`` per batch (features and mask as tensors,
    labels, weights and rows as arrays, as :func:`~rankwise.train.batching.gather_padded`).

    The first batches are padded once and kept, up to ``max_bytes`` in all; the others (large data) are
    padded again on each pass, so memory stays bounded. ``max_bytes=0`` keeps nothing: one pass.
    """

    def __init__(self, X, y, offsets, weights=None, *, batch_queries: int = 256, max_bytes: int = 64 << 20):
        self.X, self.y, self.offsets, self.weights = X, y, offsets, weights
        self.batches, budget = [], int(max_bytes)
        for qs in query_batches(offsets, batch_queries):
            cells = int(np.diff(offsets)[qs].max(initial=0)) * len(qs)
            cost = cells * (4 * X.shape[1] + 8 * (1 + (y is not None) + (weights is not None)) + 1)
            if cost <= budget:
                budget -= cost
                self.batches.append(self._pad(qs))
            else:
                self.batches.append(qs)

    def _pad(self, qs):
        import torch

        Xb, yb, wb, where, rows = gather_padded(self.X, self.y, self.offsets, qs, self.weights)
        return torch.from_numpy(Xb), yb, wb, torch.from_numpy(where), rows

    def __iter__(self):
        for b in self.batches:
            yield self._pad(b) if isinstance(b, np.ndarray) else b


def score_padded(module, X, offsets, *, batch_queries: int = 256, batches: PaddedBatches | None = None) -> np.ndarray:
    """Scores of every row, computed by ``module`` over padded batches of whole queries (``batches``: the
    same schedule padded once, :class:`PaddedBatches` of ``X`` and ``offsets``)."""
    import torch

    out = np.zeros(X.shape[0], dtype=np.float64)
    was_training = module.training
    module.eval()
    with torch.no_grad():
        for Xb, _, _, where, rows in (batches if batches is not None else
                                      PaddedBatches(X, None, offsets, batch_queries=batch_queries, max_bytes=0)):
            s = module(Xb, where).double().numpy()
            w = where.numpy()
            out[rows[w]] = s[w]
    module.train(was_training)
    return out


def bind_loss(loss_fn, module):
    """``loss_fn.bind(module)`` for a loss that reads trainable parts of ``module`` (see :func:`run_epochs`),
    else ``loss_fn`` itself."""
    bind = getattr(loss_fn, "bind", None)
    return loss_fn if bind is None else bind(module)


def train_loss_sum(module, loss_fn, X, y, offsets, weights, *, batch_queries: int = 256,
                   batches: PaddedBatches | None = None) -> float:
    """The summed loss of every query at ``module``'s current parameters (eval mode, no gradient), over the
    padded batches of whole queries (``batches``: the same schedule padded once, :class:`PaddedBatches`)."""
    import torch

    loss_fn = bind_loss(loss_fn, module)
    total = 0.0
    was_training = module.training
    module.eval()
    with torch.no_grad():
        for Xb, yb, wb, where, _ in (batches if batches is not None else
                                     PaddedBatches(X, y, offsets, weights, batch_queries=batch_queries, max_bytes=0)):
            s = module(Xb, where)
            total += float(loss_fn(s, torch.from_numpy(yb).to(s.dtype), where,
                                   None if wb is None else torch.from_numpy(wb).to(s.dtype)))
    module.train(was_training)
    return total


def run_epochs(*, module, optimizer, loss_fn, train, val, metric, epochs: int, batch_queries: int, seed: int,
               stopper, history, start_epoch: int = 0, verbose="auto", desc: str = "fit",
               penalty=None, before_eval=None, after_eval=None, checkpoint_fn=None, best_state=None,
               score_fn=None, hooks: TrainingHooks | None = None):
    """Train ``module`` for ``epochs`` epochs over minibatches of whole queries.

    ``train``/``val`` are ``(X, y, offsets, weights)`` tuples (``val`` may be None). After each
    epoch the training objective and, with a validation set, ``metric`` are recorded in
    ``history``; with early stopping (``stopper.patience`` set) ``stopper`` decides when to stop
    and the module state of the best epoch is kept. ``before_eval``/``after_eval`` bracket
    evaluation (OGD swaps in its averaged iterate there). ``checkpoint_fn(epoch, best_state)`` is
    called after each epoch. Returns the best module state (None without early stopping: a
    validation set alone only records the curve, the final state is the model). ``hooks``
    (:class:`TrainingHooks`) adapts the loop to data-parallel training; None trains alone.

    ``loss_fn(scores, labels, where, weights)`` returns the summed loss of a padded batch. A loss
    that reads trainable parts of the model besides its scores (DLA's propensity tower: one logit
    per rank, trained on the same batches by the same optimiser) has a ``bind(module)`` method;
    the loop then calls ``loss_fn.bind(module)`` instead, with ``module`` the model being trained
    (so the loss reads the very parameters that the optimiser steps and early stopping restores).
    """
    import torch

    loss_fn = bind_loss(loss_fn, module)
    hooks = hooks if hooks is not None else TrainingHooks(seed)
    if hooks.verbose is not None:
        verbose = hooks.verbose
    X, y, offsets, weights = train
    n_q = hooks.n_queries(offsets)
    # the passes after each epoch visit the same batches every time: padded once, here
    loss_batches = PaddedBatches(X, y, offsets, weights)
    if score_fn is None and val is not None:
        val_batches = PaddedBatches(val[0], None, val[2])
        score_fn = lambda Xs, offs: score_padded(module, Xs, offs, batches=val_batches)  # noqa: E731
    forward = hooks.wrap(module)
    with Progress(epochs, desc=desc, verbose=verbose, initial=start_epoch) as bar:
        for epoch in range(start_epoch, epochs):
            es = epoch_seed(seed, epoch)
            rng = np.random.default_rng(es)
            # the epoch's dropout masks: the models compute on the CPU, so the CPU generator is the one that
            # draws (torch.manual_seed would also queue the seed for every other device, ~0.4 ms each epoch)
            torch.default_generator.manual_seed(es)
            forward.train()
            for qs, divisor in hooks.batches(offsets, batch_queries, rng):
                optimizer.zero_grad(set_to_none=True)
                if len(qs):
                    Xb, yb, wb, where, _ = gather_padded(X, y, offsets, qs, weights)
                    s = forward(torch.from_numpy(Xb), torch.from_numpy(where))
                    loss = loss_fn(s, torch.from_numpy(yb).to(s.dtype), torch.from_numpy(where),
                                   None if wb is None else torch.from_numpy(wb).to(s.dtype)) / divisor
                else:  # this process owns none of the batch's queries (data-parallel training)
                    loss = hooks.empty_batch_loss(forward, X.shape[1])
                if penalty is not None:
                    loss = loss + penalty()
                if not hooks.check_gradients and not math.isfinite(loss.item()):
                    raise TrainingDivergedError(f"training loss became {float(loss)} at epoch {epoch}; "
                                                "lower the learning rate or standardise the features")
                loss.backward()
                if hooks.check_gradients and not all(bool(torch.isfinite(p.grad).all())
                                                     for p in module.parameters() if p.grad is not None):
                    raise TrainingDivergedError(f"the gradient became non-finite at epoch {epoch}; "
                                                "lower the learning rate or standardise the features")
                optimizer.step()
            if before_eval is not None:
                before_eval()
            objective = hooks.reduce_sum(train_loss_sum(module, loss_fn, X, y, offsets, weights,
                                                        batches=loss_batches)) / n_q
            record = {"epoch": epoch, "loss": objective}
            stop = False
            if val is not None:
                value = metric(score_fn(val[0], val[2]), val[1], val[2])
                record[metric.__name__] = value
                stop = stopper.update(epoch, metric.sign * value)
                if stopper.improved and stopper.patience is not None:
                    best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
            if after_eval is not None:
                after_eval()
            history.record(**record)
            bar.update(1, loss=objective, **({metric.__name__: record[metric.__name__]} if val is not None else {}))
            if checkpoint_fn is not None:
                checkpoint_fn(epoch + 1, best_state)
            if stop:
                break
    return best_state
