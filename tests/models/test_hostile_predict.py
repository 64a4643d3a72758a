"""Predictions never overflow into inf/NaN (issue 17 fuzz findings): linear models score in float64,
torch models refuse features whose standardized value does not fit float32, naming row and column."""
import numpy as np
import pytest
import scipy.sparse as sp

from rankwise.errors import InputError
from rankwise.models import LinearRanker, NeuralRanker
from rankwise.models._torch import Standardizer

X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [0.5, 3.0]])
Y = np.array([0.0, 1.0, 2.0, 1.0])
QID = np.array([0, 0, 1, 1])


@pytest.fixture(scope="module")
def linear():
    with pytest.warns(Warning):  # max_iter=3 does not converge
        return LinearRanker("listnet", max_iter=3, random_state=0).fit(X, Y, qid=QID)


def test_linear_predict_float32_max_is_finite_and_exact(linear):
    Xt = np.array([[3.4e38, 3.4e38], [-3.4e38, 1.0]], dtype=np.float32)
    s = linear.predict(Xt)
    assert np.all(np.isfinite(s))
    # the same score computed by hand in float64: <w, (x - mean) / scale> + b
    z = (Xt.astype(np.float64) - linear.scaler_mean_) / linear.scaler_scale_
    np.testing.assert_allclose(s, z @ linear.coef_ + linear.intercept_, rtol=1e-12)
    # ordinary rows score as before (float32 training path unchanged)
    np.testing.assert_allclose(linear.predict(X), (((X - linear.scaler_mean_) / linear.scaler_scale_)
                                                  @ linear.coef_ + linear.intercept_), rtol=1e-5)


def test_linear_predict_overflow_is_a_clear_error(linear):
    huge = LinearRanker("listnet", max_iter=3, random_state=0)
    huge.__dict__.update({k: v for k, v in linear.__dict__.items() if k.endswith("_")})
    huge.coef_ = np.array([1e300, 1e300])
    with pytest.raises(InputError, match="X row 0: the score .* overflows float64"):
        huge.predict(np.array([[3.4e38, 3.4e38]], dtype=np.float32))


def test_neural_refuses_standardized_overflow():
    Xn = np.array([[0.0, 0.5], [1e-30, 1.0], [1e30, 1.0], [1e-30, 1.0]])
    m = NeuralRanker("listnet", hidden=(4,), epochs=1, random_state=0).fit(Xn, np.array([1.0, 0, 4, 0]),
                                                                          qid=np.array([0, 1, 2, 2]))
    with pytest.raises(InputError, match=r"X at row 0, column 1: the standardized feature value .* float32"):
        m.predict(np.array([[0.0, 3.4e38], [1e-30, -1e30]]))
    assert np.all(np.isfinite(m.predict(Xn)))


def test_standardizer_sparse_and_float64():
    st = Standardizer(np.zeros(2), np.array([1e-12, 1.0]))
    with pytest.raises(InputError, match="stored entry 0"):
        st.transform(sp.csr_matrix(np.array([[3e38, 1.0]], dtype=np.float32)))
    z = st.transform(np.array([[3e38, 1.0]]), np.float64)
    assert z.dtype == np.float64 and np.isfinite(z).all()


@pytest.mark.parametrize("make", [np.asarray, sp.csr_matrix])
def test_finite_features_beyond_float32_are_named_as_such(linear, make):
    """A finite 1e308 used to be reported as "X contains inf values" (the float32 cast came first)."""
    with pytest.raises(InputError, match=r"X has 1 finite value\(s\) beyond float32's range"):
        linear.predict(make(np.array([[1e308, 1.0]])))
    with pytest.raises(InputError, match=r"X contains inf values"):
        linear.predict(make(np.array([[np.inf, 1.0]])))
