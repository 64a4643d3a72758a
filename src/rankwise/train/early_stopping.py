"""Validation metrics named by strings (``"ndcg@10"``) and early stopping on them."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError


def resolve_metric(spec: str):
    """A function ``f(scores, labels, offsets) -> float`` (``metric.sign`` is -1 for a lower-is-better metric) for a metric string.

    The string is resolved by :mod:`rankwise.metrics` (e.g. ``"ndcg@10"``, ``"map"``); metrics
    use the library defaults for validation: exp2 gain, ties averaged, empty queries 0.
    """
    if not isinstance(spec, str):
        raise InputError(f"eval_metric must be a metric string such as 'ndcg@10'; got {type(spec).__name__}")
    from rankwise import metrics

    fn = metrics.get_metric(spec)
    sign = 1.0 if fn.higher_is_better else -1.0

    def metric(scores, labels, offsets) -> float:
        qid = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        return float(fn(np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64), qid=qid))

    metric.__name__ = spec
    metric.sign = sign  # early stopping maximises sign * value
    return metric


class EarlyStopping:
    """Stop when the validation metric has not improved by ``min_delta`` for ``patience`` steps.

    ``update(step, value)`` returns True when training should stop; ``best_step`` and
    ``best_value`` give the best step seen (the model restores its state from that step).
    """

    def __init__(self, patience: int | None, *, min_delta: float = 0.0):
        if patience is not None and (not isinstance(patience, (int, np.integer)) or patience < 1):
            raise InputError(f"early_stopping_rounds must be a positive integer or None; got {patience!r}")
        self.patience = patience
        self.min_delta = float(min_delta)
        self.best_value = -np.inf
        self.best_step = -1
        self.improved = False

    def update(self, step: int, value: float) -> bool:
        self.improved = value > self.best_value + self.min_delta or self.best_step < 0
        if self.improved:
            self.best_value, self.best_step = float(value), int(step)
        return self.patience is not None and step - self.best_step >= self.patience

    def state(self) -> dict:
        return {"best_value": None if not np.isfinite(self.best_value) else self.best_value,
                "best_step": self.best_step}

    def load_state(self, st: dict) -> None:
        self.best_value = -np.inf if st.get("best_value") is None else float(st["best_value"])
        self.best_step = int(st.get("best_step", -1))
