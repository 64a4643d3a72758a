"""Dead Dask workers (issue 29 item 6): a worker killed during a distributed fit gives a clean error, never a hang.

The full trials (random kill moments, fit and evaluation) are in benchmarks/faults_dask.py.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from rankwise.errors import RankwiseError, WorkerLostError


# ------------------------------------------------------------------ the watchdog, on a fake client (fast)
class _FakeClient:
    """scheduler_info() lists two workers, then (after ``drop_after`` looks) only one."""

    def __init__(self, drop_after=None):
        self.looks = 0
        self.drop_after = drop_after

    def scheduler_info(self, n_workers=-1):
        self.looks += 1
        gone = self.drop_after is not None and self.looks > self.drop_after
        return {"workers": {"tcp://a:1": {}} if gone else {"tcp://a:1": {}, "tcp://b:2": {}}}


def _forever():
    threading.Event().wait()


def test_watched_returns_the_value_when_no_worker_dies():
    from rankwise.distributed._watch import watched

    assert watched(_FakeClient(), lambda: 42, what="t") == 42


def test_watched_names_the_lost_worker_instead_of_waiting_forever():
    from rankwise.distributed._watch import watched

    t0 = time.monotonic()
    with pytest.raises(WorkerLostError, match=r"t: Dask worker tcp://b:2 left the cluster during training"):
        watched(_FakeClient(drop_after=3), _forever, what="t")
    assert time.monotonic() - t0 < 30


def test_watched_timeout_and_errors():
    from rankwise.distributed._watch import watched

    with pytest.raises(WorkerLostError, match=r"did not finish within timeout=0.5 s"):
        watched(_FakeClient(), _forever, what="t", timeout=0.5)
    with pytest.raises(RankwiseError, match="timeout must be a positive"):
        watched(_FakeClient(), lambda: 1, what="t", timeout=0)

    def boom():
        raise ValueError("not a worker problem")
    with pytest.raises(ValueError, match="not a worker problem"):  # other errors pass through unchanged
        watched(_FakeClient(), boom, what="t")

    def socket_error_and_dead_peer():
        raise RuntimeError("Socket recv error, Connection reset by peer")
    client = _FakeClient(drop_after=2)
    with pytest.raises(WorkerLostError, match="tcp://b:2") as info:
        watched(client, socket_error_and_dead_peer, what="t")
    assert isinstance(info.value.__cause__, RuntimeError)


# ------------------------------------------------------------------ a real LocalCluster, one SIGKILL (slow)
@pytest.mark.slow
def test_worker_killed_during_lightgbm_fit_raises_worker_lost_and_leaves_no_model():
    distributed = pytest.importorskip("distributed", reason="rankwise[dask] extra not installed")
    pytest.importorskip("lightgbm")
    import cloudpickle

    import rankwise.distributed as rd
    from rankwise.data import make_synthetic, to_pandas
    from rankwise.models import GBDTRanker

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ds = make_synthetic(120, n_features=5, list_length=(5, 20), seed=4)
    pdf = to_pandas(ds)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit="2GiB") as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        frame = rd.from_pandas(pdf, npartitions=2)
        # enough rounds that the kill lands while the collective trains
        model = GBDTRanker("ranknet", backend="lightgbm", n_estimators=2000, num_leaves=7, min_child_samples=5,
                           random_state=0, verbose=False)
        victim = sorted(pids.items())[1][1]

        def killer():
            # kill once the watched training call has started (its thread exists), a moment into training
            while not any(t.name.startswith("rankwise-fit_gbdt") for t in threading.enumerate()):
                time.sleep(0.05)
            time.sleep(2.0)
            os.kill(victim, signal.SIGKILL)

        threading.Thread(target=killer, daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(WorkerLostError, match=r"fit_gbdt \(lightgbm\): Dask worker tcp://127.0.0.1:\d+ left"):
            rd.fit_gbdt(model, frame, client=client, timeout=400)
        assert time.monotonic() - t0 < 400
        assert not hasattr(model, "booster_")  # no partial model


def test_distributed_evaluate_reports_repeatedly_killed_workers_as_worker_lost(monkeypatch):
    dask = pytest.importorskip("dask")
    scheduler = pytest.importorskip("distributed.scheduler")
    import pandas as pd

    import rankwise.distributed as rd

    frame = rd.from_pandas(pd.DataFrame({"qid": [1, 1, 2, 2], "score": [0.5, 0.1, 0.2, 0.9],
                                         "label": [1.0, 0.0, 0.0, 2.0]}), npartitions=2)

    def killed(*args, **kwargs):
        from types import SimpleNamespace

        raise scheduler.KilledWorker("_evaluate_partition-123", SimpleNamespace(address="tcp://127.0.0.1:4000"), 3)

    monkeypatch.setattr(dask, "compute", killed)
    with pytest.raises(WorkerLostError, match="distributed evaluate: Dask workers kept dying") as info:
        rd.evaluate(frame, ["ndcg@10"])
    assert isinstance(info.value.__cause__, scheduler.KilledWorker)
