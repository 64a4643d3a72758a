"""Complexity terms of Chaudhuri & Tewari (2015) Theorems 5, 6, 9 and the older bound."""
from __future__ import annotations

import gzip
import math

import numpy as np
import pytest
import scipy.sparse as sp

from rankwise.errors import InputError
from rankwise.theory import dudley_complexity, generalization_bound, row_norm_bound


def test_terms_by_hand():
    t = generalization_bound(n_queries=400, G_inf=2.0, W=3.0, R=0.5, G_2=math.sqrt(2), list_length=100, delta=0.1)
    GRW = 2.0 * 3.0 * 0.5
    assert t.rerm == pytest.approx(math.sqrt(8) * GRW / 20.0)
    # Theorem 5 is in expectation (online-to-batch of the OGD regret W·G∞R·√n)
    assert t.ogd == pytest.approx(GRW / 20.0)
    # the high-probability (Azuma-Hoeffding) variant is reported under its own name
    assert t.ogd_high_probability == pytest.approx(GRW / 20.0 * (1 + 2 * math.sqrt(2 * math.log(10))))
    text = str(t)
    assert "Theorem 5 (OGD, convex, expectation)" in text and "Azuma-Hoeffding (convex, w.p. 1-δ)" in text
    assert "Theorem 5 (OGD, convex, w.p." not in text
    assert t.chapelle_wu == pytest.approx(math.sqrt(2) * 0.5 * 3.0 * math.sqrt(100 / 400))
    assert t.erm is None  # needs B


def test_only_the_older_term_grows_like_sqrt_m():
    terms = [generalization_bound(n_queries=10_000, G_inf=2.0, G_2=math.sqrt(2), W=1.0, R=1.0,
                                  list_length=m, B=5.0) for m in (10, 1000)]
    assert terms[1].chapelle_wu / terms[0].chapelle_wu == pytest.approx(10.0)
    assert terms[1].rerm == terms[0].rerm and terms[1].ogd == terms[0].ogd
    assert terms[1].ogd_high_probability == terms[0].ogd_high_probability
    # Theorem 9 depends on m only through log(nm)
    assert 1.0 < terms[1].erm / terms[0].erm < 1.3


def test_dudley_decreases_with_n_and_grows_with_lipschitz():
    a = dudley_complexity(2.0, 1.0, 1.0, 1000, 10, 5.0)
    b = dudley_complexity(2.0, 1.0, 1.0, 100_000, 10, 5.0)
    c = dudley_complexity(4.0, 1.0, 1.0, 100_000, 10, 5.0)
    assert b < a and c > b


def test_row_norm_bound_dense_and_sparse():
    X = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, -6.0]])
    assert row_norm_bound(X) == 6.0
    assert row_norm_bound(sp.csr_matrix(X)) == 6.0
    t = generalization_bound(n_queries=4, G_inf=1.0, W=1.0, X=X)
    assert t.R == 6.0


@pytest.mark.realdata
def test_terms_on_mq2008(mq2008_dir):
    """R from the real MQ2008 Fold1 training rows; n = its number of queries."""
    from sklearn.datasets import load_svmlight_file

    with gzip.open(mq2008_dir / "Fold1" / "train.txt.gz", "rb") as fh:
        X, y, qid = load_svmlight_file(fh, query_id=True)
    n = len(np.unique(qid))
    m = int(np.max(np.unique(qid, return_counts=True)[1]))
    R = row_norm_bound(X)
    assert 0 < R < math.sqrt(X.shape[1]) + 1e-9  # LETOR features are scaled to [0, 1]
    t = generalization_bound(n_queries=n, G_inf=2.0, G_2=math.sqrt(2), W=1.0, X=X, list_length=m, B=10.0)
    assert t.R == pytest.approx(R)
    assert t.chapelle_wu > t.rerm / math.sqrt(8) * math.sqrt(m) / 2 * 0.99  # √m factor appears
    assert "Theorem 6" in str(t)


def test_bad_input():
    with pytest.raises(InputError, match="n_queries must be a positive integer"):
        generalization_bound(n_queries=0, G_inf=1.0, W=1.0, R=1.0)
    with pytest.raises(InputError, match="give R"):
        generalization_bound(n_queries=3, G_inf=1.0, W=1.0)
    with pytest.raises(InputError, match="G_inf must be a positive finite"):
        generalization_bound(n_queries=3, G_inf=float("nan"), W=1.0, R=1.0)
    with pytest.raises(InputError, match="delta"):
        generalization_bound(n_queries=3, G_inf=1.0, W=1.0, R=1.0, delta=1.5)


NAN = float("nan")


@pytest.mark.parametrize("kwargs,match", [
    ({"G_2": NAN}, "G_2 must be a positive finite number or None; got nan"),
    ({"G_2": -1.0}, "G_2 must be a positive finite number or None; got -1.0"),
    ({"G_2": float("inf")}, "G_2 must be a positive finite number or None; got inf"),
    ({"G_2": "2"}, "G_2 must be a positive finite number or None; got '2'"),
    ({"B": NAN}, "B must be a positive finite number or None; got nan"),
    ({"B": 0.0}, "B must be a positive finite number or None; got 0.0"),
    ({"B": True}, "B must be a positive finite number or None; got True"),
    ({"list_length": 0}, "list_length must be a positive integer; got 0"),
    ({"list_length": 2.5}, "list_length must be a positive integer; got 2.5"),
    ({"list_length": NAN}, "list_length must be a positive integer; got nan"),
    ({"list_length": -3}, "list_length must be a positive integer; got -3"),
    ({"delta": NAN}, r"delta must be a number in \(0, 1\); got nan"),
    ({"delta": "0.1"}, r"delta must be a number in \(0, 1\); got '0.1'"),
    ({"W": NAN}, "W must be a positive finite number; got nan"),
])
def test_invalid_constants_raise_input_error_never_nan(kwargs, match):
    """Before the fix G_2, B and list_length went unchecked: NaN terms or raw errors came out."""
    base = dict(n_queries=10, G_inf=1.0, W=1.0, R=1.0, list_length=5, G_2=1.0, B=2.0)
    base.update(kwargs)
    with pytest.raises(InputError, match=match):
        generalization_bound(**base)


def test_valid_terms_are_finite():
    t = generalization_bound(n_queries=10, G_inf=np.float64(1.0), W=1, R=1.0, list_length=np.int64(5),
                             G_2=np.float32(1.5), B=2)
    assert np.isfinite([t.ogd, t.ogd_high_probability, t.rerm, t.erm, t.chapelle_wu]).all()
