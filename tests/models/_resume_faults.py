"""Kill-and-resume harness shared by ``tests/models/test_resume_faults.py`` and ``benchmarks/faults_resume.py``.

A trainer is fitted uninterrupted; then the same fit, writing checkpoints, is killed at a chosen
point and resumed from the latest complete checkpoint (``fit(..., resume=ck, checkpoint=ck)``),
possibly killed again and resumed again. The resumed model's scores must equal the uninterrupted
model's. Two ways to kill:

- *simulated*: the ``k``-th successful checkpoint write raises :class:`Killed` (a BaseException,
  so nothing in rankwise catches it): the process stops exactly after a complete checkpoint;
- *SIGKILL*: a child process fits with checkpoints and is killed by the operating system at a
  random moment (mid-iteration, mid-write, after the end); the parent resumes from what is on disk
  (a fresh fit where no checkpoint was written yet).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from _model_data import make_data

HERE = Path(__file__).resolve().parent


def _linear(**kw):
    from rankwise.models import LinearRanker

    return LinearRanker, dict(loss="listnet", verbose=False, random_state=3, **kw)


def _neural(**kw):
    from rankwise.models import NeuralRanker

    return NeuralRanker, dict(loss="listnet", hidden=(8,), max_iter=6, batch_queries=5, learning_rate=0.01,
                              verbose=False, random_state=3, **kw)


def _gbdt(backend, subsample=1.0, colsample_bytree=1.0, loss="lambdarank", backend_params=None):
    def make(**kw):
        from rankwise.models import GBDTRanker

        return GBDTRanker, dict(loss=loss, backend=backend, n_estimators=12, num_leaves=7,
                                min_child_samples=5, subsample=subsample, colsample_bytree=colsample_bytree,
                                backend_params=backend_params, verbose=False, random_state=3, **kw)
    return make


#: name -> (factory of (class, parameters), extra fit keywords); the fit with checkpoints writes one
#: after every iteration, epoch or round
TRAINERS = {
    "linear lbfgs (listnet)": (lambda **kw: _linear(solver="lbfgs", alpha=1e-3, max_iter=40, tol=1e-12, **kw), {}),
    "linear lbfgs + l1 (bounded)": (lambda **kw: _linear(solver="lbfgs", alpha=1e-3, l1=2e-3, max_iter=40,
                                                        tol=1e-12, **kw), {}),
    "linear lbfgs + early stopping": (lambda **kw: _linear(solver="lbfgs", alpha=1e-3, max_iter=40, tol=1e-12,
                                                          early_stopping_rounds=3, **kw), {"eval": True}),
    "linear adam": (lambda **kw: _linear(solver="adam", max_iter=12, learning_rate=0.05, **kw), {}),
    "linear ogd": (lambda **kw: _linear(solver="ogd", max_iter=5, learning_rate=0.1, **kw), {}),
    "neural (mlp, adam)": (_neural, {}),
    "gbdt lightgbm": (_gbdt("lightgbm"), {"checkpoint_every": 1}),
    "gbdt xgboost": (_gbdt("xgboost"), {"checkpoint_every": 1}),
}
#: row subsampling (bagging): rankwise draws each round's rows from (seed, round) alone, and reseeds
#: LightGBM's column sampler from (seed, round) every round and pins XGBoost's columns to a subset drawn
#: from (seed, round), so these resumes equal the uninterrupted fit
#: too (the backends' own samplers restarted with the resumed booster)
SUBSAMPLED = {
    "gbdt lightgbm, subsample=0.8": (_gbdt("lightgbm", 0.8), {"checkpoint_every": 1}),
    "gbdt xgboost, subsample=0.8": (_gbdt("xgboost", 0.8), {"checkpoint_every": 1}),
    "gbdt lightgbm, subsample=0.8, colsample_bytree=0.5": (_gbdt("lightgbm", 0.8, 0.5), {"checkpoint_every": 1}),
    "gbdt xgboost, subsample=0.8, colsample_bytree=0.5": (_gbdt("xgboost", 0.8, 0.5), {"checkpoint_every": 1}),
}
#: the libraries' own random draws, reseeded from (seed, round) every round: LightGBM's bagging (by row, by
#: query, every k rounds), column sampling by tree and by node, rank_xendcg's per-query draws and
#: extra_trees; XGBoost's row and column sampling (by tree, level, node) -- under native objectives and as
#: backend_params. "large": 1500 rows, two of LightGBM's bagging blocks of 1024 rows (one generator each)
LIBRARY_SAMPLED = {
    "gbdt lightgbm native:lambdarank, subsample=0.8, colsample_bytree=0.5":
        (_gbdt("lightgbm", 0.8, 0.5, "native:lambdarank"), {"checkpoint_every": 1, "data": "large"}),
    "gbdt lightgbm native:rank_xendcg": (_gbdt("lightgbm", loss="native:rank_xendcg"), {"checkpoint_every": 1}),
    "gbdt lightgbm native:rank_xendcg, bagging by query every 3 rounds, by-node columns": (
        _gbdt("lightgbm", loss="native:rank_xendcg", backend_params={
            "bagging_fraction": 0.6, "bagging_freq": 3, "bagging_by_query": True, "colsample_bynode": 0.6}),
        {"checkpoint_every": 1, "data": "large"}),
    "gbdt lightgbm, backend_params bagging every 2 rounds, feature_fraction, extra_trees": (
        _gbdt("lightgbm", backend_params={"bagging_fraction": 0.7, "bagging_freq": 2, "feature_fraction": 0.6,
                                          "extra_trees": True}), {"checkpoint_every": 1, "data": "large"}),
    "gbdt xgboost native:rank:ndcg, subsample=0.8, colsample_bytree=0.5":
        (_gbdt("xgboost", 0.8, 0.5, "native:rank:ndcg"), {"checkpoint_every": 1}),
    "gbdt xgboost native:rank:pairwise, backend_params subsample, colsample_bylevel, colsample_bynode": (
        _gbdt("xgboost", loss="native:rank:pairwise", backend_params={
            "subsample": 0.7, "colsample_bylevel": 0.7, "colsample_bynode": 0.6}), {"checkpoint_every": 1}),
    "gbdt xgboost, backend_params subsample, colsample_bytree": (
        _gbdt("xgboost", backend_params={"subsample": 0.7, "colsample_bytree": 0.6}), {"checkpoint_every": 1}),
}
TRAINERS.update(SUBSAMPLED)
TRAINERS.update(LIBRARY_SAMPLED)
ALL = TRAINERS


def data(large: bool = False):
    if large:
        return make_data(n_queries=150, list_len=10, n_features=6, seed=11), None
    X, y, qid = make_data(n_queries=20, list_len=8, n_features=6, seed=11)
    Xv, yv, qv = make_data(n_queries=10, list_len=8, n_features=6, seed=12)
    return (X, y, qid), (Xv, yv, qv)


class Killed(BaseException):
    """The simulated death of the process right after a complete checkpoint write."""


@contextlib.contextmanager
def kill_after_writes(k: int, copies: list | None = None):
    """Within the block the ``k``-th checkpoint write (counted from 1) completes, then :class:`Killed` is raised;
    ``copies`` (a list) receives the bytes of the checkpoint file after every write."""
    from rankwise.models import persistence

    real = persistence.save_checkpoint
    count = [0]

    def writing(*args, **kwargs):
        out = real(*args, **kwargs)
        count[0] += 1
        if copies is not None:
            copies.append(Path(out).read_bytes())
        if count[0] == k:
            raise Killed(k)
        return out
    persistence.save_checkpoint = writing
    try:
        yield count
    finally:
        persistence.save_checkpoint = real


def _fit(name, n_jobs, **fit_kw):
    factory, extra = ALL[name]
    cls, params = factory(n_jobs=n_jobs)
    (X, y, qid), val = data(extra.get("data") == "large")
    kw = {k: v for k, v in extra.items() if k not in ("eval", "data")}
    if extra.get("eval"):
        kw["eval_set"] = val
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ConvergenceWarning)  # a short fit stopped at max_iter on purpose
        model = cls(**params).fit(X, y, qid=qid, **kw, **fit_kw)
    return model.predict(X)


def uninterrupted(name: str, n_jobs: int = 1) -> tuple[np.ndarray, int]:
    """Scores of the uninterrupted fit (no checkpoint) and the number of checkpoint writes a checkpointed fit makes."""
    scores, copies, _ = checkpointed(name, n_jobs)
    return scores, len(copies)


def checkpointed(name: str, n_jobs: int = 1) -> tuple[np.ndarray, list[bytes], list[str]]:
    """Scores of the uninterrupted fit (no checkpoint); the bytes of every checkpoint an uninterrupted fit with
    checkpoints writes, in order; the warnings that fit gave (a ConvergenceWarning is ignored, as in every fit here).

    Copy ``k`` (from 1) is what a fit killed right after its ``k``-th write leaves on disk: the same call, killed
    after that write returns (:func:`kill_after_writes`); :func:`killed_and_resumed`'s ``left`` shows it. Only the
    final write of an L-BFGS fit differs, in the ``fit_time_`` it records (a clock reading)."""
    import tempfile

    scores = _fit(name, n_jobs)
    copies: list[bytes] = []
    with tempfile.TemporaryDirectory() as tmp, kill_after_writes(0, copies), \
            warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with_ck = _fit(name, n_jobs, checkpoint=Path(tmp) / "ck.npz")
    if not np.array_equal(with_ck, scores):
        raise AssertionError(f"{name}: writing checkpoints changed the fitted model")
    return scores, copies, [f"{w.category.__name__}: {w.message}" for w in warned]


def killed_and_resumed(name: str, kills: list[int], ck: Path, n_jobs: int = 1, left: list | None = None) -> np.ndarray:
    """Scores after killing the fit after ``kills[0]`` checkpoint writes, the resumed fit after ``kills[1]``
    more, ..., and resuming the last time to the end; ``left`` (a list) receives the bytes on disk after each kill."""
    resume = None
    for k in kills:
        try:
            with kill_after_writes(k):
                _fit(name, n_jobs, checkpoint=ck, resume=resume)
        except Killed:
            pass
        if left is not None:
            left.append(ck.read_bytes())
        resume = ck
    return _fit(name, n_jobs, checkpoint=ck, resume=resume)


def resumed_from(name: str, copy: bytes, ck: Path, n_jobs: int = 1) -> np.ndarray:
    """Scores of the fit resumed to the end from the checkpoint ``copy`` (bytes, written to ``ck``): the last step of
    :func:`killed_and_resumed` for the kill that left ``copy`` on disk."""
    ck.write_bytes(copy)
    return _fit(name, n_jobs, checkpoint=ck, resume=ck)


def sigkill_and_resume(name: str, ck: Path, delay: float, n_jobs: int = 1) -> tuple[np.ndarray, bool]:
    """Fit in a child process, SIGKILL it ``delay`` seconds after it starts training, resume here.

    Returns the resumed scores and whether a checkpoint was there to resume from.
    """
    import rankwise

    src = str(Path(rankwise.__file__).resolve().parents[1])  # the rankwise this process runs
    started = ck.with_suffix(".started")
    code = ("import sys; sys.path[:0] = [%r, %r]\n"
            "from pathlib import Path\n"
            "import _resume_faults as h\n"
            "h.data(); Path(%r).write_text('go')\n"
            "h._fit(%r, %d, checkpoint=Path(%r))\n") % (str(HERE), src, str(started), name,
                                                      n_jobs, str(ck))
    env = dict(os.environ, PYTHONPATH=src)
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        t_end = time.monotonic() + 120
        while not started.exists() and child.poll() is None and time.monotonic() < t_end:
            time.sleep(0.005)
        time.sleep(delay)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        _, err = child.communicate(timeout=60)
        if child.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"{name}: the child failed ({child.returncode}): {err.decode()[-2000:]}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        started.unlink(missing_ok=True)
    had = ck.exists()
    return _fit(name, n_jobs, checkpoint=ck, resume=ck if had else None), had


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b))) if len(a) else 0.0
