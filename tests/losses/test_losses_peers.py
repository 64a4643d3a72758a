"""Losses against peer implementations: scikit-learn metrics and torch's own losses."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import hinge_loss, log_loss, ndcg_score

from rankwise.losses import get


def _lists(seed, B=5, L=9, hi=3):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(B, L, generator=gen, dtype=torch.float64) * 2
    y = torch.randint(0, hi + 1, (B, L), generator=gen).to(torch.float64)
    y[:, 0] = hi  # every list has a relevant item
    return s, y


def _pair_diffs(s, y):
    d = [float(s[i] - s[j]) for i in range(len(s)) for j in range(len(s)) if y[i] > y[j]]
    return np.asarray(d)


def test_sigmoid_ce_equals_sklearn_log_loss_and_torch_bce():
    s, y = _lists(0, hi=1)
    ours = get("sigmoid_ce")(s, y, reduction="none")
    for b in range(len(s)):
        p = torch.sigmoid(s[b]).numpy()
        want = log_loss(y[b].numpy(), p, normalize=False, labels=[0, 1])
        np.testing.assert_allclose(ours[b].item(), want, rtol=1e-10)
    torch.testing.assert_close(ours, F.binary_cross_entropy_with_logits(s, y, reduction="none").sum(-1))


def test_listnet_equals_torch_soft_label_cross_entropy():
    s, y = _lists(1)
    for tau in (1.0, 0.3):
        ours = get("listnet")(s, y, temperature=tau, reduction="none")
        want = F.cross_entropy(s / tau, torch.softmax(y, -1), reduction="none")
        torch.testing.assert_close(ours, want)


def test_pairwise_hinge_and_ranknet_equal_sklearn_losses_on_pair_differences():
    s, y = _lists(2)
    hinge = get("pairwise_hinge")(s, y, reduction="none")
    rn = get("ranknet")(s, y, sigma=1.5, reduction="none")
    for b in range(len(s)):
        d = _pair_diffs(s[b], y[b])
        ones = np.ones_like(d)
        # sklearn's hinge_loss averages max(0, 1 - t*d) and needs both classes: each pair once as
        # (t=+1, d) and once mirrored as (t=-1, -d), which has the same hinge; ours sums over pairs
        mean = hinge_loss(np.r_[ones, -ones], np.r_[d, -d])
        np.testing.assert_allclose(hinge[b].item(), len(d) * mean, rtol=1e-10)
        p = 1 / (1 + np.exp(-1.5 * d))
        np.testing.assert_allclose(rn[b].item(), log_loss(ones, p, normalize=False, labels=[0, 1]), rtol=1e-8)


def test_approx_ndcg_and_smooth_dcg_tend_to_sklearn_ndcg():
    s, y = _lists(3)
    # distinct, well separated scores so the smooth approximations are tight
    s = torch.argsort(torch.argsort(s, -1), -1).to(torch.float64) + 0.1 * torch.rand(s.shape, dtype=torch.float64)
    approx = get("approx_ndcg")(s, y, alpha=200.0, gain="linear", reduction="none")
    sdcg = get("smooth_dcg")(s, y, k=5, sigma=1e-3, gain="linear", reduction="none")
    for b in range(len(s)):
        yt, sc = y[b:b + 1].numpy(), s[b:b + 1].numpy()
        np.testing.assert_allclose(-approx[b].item(), ndcg_score(yt, sc), rtol=1e-6)
        np.testing.assert_allclose(-sdcg[b].item(), ndcg_score(yt, sc, k=5), rtol=1e-6)
