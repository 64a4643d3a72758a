"""Optimisers shared by the models.

- :class:`AveragedOGD`: projected online gradient descent with step ``eta / sqrt(t)`` and the
  online-to-batch average of the iterates (Chaudhuri & Tewari 2015, Thm 5).
- :func:`minimize_erm`: regularised empirical risk minimisation by L-BFGS, with an ℓ1 term
  handled exactly through the split ``w = u - v``, ``u, v >= 0`` (L-BFGS-B with bounds).
- minibatch Adam over queries is ``torch.optim.Adam`` driven by :func:`rankwise.train.loop.run_epochs`.
"""
from __future__ import annotations

import math

import numpy as np


def _torch():
    import torch

    return torch


def make_averaged_ogd(params, *, lr: float, radius: float | None = None):
    """Projected OGD with iterate averaging (a ``torch.optim.Optimizer``).

    .. math::

        w_{t+1} = \\Pi_{\\|w\\|_2 \\le W}\\bigl(w_t - \\tfrac{\\eta}{\\sqrt t} \\nabla \\ell_t(w_t)\\bigr),
        \\qquad \\bar w_T = \\frac1T \\sum_{t=1}^T w_t

    On i.i.d. queries and a convex loss that is :math:`G`-Lipschitz, the averaged iterate has
    excess risk :math:`O(W G / \\sqrt T)` (online-to-batch conversion). ``radius`` is
    :math:`W` (None: no projection). ``swap_average()`` exchanges the current and the averaged
    parameters (call it before predicting and again to continue training).

    References
    ----------
    S. Chaudhuri and A. Tewari. Generalization error bounds for learning to rank: does the length
    of document lists matter? ICML 2015, Theorem 5.
    """
    torch = _torch()

    class AveragedOGD(torch.optim.Optimizer):
        def __init__(self, params, lr, radius):
            super().__init__(params, {"lr": lr, "radius": radius})

        @torch.no_grad()
        def step(self, closure=None):
            loss = None if closure is None else closure()
            for group in self.param_groups:
                params = [p for p in group["params"]]
                st0 = self.state[params[0]]
                t = int(st0.get("t", 0)) + 1
                eta = group["lr"] / math.sqrt(t)
                for p in params:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-eta)
                if group["radius"] is not None:
                    norm = torch.sqrt(sum((p * p).sum() for p in params))
                    if norm > group["radius"]:
                        for p in params:
                            p.mul_(group["radius"] / norm)
                for p in params:
                    st = self.state[p]
                    if "avg" not in st:
                        st["avg"] = p.detach().clone()
                    else:  # running mean of w_1..w_t
                        st["avg"].add_(p - st["avg"], alpha=1.0 / t)
                    st["t"] = t
            return loss

        @torch.no_grad()
        def swap_average(self):
            for group in self.param_groups:
                for p in group["params"]:
                    st = self.state[p]
                    if "avg" in st:
                        tmp = p.detach().clone()
                        p.copy_(st["avg"])
                        st["avg"].copy_(tmp)

    return AveragedOGD(params, lr, radius)


def minimize_erm(fun_grad, x0: np.ndarray, *, l1: float = 0.0, l1_mask: np.ndarray | None = None,
                 max_iter: int = 200, tol: float = 1e-6, callback=None):
    """Minimise ``f(w) + l1 * ||w[l1_mask]||_1`` with L-BFGS(-B); ``fun_grad(w) -> (f, grad)``.

    ``f`` already holds the smooth part (risk + ℓ2). For ``l1 > 0`` the problem is solved exactly
    as the smooth bound-constrained problem over ``w = u - v`` with ``u, v >= 0`` (the ℓ1 term
    becomes the linear ``l1 * sum(u + v)``), so coefficients reach exact zeros.
    ``callback(w, f)`` is called after each iteration with the iterate and the objective value of
    the optimiser's last evaluation there (ℓ1 term included; no extra evaluation); it may raise
    StopIteration (then ``res.status == 99``). Returns ``(w, scipy OptimizeResult)``;
    ``res.status == 1`` means ``max_iter`` was reached before convergence.
    """
    from scipy.optimize import minimize

    x0 = np.asarray(x0, dtype=np.float64)
    d = len(x0)
    opts = {"maxiter": int(max_iter), "gtol": tol, "ftol": tol * 1e-3}
    if l1 <= 0:
        def cb(intermediate_result):  # this parameter name selects scipy's OptimizeResult callback
            callback(intermediate_result.x, float(intermediate_result.fun))
        res = minimize(fun_grad, x0, jac=True, method="L-BFGS-B", options=opts,
                       callback=None if callback is None else cb)
        return res.x, res
    mask = np.ones(d, dtype=bool) if l1_mask is None else np.asarray(l1_mask, dtype=bool)
    pen = np.where(mask, l1, 0.0)

    def split_fg(z):
        w = z[:d] - z[d:]
        f, g = fun_grad(w)
        return f + float(pen @ (z[:d] + z[d:])), np.concatenate((g + pen, -g + pen))

    z0 = np.concatenate((np.maximum(x0, 0), np.maximum(-x0, 0)))
    bounds = [(0, None) if m else (None, None) for m in mask] * 2
    # unpenalised coordinates (the intercept) stay free in u; pin their v copy at 0
    bounds = bounds[:d] + [(0, None) if m else (0, 0) for m in mask]
    def split_cb(intermediate_result):
        z = intermediate_result.x
        callback(z[:d] - z[d:], float(intermediate_result.fun))
    res = minimize(split_fg, z0, jac=True, method="L-BFGS-B", bounds=bounds, options=opts,
                   callback=None if callback is None else split_cb)
    return res.x[:d] - res.x[d:], res
