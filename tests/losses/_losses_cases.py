"""Shared cases for the loss tests: hyperparameters per loss and random inputs."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import losses_reference as ref  # noqa: E402

from rankwise.losses import REGISTRY, spec  # noqa: E402



class _ExampleHyper(dict):
    """Hyperparameters that make every loss valid for labels in {0, 1, 2}: each spec's
    ``example_hyper`` (read at lookup time, so a loss registered later is covered too)."""

    def get(self, name, default=None):
        return dict(spec(name).example_hyper) if name in REGISTRY else default


BASE_HYPER = _ExampleHyper()

# extra variants checked against the reference
VARIANTS = [(name, BASE_HYPER.get(name, {})) for name in REGISTRY] + [
    ("pointwise_squared", {"utility": "exp2"}),
    ("pointwise_logistic", {"eta": 4.0, "utility": "exp2"}),
    ("pointwise_squared_hinge", {"eta": 2.0, "t": 2.0}),
    ("pairwise_hinge", {"pair_weights": "delta_label"}),
    ("pairwise_hinge", {"pair_weights": "delta_ndcg"}),
    ("pairwise_hinge", {"method": "dense"}),
    ("ranknet", {"sigma": 2.0, "pair_weights": "delta_ndcg"}),
    ("ranknet", {"pair_weights": "delta_label"}),
    ("rankboost", {"pair_weights": "delta_label"}),
    ("rankboost", {"method": "dense"}),
    ("rankboost", {"pair_weights": "delta_ndcg"}),
    ("pairwise_squared", {"method": "dense", "utility": "exp2"}),
    ("op_pairwise", {"phi": "exponential"}),
    ("op_pairwise", {"phi": "exponential", "method": "dense"}),
    ("op_pairwise", {"phi": "squared_hinge", "utility": "exp2"}),
    ("op_pairwise", {"phi": "squared_hinge", "method": "dense"}),
    ("rankboost", {"pair_weights": "delta_label", "method": "dense"}),
    ("kendall_hinge", {"method": "dense"}),
    ("listnet", {"temperature": 0.5}),
    ("smooth_dcg", {"k": 1, "sigma": 0.5}),
    ("smooth_dcg", {"k": 10, "gain": "linear"}),
    ("smooth_dcg1", {"sigma": 2.0}),
    ("lambdaloss", {"sigma": 2.0}),
    ("lambdaloss", {"weighting": "ndcg1"}),
    ("lambdaloss", {"weighting": "ndcg2", "truncation_level": 5}),
    ("lambdaloss", {"weighting": "ndcg1", "truncation_level": 3}),
    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 5.0, "truncation_level": 4}),
    ("lambdaloss", {"weighting": "lambdarank", "gain": "linear"}),
    ("lambdarank", {"truncation_level": 2, "sigma": 2.0}),
    ("lambdarank", {"norm": False, "truncation_level": None, "gain": "linear"}),
    ("approx_ndcg", {"alpha": 2.0, "gain": "linear"}),
    ("bregman", {"psi": "kl", "link": "exp"}),
    ("bregman", {"psi": "squared", "link": "exp", "utility": "exp2"}),
]


def vid(v):
    name, hyper = v
    return name + ("" if not hyper else "-" + "-".join(f"{k}={x}" for k, x in sorted(hyper.items())))


def labels_for(name, shape, gen, *, dtype=torch.float64):
    hi = 1 if spec(name).binary_labels else 2
    return torch.randint(0, hi + 1, shape, generator=gen).to(dtype)


def random_batch(name, B=4, L=7, seed=0, dtype=torch.float64, p_mask=0.25):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(B, L, generator=gen, dtype=dtype) * 1.5
    y = labels_for(name, (B, L), gen, dtype=dtype)
    m = torch.rand(B, L, generator=gen) > p_mask
    m[:, 0] = True
    w = torch.rand(B, L, generator=gen, dtype=dtype) + 0.5
    return s, y, m, w


def reference_values(name, hyper, s, y, m, w=None):
    f = getattr(ref, name)
    out = []
    for b in range(s.shape[0]):
        idx = [j for j in range(s.shape[1]) if bool(m[b, j])]
        sb = [float(s[b, j]) for j in idx]
        yb = [float(y[b, j]) for j in idx]
        wb = [1.0] * len(idx) if w is None else [float(w[b, j]) for j in idx]
        out.append(f(sb, yb, wb, **hyper))
    return torch.tensor(out, dtype=torch.float64)


def is_pair_based(name):
    """Losses that are 0 and left out of the mean on lists without an ordered pair (y_i > y_j)."""
    return "ordered_pair" in spec(name).valid_when


def needs_positive_gain(name):
    """Losses normalised by the ideal DCG: a list whose ideal DCG is 0 (no positive gain) has
    nothing to rank, gives 0 and is left out of the mean."""
    return "positive_gain" in spec(name).valid_when


def needs_two_items(name):
    return "two_items" in spec(name).valid_when


ALL = sorted(REGISTRY)


class _Specs(dict):
    """``SPECS[name]``: the registry's spec, looked up at call time."""

    def __getitem__(self, name):
        return spec(name)


SPECS = _Specs()
