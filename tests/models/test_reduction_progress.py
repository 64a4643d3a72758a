"""A progress bar while PairwiseReductionRanker builds its pairs (issue 16.11): on a terminal only,
and the pairs (hence the model) are exactly those built without it."""
from __future__ import annotations

import io

import numpy as np
import pytest

from rankwise.models import PairwiseReductionRanker
from rankwise.models.reduction import make_pairs
from rankwise.train.progress import pairs_with_progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _data(seed=0, n_queries=30):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 25, size=n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    X = rng.normal(size=(len(qid), 4))
    y = np.clip(np.round(X[:, 0] + rng.normal(scale=0.8, size=len(qid)) + 1), 0, 3)
    return X, y, qid


def test_bar_on_a_terminal_and_silent_otherwise(monkeypatch):
    X, y, qid = _data()
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    m = PairwiseReductionRanker(random_state=0).fit(X, y, qid=qid)
    shown = term.getvalue()
    assert "PairwiseReductionRanker" in shown and f"{m.n_pairs_:,} pairs built" in shown
    pipe = io.StringIO()  # not a terminal: nothing written
    monkeypatch.setattr("sys.stderr", pipe)
    PairwiseReductionRanker(random_state=0).fit(X, y, qid=qid)
    assert pipe.getvalue() == ""


@pytest.mark.parametrize("pairs", ["all", 5])
def test_blocks_give_the_same_pairs_as_one_call(pairs):
    X, y, qid = _data(1)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(qid))])
    want = make_pairs(y, offsets, pairs=pairs, random_state=11)
    got = pairs_with_progress(make_pairs, y, offsets, pairs=pairs, random_state=11, verbose=True,
                              block_pairs=50, desc="test")
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_model_is_the_same_with_and_without_the_bar(monkeypatch):
    X, y, qid = _data(2)
    quiet = PairwiseReductionRanker(pairs=7, random_state=3).fit(X, y, qid=qid)
    monkeypatch.setattr("sys.stderr", _Terminal())
    shown = PairwiseReductionRanker(pairs=7, random_state=3).fit(X, y, qid=qid)
    np.testing.assert_array_equal(quiet.estimator_.coef_, shown.estimator_.coef_)
    assert quiet.n_pairs_ == shown.n_pairs_


@pytest.mark.slow
def test_tqdm_disable_silences_it_on_a_terminal():
    """TQDM_DISABLE=1 (read by tqdm when it is imported) turns the bar and the closing line off."""
    import os
    import subprocess
    import sys

    code = ("import io, sys, numpy as np\n"
            "class T(io.StringIO):\n    def isatty(self): return True\n"
            "t = T(); sys.stderr = t\n"
            "from rankwise.models import PairwiseReductionRanker\n"
            "X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(float)\n"
            "PairwiseReductionRanker(random_state=0).fit(X, y, qid=np.repeat(np.arange(4), 10))\n"
            "sys.__stdout__.write(repr(t.getvalue()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TQDM_DISABLE": "1"}, check=True).stdout
    assert out == "''", out  # the same code without TQDM_DISABLE: test_bar_on_a_terminal_and_silent_otherwise


def test_verbose_forces_the_bar_on_or_off(monkeypatch):
    X, y, qid = _data(3)
    pipe = io.StringIO()  # not a terminal, but verbose=True asks for the bar
    monkeypatch.setattr("sys.stderr", pipe)
    m = PairwiseReductionRanker(random_state=0, verbose=True).fit(X, y, qid=qid)
    assert f"{m.n_pairs_:,} pairs built" in pipe.getvalue()
    term = _Terminal()  # a terminal, but verbose=False hides it
    monkeypatch.setattr("sys.stderr", term)
    PairwiseReductionRanker(random_state=0, verbose=False).fit(X, y, qid=qid)
    assert term.getvalue() == ""


def test_verbose_is_checked():
    X, y, qid = _data(4)
    with pytest.raises(ValueError, match="verbose"):
        PairwiseReductionRanker(verbose="yes").fit(X, y, qid=qid)
