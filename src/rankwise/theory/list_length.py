"""The list-length experiment: does the generalisation gap of linear rankers grow with m?

Chaudhuri & Tewari (2015) ask whether generalisation error bounds must degrade with the length
m of the document lists. Their answer for losses with an m-free ℓ∞ Lipschitz constant (ListNet,
G_∞ ≤ 2) is no; the older bound (Chapelle & Wu 2010) grows like √m, and RankSVM's ℓ∞ constant
itself grows like m²/2. :func:`run_list_length_experiment` measures this on synthetic data:

- a fixed number of training and test queries; per query, m documents with d features drawn
  i.i.d. N(0, I) and normalised to unit ℓ2 norm (so R = 1 exactly);
- graded labels 0..4 from a noisy linear model, cut at fixed quantiles (the label
  distribution does not depend on m);
- for each m ∈ {10, 30, 100, 300, 1000}: ℓ2-regularised ERM (Theorem 6's algorithm) of a linear
  ranker with the ListNet loss and with the RankSVM loss (the registered ``listnet`` and
  ``pairwise_hinge`` losses, which are the paper's forms), by L-BFGS on their float64 gradients;
- reported: per-query surrogate train/test gap, NDCG@10 train/test gap, and the complexity terms
  of Theorem 6 (``√8 G_∞ R W / √n``) and of the older bound (``G_2 R W √(m/n)``), with
  ``W = ‖ŵ‖₂`` of the fitted ranker (a data-dependent plug-in) and the closed-form constants
  (ListNet: G_∞ = 2, G_2 = √2; RankSVM: G_∞ = ⌊m²/2⌋ and G_2 = √(m(m²−1)/3), both the exact
  suprema over all label vectors — G_2 by a majorisation argument, see
  :mod:`rankwise.theory.lipschitz` — hence valid upper bounds for labels 0..4 too).

The losses are per-list sums (the form whose constants the paper states), so RankSVM values
scale with the number of pairs; the ratio gap / bound is the scale-free comparison.

References
----------
S. Chaudhuri, A. Tewari. "Generalization error bounds for learning to rank: does the length of
document lists matter?" ICML 2015. Sects. 3 and 7, Theorem 6.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.theory.generalization import generalization_bound
from rankwise.theory.lipschitz import closed_form_lipschitz

__all__ = ["ListLengthResult", "run_list_length_experiment", "make_synthetic_lists"]


def make_synthetic_lists(n_queries: int, m: int, d: int, rng: np.random.Generator, w_true: np.ndarray,
                         noise: float = 1.5, cuts=(0.5, 0.75, 0.9, 0.97)):
    """``(X [n, m, d], y [n, m])``: unit-norm rows, labels 0..4 from a noisy linear model."""
    X = rng.normal(size=(n_queries, m, d))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    z = X @ w_true + noise * rng.normal(size=(n_queries, m)) / math.sqrt(d)
    # fixed thresholds: quantiles of the latent distribution (estimated once from a big sample)
    ref = np.random.default_rng(12345)
    Xr = ref.normal(size=(20000, d))
    Xr /= np.linalg.norm(Xr, axis=-1, keepdims=True)
    zr = Xr @ w_true + noise * ref.normal(size=20000) / math.sqrt(d)
    th = np.quantile(zr, cuts)
    y = np.searchsorted(th, z).astype(np.float64)
    return X, y


# The experiment's losses: the registered rankwise losses in the paper's per-list sum form.
# "listnet" (temperature 1) is −Σ_j P_j(y) log P_j(s); "pairwise_hinge" (RankSVM) is
# Σ_{y_i>y_j} max(0, 1 + s_j − s_i) (C&T 2015, Sect. 3.1 and appendix C).
# Values: (registered loss, the paper form whose closed-form constants
# :func:`rankwise.theory.lipschitz.closed_form_lipschitz` gives).
_LOSSES = {"listnet": ("listnet", "listnet_ct"), "ranksvm": ("pairwise_hinge", "ranksvm")}


def _value_grad(loss: str, S: np.ndarray, Y: np.ndarray):
    """Per-list values and score gradients of a registered loss, in float64 numpy.

    The losses are the torch ones of :mod:`rankwise.losses` (:func:`rankwise.losses.get`), run
    in float64; a sum over independent lists has the per-list gradients as its gradient.
    """
    import torch

    from rankwise.losses import get

    s = torch.tensor(S, dtype=torch.float64, requires_grad=True)
    per = get(_LOSSES[loss][0])(s, torch.as_tensor(Y, dtype=torch.float64), reduction="none")
    (g,) = torch.autograd.grad(per.sum(), s)
    return per.detach().numpy(), g.numpy()


def _fit(loss, X, Y, lam, maxiter):
    from scipy.optimize import minimize

    n = X.shape[0]

    def obj(w):
        S = X @ w
        v, g = _value_grad(loss, S, Y)
        grad = np.einsum("qm,qmd->d", g, X) / n + lam * w
        return float(v.mean() + 0.5 * lam * w @ w), grad

    res = minimize(obj, np.zeros(X.shape[-1]), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "gtol": 1e-8})
    return res.x


def _ndcg10(S, Y):
    """Mean NDCG@10 over the lists (:func:`rankwise.metrics.ndcg`, exp2 gain, a list without a
    relevant item counts 0)."""
    from rankwise.metrics import ndcg

    return float(ndcg(S, Y, k=10))


def _ratio(num: float, den: float) -> float | None:
    """``num / den``, or None when the denominator is 0 (a perfectly fitted training set)."""
    return None if den == 0 else num / den


@dataclass
class ListLengthResult:
    """Rows (one per loss and m) of the list-length experiment, with a Markdown table."""

    rows: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_markdown(self) -> str:
        head = ("| loss | m | train loss | test loss | gap | gap / train loss | NDCG@10 train | NDCG@10 test | ‖w‖₂ | "
                "G_∞ | Thm 6 term | older term | gap / Thm 6 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        lines = [head]
        for r in self.rows:
            rel = _ratio(r["gap"], r["train_loss"])
            per_thm6 = _ratio(r["gap"], r["thm6"])
            lines.append(f"| {r['loss']} | {r['m']} | {r['train_loss']:.4g} | {r['test_loss']:.4g} | {r['gap']:.3g} | "
                         f"{'n/a (train loss 0)' if rel is None else format(rel, '.2%')} | "
                         f"{r['ndcg_train']:.3f} | {r['ndcg_test']:.3f} | {r['W']:.3g} | {r['G_inf']:.4g} | "
                         f"{r['thm6']:.3g} | {r['older']:.3g} | {'n/a' if per_thm6 is None else format(per_thm6, '.3g')} |")
        return "\n".join(lines)

    def __str__(self) -> str:
        s = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"List-length experiment ({s}; {self.seconds:.0f} s)\n\n{self.to_markdown()}"

    def save(self, out_dir) -> dict:
        """Write ``list_length.png``, ``list_length.md`` and ``list_length.json`` into ``out_dir``."""
        import json
        from pathlib import Path

        from rankwise._io import atomic_write

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"png": out / "list_length.png", "md": out / "list_length.md", "json": out / "list_length.json"}
        self.plot(paths["png"])
        with atomic_write(paths["md"], "w") as fh:
            fh.write(str(self) + "\n")
        with atomic_write(paths["json"], "w") as fh:
            fh.write(json.dumps({"rows": self.rows, "settings": self.settings, "seconds": self.seconds},
                                default=float, indent=1))
        return paths

    def plot(self, path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for ax, (loss, color) in zip(axes[:2], (("listnet", "tab:blue"), ("ranksvm", "tab:red"))):
            rs = [r for r in self.rows if r["loss"] == loss]
            ms = [r["m"] for r in rs]
            gaps = np.array([r["gap"] for r in rs])
            pos = gaps > 0
            floor = max(np.abs(gaps).min() * 0.5, 1e-9)
            ax.plot(ms, np.where(pos, gaps, floor), "-", color=color, alpha=0.5)
            ax.plot(np.array(ms)[pos], gaps[pos], "o", color=color, label="test − train loss (measured)")
            if (~pos).any():
                ax.plot(np.array(ms)[~pos], np.full((~pos).sum(), floor), "x", color=color, ms=9,
                        label="gap ≤ 0 (test below train), drawn at the floor")
            ax.plot(ms, [r["thm6"] for r in rs], "s--", color="k", label="Theorem 6 term √8·G∞·R·W/√n")
            ax.plot(ms, [r["older"] for r in rs], "^:", color="gray", label="older term G₂·R·W·√(m/n)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("list length m")
            ax.set_title(f"{loss}: per-query surrogate gap and bounds")
            ax.legend(fontsize=8)
            axes[2].plot(ms, [r["ndcg_train"] - r["ndcg_test"] for r in rs], "o-", color=color, label=loss)
        axes[2].set_xscale("log")
        axes[2].axhline(0, color="k", lw=0.5)
        axes[2].set_xlabel("list length m")
        axes[2].set_title("NDCG@10 train − test")
        axes[2].legend()
        fig.tight_layout()
        from pathlib import Path

        from rankwise._io import atomic_write

        with atomic_write(path) as fh:
            fig.savefig(fh, format=Path(path).suffix[1:].lower() or "png", dpi=110)
        plt.close(fig)


def run_list_length_experiment(list_lengths=(10, 30, 100, 300, 1000), *, n_train: int = 50,
                               n_test: int = 200, n_features: int = 20, lam: float = 1e-3,
                               n_repeats: int | None = None, maxiter: int = 100, seed: int = 0,
                               losses=("listnet", "ranksvm"), verbose: bool = False,
                               quick: bool = False, out_dir=None) -> ListLengthResult:
    """Train ListNet and RankSVM linear rankers for each list length m and measure the gap.

    Parameters
    ----------
    list_lengths : sequence of int
        The values of m.
    n_train, n_test : int
        Number of training and test queries (fixed across m).
    n_features : int
        d.
    lam : float
        ℓ2 regularisation of the regularised ERM (Theorem 6's algorithm).
    n_repeats : int, optional
        Independent data draws per m (results are averaged); default 3 (1 with ``quick``).
    maxiter : int
        L-BFGS iterations.
    seed : int
        Seed of the data generator.
    quick : bool
        Smaller run: m ∈ {10, 30, 100}, 100 test queries, one data draw unless ``n_repeats``
        is given.
    out_dir : path, optional
        Also write ``list_length.png``, ``.md`` and ``.json`` there (:meth:`ListLengthResult.save`).

    Returns
    -------
    ListLengthResult
        ``rows`` (dicts), ``to_markdown()`` and ``plot(path)``.
    """
    explicit_repeats = n_repeats is not None
    n_repeats = 3 if n_repeats is None else n_repeats
    for nm, v in (("n_train", n_train), ("n_test", n_test), ("n_features", n_features), ("n_repeats", n_repeats),
                  ("maxiter", maxiter)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{nm} must be a positive integer; got {v!r}")
    if isinstance(lam, (bool, np.bool_)) or not isinstance(lam, (int, float, np.integer, np.floating)) \
            or not math.isfinite(lam) or lam < 0:
        raise InputError(f"lam must be a finite number ≥ 0; got {lam!r}")
    bad = [m for m in list_lengths if not isinstance(m, (int, np.integer)) or m < 2]
    if bad:
        raise InputError(f"list_lengths must be integers ≥ 2; got {bad}")
    unknown = [x for x in losses if x not in _LOSSES]
    if unknown:
        raise InputError(f"unknown losses {unknown}; available: {sorted(_LOSSES)}")
    if quick:
        list_lengths = tuple(m for m in list_lengths if m <= 100) or (10, 30, 100)
        n_test = min(n_test, 100)
        n_repeats = n_repeats if explicit_repeats else 1
    t0 = time.perf_counter()
    rng0 = np.random.default_rng(seed)
    w_true = rng0.normal(size=n_features)
    w_true /= np.linalg.norm(w_true)
    w_true *= 3.0
    rows = []
    for m in list_lengths:
        acc = {loss: [] for loss in losses}
        for rep in range(n_repeats):
            rng = np.random.default_rng([seed, int(m), rep])
            Xtr, ytr = make_synthetic_lists(n_train, m, n_features, rng, w_true)
            Xte, yte = make_synthetic_lists(n_test, m, n_features, rng, w_true)
            for loss in losses:
                w = _fit(loss, Xtr, ytr, lam, maxiter)
                tr = float(_value_grad(loss, Xtr @ w, ytr)[0].mean())
                te = float(_value_grad(loss, Xte @ w, yte)[0].mean())
                acc[loss].append((tr, te, _ndcg10(Xtr @ w, ytr), _ndcg10(Xte @ w, yte), float(np.linalg.norm(w))))
        for loss in losses:
            a = np.array(acc[loss]).mean(0)
            paper = _LOSSES[loss][1]
            G_inf, G_2 = (closed_form_lipschitz(paper, norm, int(m))["bound"] for norm in ("inf", "2"))
            terms = generalization_bound(n_queries=n_train, G_inf=G_inf, G_2=G_2, W=max(a[4], 1e-12),
                                         R=1.0, list_length=int(m))
            rows.append({"loss": loss, "m": int(m), "train_loss": a[0], "test_loss": a[1], "gap": a[1] - a[0],
                         "ndcg_train": a[2], "ndcg_test": a[3], "W": a[4], "G_inf": G_inf, "G_2": G_2,
                         "thm6": terms.rerm, "older": terms.chapelle_wu})
            if verbose:
                print(rows[-1], flush=True)
    settings = dict(list_lengths=[int(m) for m in list_lengths], n_train=n_train, n_test=n_test, n_features=n_features,
                    lam=lam, n_repeats=n_repeats, maxiter=maxiter, seed=seed)
    result = ListLengthResult(rows, settings, time.perf_counter() - t0)
    if out_dir is not None:
        result.save(out_dir)
    return result
