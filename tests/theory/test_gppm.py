"""GPPM (u, φ) forms against the measures' direct definitions, ties, and peer tools."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.theory import gppm
from rankwise.theory.gppm import get_measure

from _ref import ref

RNG = np.random.default_rng(7)


def _direct(name):
    return {
        "dcg": lambda y, p: ref.dcg(y, p),
        "dcg@2": lambda y, p: ref.dcg(y, p, 2),
        "ndcg": lambda y, p: ref.ndcg(y, p),
        "ndcg@3": lambda y, p: ref.ndcg(y, p, 3),
        "ndcg@2": lambda y, p: ref.ndcg(y, p, 2),
        "p@2": lambda y, p: ref.precision(y, p, 2),
        "r@3": lambda y, p: ref.recall(y, p, 3),
        "auc": ref.auc,
        "err": ref.err,
        "ap": ref.average_precision,
    }[name]


@pytest.mark.parametrize("name", ["dcg", "dcg@2", "ndcg", "ndcg@3", "p@2", "r@3", "auc", "err", "ap"])
def test_value_matches_definition_on_every_permutation(name):
    m = get_measure(name)
    binary = name in ("p@2", "r@3", "auc", "err", "ap")
    for _ in range(6):
        y = RNG.integers(0, 2 if binary else 3, 5).astype(float)
        for sigma in itertools.permutations(range(5)):
            assert m.value(y, sigma) == pytest.approx(_direct(name)(y, sigma), abs=1e-12)


def test_spearman_gppm_matches_definition_and_scipy():
    from scipy.stats import spearmanr

    m = gppm.spearman()
    for _ in range(5):
        true_ranks = RNG.permutation(5) + 1.0
        for sigma in itertools.permutations(range(5)):
            v = m.value(true_ranks, sigma)
            assert v == pytest.approx(ref.spearman(true_ranks, sigma), abs=1e-12)
            pred_rank = np.empty(5)
            pred_rank[list(sigma)] = np.arange(1, 6)
            assert v == pytest.approx(spearmanr(pred_rank, true_ranks).statistic, abs=1e-12)


def test_gppm_conditions_hold():
    for name in ["dcg", "ndcg@3", "p@2", "r@2", "auc", "spearman"]:
        m = get_measure(name)
        phi = m.discount(6)
        assert phi[0] > 0 and np.all(np.diff(phi) <= 0) and np.all(phi >= 0)
        y = (RNG.permutation(6) + 1.0) if name == "spearman" else RNG.integers(0, 2, 6).astype(float)
        assert np.all(m.utility(y) >= 0)


@pytest.mark.parametrize("name", ["dcg", "ndcg@2", "p@2", "auc", "err", "ap"])
def test_scores_with_ties_are_the_average_over_tie_breaks(name):
    m = get_measure(name)
    binary = name in ("p@2", "auc", "err", "ap")
    for _ in range(20):
        y = RNG.integers(0, 2 if binary else 3, 5).astype(float)
        s = RNG.integers(0, 3, 5).astype(float)  # many ties
        assert m.score(y, s) == pytest.approx(ref.scoring_value(_direct(name), y, s), abs=1e-12)


def test_constant_scorer_is_not_perfect_on_sorted_labels():
    y = np.array([2.0, 1.0, 0.0, 0.0])
    nd = get_measure("ndcg")
    assert nd.score(y, np.zeros(4)) < 1.0 - 1e-3
    assert nd.score(y, -np.arange(4.0)) == pytest.approx(1.0)


def test_ndcg_with_ties_matches_sklearn():
    from sklearn.metrics import ndcg_score

    m = gppm.ndcg(3, gain="linear")
    for _ in range(30):
        y = RNG.integers(0, 4, 6).astype(float)
        if y.max() == 0:
            continue
        s = RNG.integers(0, 3, 6).astype(float)
        assert m.score(y, s) == pytest.approx(ndcg_score([y], [s], k=3, ignore_ties=False), abs=1e-12)


def _metrics_or_fail():
    try:
        import rankwise.metrics as M
    except ImportError as exc:  # the metrics module is a dependency of this cross-check
        pytest.fail(f"rankwise.metrics is not importable: {exc}")
    return M


@pytest.mark.parametrize("name", ["dcg", "ndcg", "err", "ap", "p@2"])
def test_cross_check_with_rankwise_metrics_ties_average(name):
    """The theory side (GPPM / definitions) and rankwise.metrics (ties='average') agree."""
    M = _metrics_or_fail()
    binary = name in ("err", "ap", "p@2")
    n, L = 6, 5
    Y = RNG.integers(0, 2 if binary else 3, (L, n)).astype(float)
    Y[:, 0] = 1.0  # at least one relevant item per list
    S = RNG.integers(0, 3, (L, n)).astype(float)
    theory = np.array([get_measure(name).score(y, s) for y, s in zip(Y, S)])
    if name == "dcg":
        got = M.dcg(S, Y, ties="average", reduction="none")
    elif name == "ndcg":
        got = M.ndcg(S, Y, ties="average", reduction="none")
    elif name == "err":
        got = M.err(S, Y, ties="average", reduction="none", max_grade=1)
    elif name == "ap":
        got = M.average_precision(S, Y, ties="average", reduction="none")
    else:
        got = M.precision(S, Y, k=2, ties="average", reduction="none")
    np.testing.assert_allclose(np.asarray(got, dtype=float), theory, atol=1e-10)


def test_bad_names_and_inputs_raise_clear_errors():
    with pytest.raises(InputError, match="unknown metric 'bleu'"):
        get_measure("bleu")
    with pytest.raises(InputError, match="needs a cutoff"):
        get_measure("p")
    with pytest.raises(InputError, match=r"cutoff in 'ndcg@0' must be an integer >= 1"):
        get_measure("ndcg@0")
    with pytest.raises(InputError, match="sigma must be a permutation"):
        get_measure("dcg").value([1, 0, 2], [0, 0, 1])
    with pytest.raises(InputError, match="s must have shape"):
        get_measure("dcg").score([1, 0, 2], [0.1, 0.2])
    with pytest.raises(InputError, match="NaN"):
        get_measure("dcg").score([1, 0, np.nan], [0.1, 0.2, 0.3])
