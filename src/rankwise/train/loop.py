"""The minibatch training loop shared by the torch models (LinearRanker ogd/adam, NeuralRanker)."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.train.batching import gather_padded, query_batches
from rankwise.train.progress import Progress


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

    def call(scores, labels, where, weights=None):
        if weights is None:
            return fn(scores, labels, where=where, reduction="sum", **params)
        return fn(scores, labels, where=where, weights=weights, reduction="sum", **params)

    return call


def epoch_seed(seed: int, epoch: int) -> int:
    """Seed of one epoch: a resumed run draws the same batches and dropout masks as an uninterrupted one."""
    return int(np.random.SeedSequence([int(seed), int(epoch)]).generate_state(1)[0])


def score_padded(module, X, offsets, *, batch_queries: int = 256) -> np.ndarray:
    """Scores of every row, computed by ``module`` over padded batches of whole queries."""
    import torch

    out = np.zeros(X.shape[0], dtype=np.float64)
    was_training = module.training
    module.eval()
    with torch.no_grad():
        for qs in query_batches(offsets, batch_queries):
            Xb, _, _, where, rows = gather_padded(X, None, offsets, qs)
            s = module(torch.from_numpy(Xb), torch.from_numpy(where)).double().numpy()
            out[rows[where]] = s[where]
    module.train(was_training)
    return out


def train_loss_sum(module, loss_fn, X, y, offsets, weights, *, batch_queries: int = 256) -> float:
    import torch

    total = 0.0
    was_training = module.training
    module.eval()
    with torch.no_grad():
        for qs in query_batches(offsets, batch_queries):
            Xb, yb, wb, where, _ = gather_padded(X, y, offsets, qs, weights)
            s = module(torch.from_numpy(Xb), torch.from_numpy(where))
            total += float(loss_fn(s, torch.from_numpy(yb).to(s.dtype), torch.from_numpy(where),
                                   None if wb is None else torch.from_numpy(wb).to(s.dtype)))
    module.train(was_training)
    return total


def run_epochs(*, module, optimizer, loss_fn, train, val, metric, epochs: int, batch_queries: int, seed: int,
               stopper, history, start_epoch: int = 0, verbose="auto", desc: str = "fit",
               penalty=None, before_eval=None, after_eval=None, checkpoint_fn=None, best_state=None,
               score_fn=None):
    """Train ``module`` for ``epochs`` epochs over minibatches of whole queries.

    ``train``/``val`` are ``(X, y, offsets, weights)`` tuples (``val`` may be None). After each
    epoch the training objective and, with a validation set, ``metric`` are recorded in
    ``history``; with early stopping (``stopper.patience`` set) ``stopper`` decides when to stop
    and the module state of the best epoch is kept. ``before_eval``/``after_eval`` bracket
    evaluation (OGD swaps in its averaged iterate there). ``checkpoint_fn(epoch, best_state)`` is
    called after each epoch. Returns the best module state (None without early stopping: a
    validation set alone only records the curve, the final state is the model).
    """
    import torch

    X, y, offsets, weights = train
    n_q = max(int(np.count_nonzero(np.diff(offsets) > 0)), 1)
    score_fn = score_fn or (lambda Xs, offs: score_padded(module, Xs, offs))
    with Progress(epochs, desc=desc, verbose=verbose, initial=start_epoch) as bar:
        for epoch in range(start_epoch, epochs):
            es = epoch_seed(seed, epoch)
            rng = np.random.default_rng(es)
            torch.manual_seed(es)
            module.train()
            for qs in query_batches(offsets, batch_queries, rng=rng):
                Xb, yb, wb, where, _ = gather_padded(X, y, offsets, qs, weights)
                optimizer.zero_grad(set_to_none=True)
                s = module(torch.from_numpy(Xb), torch.from_numpy(where))
                loss = loss_fn(s, torch.from_numpy(yb).to(s.dtype), torch.from_numpy(where),
                               None if wb is None else torch.from_numpy(wb).to(s.dtype)) / len(qs)
                if penalty is not None:
                    loss = loss + penalty()
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"training loss became {float(loss)} at epoch {epoch}; "
                                             "lower the learning rate or standardise the features")
                loss.backward()
                optimizer.step()
            if before_eval is not None:
                before_eval()
            objective = train_loss_sum(module, loss_fn, X, y, offsets, weights) / n_q
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
