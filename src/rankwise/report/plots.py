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


def system_colors(names) -> dict:
    """One distinct colour per system, the same in every panel and figure of a report: tab10 up
    to 10 systems, tab20 up to 20, then evenly spaced hues (turbo) — never a repeated colour."""
    import matplotlib

    names = list(dict.fromkeys(names))
    n = len(names)
    if n <= 10:
        cmap, pts = matplotlib.colormaps["tab10"], [i / 10 + 0.05 for i in range(n)]
    elif n <= 20:
        cmap, pts = matplotlib.colormaps["tab20"], [i / 20 + 0.025 for i in range(n)]
    else:
        cmap, pts = matplotlib.colormaps["turbo"], list(np.linspace(0.05, 0.95, n))
    return {name: cmap(p) for name, p in zip(names, pts)}


_MARKERS = "osD^vP*Xh<>p"


def _legend_outside(fig, ax, n: int) -> None:
    """Legend to the right of the axes, in columns of at most 15 entries: it never covers a line."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small" if n > 6 else "medium",
              ncol=max(1, (n + 14) // 15), frameon=False, borderaxespad=0.0)


def plot_metric_at_k(curves: dict, path, *, metric: str = "NDCG", title: str | None = None) -> Path:
    """One line per run: ``curves = {run_name: {k: value}}`` → PNG at ``path``.

    Readable from 2 to 30 runs: a distinct colour (and marker) per run, the legend outside the
    axes, the cut-offs as integer ticks."""
    if not curves:
        raise InputError("plot_metric_at_k needs at least one run")
    plt = _pyplot()
    n = len(curves)
    colors = system_colors(curves)
    fig, ax = plt.subplots(figsize=(6.5 + 1.6 * ((n + 14) // 15), 4), dpi=110)
    all_k = sorted({int(k) for by_k in curves.values() for k in by_k})
    for i, (name, by_k) in enumerate(curves.items()):
        ks = sorted(by_k)
        ax.plot(ks, [by_k[k] for k in ks], marker=_MARKERS[i % len(_MARKERS)], ms=4, lw=1.4,
                color=colors[name], label=str(name))
    ax.set_xticks(all_k)
    ax.set_xticklabels([str(k) for k in all_k])
    ax.set_xlabel("cut-off k")
    ax.set_ylabel(f"{metric}@k")
    ax.set_title(title or f"{metric}@k")
    ax.grid(alpha=0.3)
    _legend_outside(fig, ax, n)
    return _save(fig, path)


#: history keys that count steps: they become the x-axis, never a curve
COUNTERS = ("epoch", "iteration", "round", "step")


def plot_learning_curves(histories: dict, path, *, title: str = "Learning curves") -> Path:
    """Training histories → PNG at ``path``: one panel per quantity, one line per model.

    ``histories = {model_name: {quantity: values per epoch/round}}`` (a model's ``history_``).
    A counter key (``epoch``, ``iteration``, ...) gives the x-axis; ``None`` entries (a
    quantity not recorded at that step) are skipped. Quantities live on their own axes, so a
    loss in the hundreds never flattens an NDCG curve.
    """
    if not histories:
        raise InputError("plot_learning_curves needs at least one history")
    series = {}  # quantity -> [(model, x, y)]
    for model, history in histories.items():
        if not isinstance(history, dict):
            raise InputError(f"histories[{model!r}] must be a dict of per-step lists (a model's history_); "
                             f"got {type(history).__name__}")
        counter = next((c for c in COUNTERS if c in history), None)
        for key, values in history.items():
            if key in COUNTERS:
                continue
            x = history[counter] if counter else range(1, len(values) + 1)
            pts = [(float(a), float(b)) for a, b in zip(x, values) if a is not None and b is not None]
            if pts:
                series.setdefault(key, []).append((model, *map(list, zip(*pts))))
    if not series:
        raise InputError("the histories hold no recorded values to plot")
    plt = _pyplot()
    n = len(series)
    colors = system_colors(histories)  # one colour per model, the same in every panel
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, n, figsize=(4.5 * n + 1.8, 3.8), dpi=110, squeeze=False)
    for ax, (key, lines) in zip(axes[0], series.items()):
        for model, x, y in lines:
            ax.plot(x, y, label=str(model), color=colors[model], marker="." if len(x) < 40 else None)
        ax.set_xlabel("epoch / boosting round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(key)
        ax.set_title(key)
        ax.grid(alpha=0.3)
    _legend_outside(fig, axes[0][-1], len(histories))
    fig.suptitle(title)
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
    save_figure(fig, path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def save_figure(fig, path, **kwargs) -> None:
    """``fig.savefig`` through :func:`rankwise._io.atomic_write` (format from the file name, PNG by default)."""
    from rankwise._io import atomic_write

    path = Path(path)
    with atomic_write(path) as fh:
        fig.savefig(fh, format=path.suffix[1:].lower() or "png", **kwargs)
