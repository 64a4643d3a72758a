"""Memory bounds on extreme shapes (issue 29 item 5), small-scale versions of benchmarks/faults_memory.py.

Each check runs in a child process whose address space is capped with ``RLIMIT_AS`` at what it uses after the
imports plus a small headroom: an allocation that grows with the square of a list's length, or a reader that
copies a long line many times, fails there (MemoryError / a torch allocation error), while a bounded one passes.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

PRELUDE = """
import resource

def _vm_bytes():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no /proc/self/status")

def cap(headroom_mb):
    limit = _vm_bytes() + headroom_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""


def _run(body: str, timeout: float = 120.0) -> str:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs Linux /proc to measure the address space")
    code = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"child failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr[-3000:]}"
    return p.stdout


def test_dense_pair_form_refused_under_an_address_space_limit():
    # a list of 10,000 float32 items: 8 pair matrices of 400 MB. The machine may have the memory, the process
    # (capped 1 GiB above its imports) has not: a clear InputError before any allocation, not a MemoryError or
    # a torch allocation failure half-way.
    out = _run("""
        import torch
        from rankwise.errors import InputError
        from rankwise.losses import ranknet_loss
        s = torch.randn(1, 10000)
        y = torch.randint(0, 3, (1, 10000)).float()
        cap(1024)
        try:
            ranknet_loss(s, y)
        except InputError as e:
            print("REFUSED", e)
    """)
    assert "REFUSED ranknet: the dense pair form of 1 list(s) of 10000 items" in out
    assert "can still allocate" in out


def test_one_long_query_through_the_engine_and_metrics_in_bounded_memory():
    # a query of 20,000 documents: its 4e8 pairs would need 3.2 GB as a dense float64 matrix; the compiled
    # engine (gradient), the metrics and the LightGBM fit through a rankwise pair loss stay within 300 MB
    out = _run("""
        import numpy as np
        from rankwise.losses import grad_hess
        from rankwise.metrics import evaluate
        from rankwise.models import GBDTRanker
        n = 20000
        rng = np.random.default_rng(0)
        X = rng.normal(size=(n, 4)).astype(np.float32)
        y = (X[:, 0] > 0.5).astype(np.float64) + (X[:, 1] > 1)
        s = rng.normal(size=n)
        q = np.zeros(n, dtype=np.int64)
        grad_hess("ranknet", s[:10], y[:10], np.array([0, 10]))  # load the kernels before the cap
        evaluate(s[:10], y[:10], q[:10], metrics=["ndcg@10", "map", "err@10"])
        GBDTRanker("ranknet", backend="lightgbm", n_estimators=1).fit(X[:50], y[:50], qid=q[:50])
        cap(300)
        g, h = grad_hess("ranknet", s, y, np.array([0, n]))
        assert np.all(np.isfinite(g)) and np.all(h > 0)
        res = evaluate(s, y, q, metrics=["ndcg@10", "map", "err@10"])
        m = GBDTRanker("ranknet", backend="lightgbm", n_estimators=3, num_leaves=7, random_state=0).fit(X, y, qid=q)
        p = m.predict(X)
        print("OK", len(res.per_query), float(np.ptp(p)) > 0)
    """)
    assert out.split()[:3] == ["OK", "1", "True"]


def test_readers_long_line_and_many_queries_in_bounded_memory(tmp_path):
    # a 20 MB line in an SVMlight file, a TREC run and qrels; 100,000 one-document queries; under a cap of
    # 400 MB above the imports (a handful of copies of a 20 MB line fits, a quadratic or per-line blow-up not)
    svm = tmp_path / "long.svm"
    with open(svm, "w") as fh:
        fh.write("1 qid:1" + "".join(f" {k}:0.{k % 1000:03d}" for k in range(1, 2_000_001)) + "\n0 qid:1 1:0.5\n")
    run = tmp_path / "long.run"
    run.write_text("q1 Q0 " + "d" * 20_000_000 + " 1 1.5 tag\nq1 Q0 d2 2 0.5 tag\n")
    many = tmp_path / "many.run"
    many.write_text("".join(f"q{i} Q0 d{i} 1 {i * 1e-6:.9e} tag\n" for i in range(100_000)))
    qrels = tmp_path / "many.qrels"
    qrels.write_text("".join(f"q{i} 0 d{i} {i % 3}\n" for i in range(100_000)))
    warm = tmp_path / "warm.svm"
    warm.write_text("1 qid:1 1:0.5\n0 qid:1 2:0.25\n")
    warm_run = tmp_path / "warm.run"
    warm_run.write_text("q1 Q0 d1 1 1.5 tag\n")
    out = _run(f"""
        from rankwise.data import Qrels, Run, read_svmlight
        from rankwise.metrics.trec import evaluate_runs
        read_svmlight({str(warm)!r}, cache=False)  # load the parsing kernels before the cap
        Run.read({str(warm_run)!r})
        cap(400)
        ds = read_svmlight({str(svm)!r}, cache=False)
        r = Run.read({str(run)!r})
        many = Run.read({str(many)!r})
        qr = Qrels.read({str(qrels)!r})
        out = evaluate_runs(qr, {{"r": many}}, ["map", "ndcg@10"])
        print("OK", ds.n_queries, ds.n_features, r.n_queries, len(r), many.n_queries, qr.n_queries, len(out))
    """)
    assert out.split() == ["OK", "1", "2000000", "1", "2", "100000", "100000", "1"]


def test_one_query_of_a_million_documents_under_a_pair_loss_is_refused_up_front_in_bounded_memory():
    # 10^6 documents: ~3.3e11 pairs of different labels (hours of pair arithmetic in O(n) memory, issue 29 item 5).
    # Refused before any pair is visited -- by grad_hess, by the engine's torch loss and by a model trained on it --
    # while the truncated lambdarank and a listwise loss give their gradient, all under a cap of 400 MB.
    out = _run("""
        import numpy as np
        import torch
        from rankwise.errors import InputError
        from rankwise.losses import grad_hess, training_loss
        from rankwise.models import LinearRanker
        n = 1_000_000
        rng = np.random.default_rng(0)
        s = rng.normal(size=n)
        y = rng.integers(0, 3, n).astype(np.float64)
        X = rng.normal(size=(n, 3)).astype(np.float32)
        grad_hess("ranknet", s[:10], y[:10], np.array([0, 10]))  # load the kernels before the cap
        LinearRanker("ranknet", max_iter=1).fit(X[:20], y[:20], qid=np.zeros(20, dtype=np.int64))
        cap(400)
        calls = [lambda: grad_hess("ranknet", s, y, np.array([0, n])),
                 lambda: training_loss("ranknet", torch.from_numpy(s), torch.from_numpy(y)),
                 lambda: LinearRanker("ranknet", max_iter=2).fit(X, y, qid=np.zeros(n, dtype=np.int64))]
        for call in calls:
            try:
                call()
                print("NO ERROR")
            except InputError as e:
                print("REFUSED", str(e).split(",")[0])
        g, _ = grad_hess("lambdarank", s, y, np.array([0, n]))
        g2, _ = grad_hess("listmle", s, y, np.array([0, n]))
        print("OK", bool(np.isfinite(g).all() and np.isfinite(g2).all()))
    """)
    assert out.splitlines() == ["REFUSED ranknet: query 0 (0-based", "REFUSED ranknet: query 0 (0-based",
                                "REFUSED ranknet: query 0 (0-based", "OK True"]
