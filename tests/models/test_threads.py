"""Issue 28, item 11: ``n_jobs`` reaches every thread pool, and the default counts the CPUs this process
may actually use. These tests look at the settings the libraries receive, never at timings."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from _model_data import make_data
from rankwise import _validation
from rankwise.losses import _engine
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker, PairwiseReductionRanker


def _pools():
    """The thread counts in force now: torch, the compiled kernels' and the engine's defaults, BLAS/OpenMP pools."""
    return {"torch": torch.get_num_threads(), "kernels": _validation.kernel_threads(None),
            "engine": _engine.n_threads(None), "native": sorted({p["num_threads"] for p in threadpool_info()})}


@pytest.fixture
def engine_spy(monkeypatch):
    seen = []
    run = _engine.run

    def spy(kernel, s, y, off, w=None, n_jobs=None, value=True, **kw):
        seen.append({**_pools(), "engine": _engine.n_threads(n_jobs)})
        return run(kernel, s, y, off, w, n_jobs, value, **kw)
    monkeypatch.setattr(_engine, "run", spy)
    return seen


def _all_one(seen):
    assert seen
    for pools in seen:
        assert pools["torch"] == 1 and pools["kernels"] == 1 and pools["engine"] == 1, pools
        assert pools["native"] in ([], [1]), pools


@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_linear_n_jobs_1_reaches_every_pool(engine_spy, solver):
    X, y, qid = make_data()
    before = _pools()
    LinearRanker("listnet", solver=solver, max_iter=3, n_jobs=1, random_state=0).fit(X, y, qid=qid)
    _all_one(engine_spy)
    assert _pools() == before  # restored


@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_linear_default_runs_torch_on_one_thread_and_the_engine_on_every_cpu(engine_spy, solver, monkeypatch):
    """n_jobs=None: torch's pool on one thread during the fit (its spinning threads would take the engine's cores),
    the engine and kernels on every usable CPU; restored after. An explicit n_jobs sets torch's pool too."""
    X, y, qid = make_data()
    monkeypatch.setattr(_validation, "available_cpus", lambda: 3)
    monkeypatch.delenv("RANKWISE_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        LinearRanker("listnet", solver=solver, max_iter=3, random_state=0).fit(X, y, qid=qid)
        assert engine_spy and all(p["torch"] == 1 and p["engine"] == 3 and p["kernels"] == 3 for p in engine_spy)
        assert torch.get_num_threads() == 2  # restored
        engine_spy.clear()
        LinearRanker("listnet", solver=solver, max_iter=3, random_state=0, n_jobs=2).fit(X, y, qid=qid)
        assert engine_spy and all(p["torch"] == 2 and p["engine"] == 2 for p in engine_spy)
    finally:
        torch.set_num_threads(before)


def test_neural_n_jobs_1_reaches_every_pool(engine_spy):
    X, y, qid = make_data()
    NeuralRanker("listnet", max_iter=1, n_jobs=1, random_state=0).fit(X, y, qid=qid)
    _all_one(engine_spy)


def test_gbdt_n_jobs_1_reaches_the_libraries_and_every_pool(engine_spy):
    X, y, qid = make_data()
    m = GBDTRanker("lambdarank", n_estimators=2, n_jobs=1, random_state=0).fit(X, y, qid=qid)
    _all_one(engine_spy)
    assert int(m.booster_.params["num_threads"]) == 1
    pytest.importorskip("xgboost")
    import json

    m = GBDTRanker("lambdarank", backend="xgboost", n_estimators=2, n_jobs=1, random_state=0).fit(X, y, qid=qid)
    assert int(json.loads(m.booster_.save_config())["learner"]["generic_param"]["nthread"]) == 1


def test_gbdt_default_threads_are_the_available_cpus(monkeypatch):
    monkeypatch.setattr("rankwise.models.gbdt.available_cpus", lambda: 1)
    X, y, qid = make_data()
    m = GBDTRanker("lambdarank", n_estimators=2, random_state=0).fit(X, y, qid=qid)
    assert int(m.booster_.params["num_threads"]) == 1
    assert GBDTRanker(n_jobs=3)._lgb_params(None, 0)["num_threads"] == 3


def test_gbdt_default_threads_honour_omp_num_threads(monkeypatch):
    monkeypatch.setattr("rankwise.models.gbdt.available_cpus", lambda: 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert GBDTRanker()._lgb_params(None, 0)["num_threads"] == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # a request above the CPUs available gets the CPUs
    assert GBDTRanker()._lgb_params(None, 0)["num_threads"] == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert GBDTRanker()._lgb_params(None, 0)["num_threads"] == 4
    assert GBDTRanker(n_jobs=3)._lgb_params(None, 0)["num_threads"] == 3  # an explicit n_jobs wins


class _RecordingClassifier:
    """A logistic regression that records the thread pools in force and its n_jobs while it fits."""

    def __init__(self, n_jobs=-1):
        self.n_jobs = n_jobs

    def get_params(self, deep=False):
        return {"n_jobs": self.n_jobs}

    def set_params(self, **params):
        self.__dict__.update(params)
        return self

    def fit(self, X, y):
        from sklearn.linear_model import LogisticRegression

        self.pools_, self.n_jobs_in_fit_ = _pools(), self.n_jobs
        self.inner_ = LogisticRegression().fit(X, y)
        self.classes_ = self.inner_.classes_
        return self

    def decision_function(self, X):
        return self.inner_.decision_function(X)

    def predict(self, X):
        return self.inner_.predict(X)


def test_reduction_has_n_jobs_and_it_reaches_the_classifier_and_blas():
    X, y, qid = make_data(n_queries=10)
    before = _pools()
    m = PairwiseReductionRanker(_RecordingClassifier(), n_jobs=1, random_state=0).fit(X, y, qid=qid)
    est = m.estimator_
    assert est.n_jobs_in_fit_ == 1
    assert est.pools_["torch"] == 1 and est.pools_["native"] in ([], [1])
    assert _pools() == before
    m = PairwiseReductionRanker(_RecordingClassifier(), random_state=0).fit(X, y, qid=qid)
    assert m.estimator_.n_jobs_in_fit_ == -1  # None: the classifier's own setting


def test_available_cpus_reads_the_cgroup_quota(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert _validation._cgroup_cpu_limit(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert _validation._cgroup_cpu_limit(str(tmp_path)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert _validation._cgroup_cpu_limit(str(v1)) == 2.0
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert _validation._cgroup_cpu_limit(str(v1)) is None
    monkeypatch.setattr(_validation, "_cgroup_cpu_limit", lambda: 1.5)
    monkeypatch.setattr(_validation.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert _validation.available_cpus() == 1
    monkeypatch.setattr(_validation, "_cgroup_cpu_limit", lambda: None)
    assert _validation.available_cpus() == 4
    assert _validation.n_jobs_threads(-1) == 4 and _validation.n_jobs_threads(-2) == 3


def test_kernel_threads_follow_n_jobs_the_limit_and_the_environment(monkeypatch):
    monkeypatch.setattr(_validation, "available_cpus", lambda: 6)
    monkeypatch.delenv("RANKWISE_NUM_THREADS", raising=False)
    assert _validation.kernel_threads() == 6 and _validation.kernel_threads(-1) == 6
    assert _validation.kernel_threads(2) == 2
    monkeypatch.setenv("RANKWISE_NUM_THREADS", "3")
    assert _validation.kernel_threads() == 3
    with _validation.limit_threads(1):
        assert _validation.kernel_threads() == 1  # a model's n_jobs wins over the environment
    assert _validation.kernel_threads(4) == 4  # and an explicit n_jobs over both
    monkeypatch.setenv("RANKWISE_NUM_THREADS", "many")
    with pytest.raises(_validation.InputError, match="RANKWISE_NUM_THREADS must be a whole number.*'many'"):
        _validation.kernel_threads()
