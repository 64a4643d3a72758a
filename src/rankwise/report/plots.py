"""PNG plots for reports: metric@k curves, learning curves, per-query difference histograms.

matplotlib is imported inside each function (Agg backend, no display needed), so importing
``rankwise.report`` stays light.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rankwise.errors import InputError


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_metric_at_k(curves: dict, path, *, metric: str = "NDCG", title: str | None = None) -> Path:
    """One line per run: ``curves = {run_name: {k: value}}`` → PNG at ``path``."""
    if not curves:
        raise InputError("plot_metric_at_k needs at least one run")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    for name, by_k in curves.items():
        ks = sorted(by_k)
        ax.plot(ks, [by_k[k] for k in ks], marker="o", label=name)
    ax.set_xlabel("cut-off k")
    ax.set_ylabel(f"{metric}@k")
    ax.set_title(title or f"{metric}@k")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_learning_curves(histories: dict, path, *, title: str = "Learning curves") -> Path:
    """``histories = {label: sequence of values per epoch/round}`` → PNG at ``path``."""
    if not histories:
        raise InputError("plot_learning_curves needs at least one history")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    for name, values in histories.items():
        v = np.asarray(values, dtype=float)
        ax.plot(np.arange(1, v.size + 1), v, label=name)
    ax.set_xlabel("epoch / boosting round")
    ax.set_ylabel("value")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_difference_histogram(a, b, path, *, names=("A", "B"), metric: str = "metric", bins: int = 30) -> Path:
    """Histogram of per-query differences ``a_q - b_q`` → PNG at ``path``."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"a and b must be 1-d per-query values of the same length; got {a.shape} and {b.shape}")
    plt = _pyplot()
    d = a - b
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.hist(d, bins=bins, color="#4477aa", edgecolor="white")
    ax.axvline(0.0, color="black", lw=1)
    ax.axvline(d.mean(), color="#cc3311", lw=1.5, ls="--", label=f"mean {d.mean():+.4f}")
    ax.set_xlabel(f"{metric}: {names[0]} − {names[1]} per query")
    ax.set_ylabel("queries")
    ax.set_title(f"{names[0]} vs {names[1]}: wins {int((d > 0).sum())}, ties {int((d == 0).sum())}, "
                 f"losses {int((d < 0).sum())}")
    ax.legend()
    return _save(fig, path)


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
