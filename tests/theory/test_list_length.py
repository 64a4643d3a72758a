"""The list-length experiment's machinery (the full run lives in docs/, made by the function)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rankwise.errors import InputError
from rankwise.theory import run_list_length_experiment
from rankwise.theory.list_length import _ndcg10, _value_grad, make_synthetic_lists

from _ref import ref


def test_the_experiment_losses_are_the_paper_forms():
    """The registered losses the experiment trains equal C&T's ListNet and RankSVM (loops), value and gradient."""
    rng = np.random.default_rng(0)
    S = rng.normal(size=(4, 7))
    Y = rng.integers(0, 5, (4, 7)).astype(float)
    for loss, paper in (("listnet", ref.listnet_ct), ("ranksvm", ref.ranksvm_ct)):
        v, g = _value_grad(loss, S, Y)
        for q in range(len(S)):
            pv, pg = paper(list(S[q]), list(Y[q]))
            assert v[q] == pytest.approx(pv, rel=1e-12)
            np.testing.assert_allclose(g[q], pg, atol=1e-12)


def test_the_experiment_ndcg_is_ndcg_at_10():
    rng = np.random.default_rng(2)
    for m in (5, 30):
        S = rng.normal(size=(6, m))
        Y = rng.integers(0, 3, (6, m)).astype(float)
        Y[0] = 0.0  # no relevant item: counts 0
        want = np.mean([_ndcg_loop(S[q], Y[q]) for q in range(6)])
        assert _ndcg10(S, Y) == pytest.approx(want, abs=1e-12)


def _ndcg_loop(s, y, k=10):
    order = np.argsort(-s, kind="stable")
    dcg = sum((2.0 ** y[i] - 1.0) / np.log2(r + 2) for r, i in enumerate(order[:k]))
    ideal = sum((2.0 ** v - 1.0) / np.log2(r + 2) for r, v in enumerate(sorted(y, reverse=True)[:k]))
    return dcg / ideal if ideal > 0 else 0.0


def test_synthetic_lists_have_unit_rows_and_m_free_label_distribution():
    rng = np.random.default_rng(1)
    w = np.ones(5) / np.sqrt(5) * 3
    X, y = make_synthetic_lists(20, 50, 5, rng, w)
    np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0)
    X2, y2 = make_synthetic_lists(2, 500, 5, rng, w)
    assert abs((y == 0).mean() - (y2 == 0).mean()) < 0.08
    assert set(np.unique(y)) <= {0.0, 1.0, 2.0, 3.0, 4.0}


def test_small_run_produces_rows_table_and_plot(tmp_path):
    res = run_list_length_experiment((5, 20), n_train=8, n_test=8, n_features=4, n_repeats=1, maxiter=20)
    assert [(r["loss"], r["m"]) for r in res.rows] == [("listnet", 5), ("ranksvm", 5), ("listnet", 20), ("ranksvm", 20)]
    for r in res.rows:
        assert np.isfinite([r["train_loss"], r["test_loss"], r["thm6"], r["older"]]).all()
        assert r["older"] == pytest.approx(r["G_2"] * r["W"] * np.sqrt(r["m"] / 8))
    assert res.rows[1]["G_inf"] == 12.0 and res.rows[3]["G_inf"] == 200.0
    md = res.to_markdown()
    assert md.count("\n") == 5 and "| listnet | 20 |" in md and "%" in md
    res.plot(tmp_path / "ll.png")
    assert (tmp_path / "ll.png").stat().st_size > 10_000
    paths = res.save(tmp_path / "out")
    assert paths["png"].exists() and "| ranksvm | 20 |" in paths["md"].read_text()
    assert "List-length experiment" in str(res)


def test_bad_arguments():
    with pytest.raises(InputError, match="list_lengths"):
        run_list_length_experiment((1,))
    with pytest.raises(InputError, match="unknown losses"):
        run_list_length_experiment((5,), losses=("listmle",))


def test_default_repeats_is_three_and_quick_keeps_an_explicit_value():
    """docs/theory.md reports 3 data draws per m: the default must match (it was 2)."""
    tiny = dict(n_train=4, n_test=4, n_features=3, maxiter=5)
    assert run_list_length_experiment((5,), **tiny).settings["n_repeats"] == 3
    assert run_list_length_experiment((5,), quick=True, **tiny).settings["n_repeats"] == 1
    assert run_list_length_experiment((5,), quick=True, n_repeats=2, **tiny).settings["n_repeats"] == 2


def test_table_survives_a_zero_train_loss():
    """gap / train loss is 'n/a' when the train loss is 0 (was a ZeroDivisionError)."""
    from rankwise.theory.list_length import ListLengthResult

    row = {"loss": "ranksvm", "m": 5, "train_loss": 0.0, "test_loss": 0.5, "gap": 0.5, "ndcg_train": 1.0,
           "ndcg_test": 0.9, "W": 2.0, "G_inf": 12.0, "thm6": 3.0, "older": 1.0}
    md = ListLengthResult([row]).to_markdown()
    assert "n/a (train loss 0)" in md and "0.167" in md


@pytest.mark.parametrize("kwargs,match", [
    ({"n_repeats": 0}, "n_repeats must be a positive integer"),
    ({"n_repeats": 1.5}, "n_repeats must be a positive integer"),
    ({"lam": float("nan")}, "lam must be a finite number ≥ 0; got nan"),
    ({"maxiter": 0}, "maxiter must be a positive integer"),
])
def test_bad_settings(kwargs, match):
    with pytest.raises(InputError, match=match):
        run_list_length_experiment((5,), **kwargs)
