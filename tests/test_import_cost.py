"""Imports cost what they use (issue 27): each job runs in a fresh interpreter and reports which heavy
libraries it loaded. torch, scikit-learn, pandas, LightGBM, XGBoost, matplotlib and Dask are loaded by the
first call that needs them, never by an import or a job that does not."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("torch", "sklearn", "pandas", "lightgbm", "xgboost", "matplotlib", "dask")

_REPORT = f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"


def _loaded(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code + _REPORT, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_rankwise_and_metrics_loads_no_heavy_library():
    assert _loaded("import rankwise, rankwise.metrics, rankwise.data") == []


def test_import_rankwise_metrics_loads_no_scipy_submodule():
    # metrics needs numpy and its compiled kernels only; scipy.sparse
    # and scipy.special come with the readers and the synthetic data
    code = ("import sys, rankwise.metrics\nloaded = [m for m in ('scipy.sparse', 'scipy.special', 'scipy.stats') "
            "if m in sys.modules]\nassert not loaded, loaded\n")
    assert _loaded(code) == []


def test_gbdt_fit_and_predict_do_not_load_torch():
    pytest.importorskip("lightgbm")
    code = ("import numpy as np\nfrom rankwise import GBDTRanker\n"
            "rng = np.random.default_rng(0)\nX = rng.normal(size=(120, 4))\ny = rng.integers(0, 3, 120)\n"
            "qid = np.repeat(np.arange(12), 10)\n"
            "m = GBDTRanker(n_estimators=2, num_leaves=4, min_child_samples=2).fit(X, y, qid=qid)\n"
            "assert np.isfinite(m.predict(X, qid=qid)).all()\n")
    assert "torch" not in _loaded(code)


def test_gbdt_fit_with_n_jobs_does_not_load_torch():
    """``n_jobs`` limits the thread pools of the fit (limit_threads): torch's only where torch is loaded."""
    pytest.importorskip("lightgbm")
    code = ("import numpy as np\nfrom rankwise import GBDTRanker\n"
            "rng = np.random.default_rng(2)\nX = rng.normal(size=(120, 4))\ny = rng.integers(0, 3, 120)\n"
            "qid = np.repeat(np.arange(12), 10)\n"
            "m = GBDTRanker(n_estimators=2, num_leaves=4, min_child_samples=2, n_jobs=1).fit(X, y, qid=qid)\n"
            "assert np.isfinite(m.predict(X, qid=qid)).all()\n")
    assert "torch" not in _loaded(code)


def test_gbdt_fit_on_a_dataset_does_not_load_torch():
    pytest.importorskip("lightgbm")
    code = ("import numpy as np\nfrom rankwise import GBDTRanker, RankingDataset\n"
            "rng = np.random.default_rng(1)\nqid = np.repeat(np.arange(10), 8)\n"
            "ds = RankingDataset.from_arrays(rng.normal(size=(80, 3)), rng.integers(0, 2, 80), qid)\n"
            "m = GBDTRanker(n_estimators=2, num_leaves=4, min_child_samples=2).fit(ds)\n"
            "assert np.isfinite(m.predict(ds.X)).all()\n")
    assert "torch" not in _loaded(code)


def _trec_files(tmp_path):
    rng = np.random.default_rng(2)
    run, qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
    with open(run, "w") as r, open(qrels, "w") as q:
        for t in range(4):
            for d in range(25):
                r.write(f"{301 + t} Q0 doc{d} {d + 1} {rng.normal() * 1e-3:.17g} sys\n")
                if d % 2 == 0:
                    q.write(f"{301 + t} 0 doc{d} {int(rng.integers(0, 3))}\n")
    return run, qrels


def test_cli_evaluate_run_and_qrels_loads_neither_torch_nor_sklearn(tmp_path):
    run, qrels = _trec_files(tmp_path)
    code = ("import sys\nfrom rankwise.cli.main import main\n"
            "assert main(['evaluate', '--run', sys.argv[1], '--qrels', sys.argv[2]]) == 0\n")
    loaded = _loaded(code, str(run), str(qrels))
    assert "torch" not in loaded and "sklearn" not in loaded, loaded


@pytest.mark.parametrize("fmt", [[], ["--format", "trec_eval"], ["--format", "trec_eval", "--metrics", "all_trec"]])
def test_cli_evaluate_summary_of_a_run_loads_no_pandas(tmp_path, fmt):
    """The summary of a run needs the means and the count of topics, not the per-query table (pandas' import, about
    0.3 CPU s, was most of a one-shot `rankwise evaluate`); the per-topic output (-q) still builds it, relstring
    included, and prints the same means."""
    run, qrels = _trec_files(tmp_path)
    code = ("import sys, io, contextlib\nfrom rankwise.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main(['evaluate', '--run', sys.argv[1], '--qrels', sys.argv[2], *{fmt!r}]) == 0\n"
            "assert 'queries' in out.getvalue() or '\\tall\\t' in out.getvalue(), out.getvalue()\n"
            "summary = out.getvalue()\n"
            "assert 'pandas' not in sys.modules\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main(['evaluate', '--run', sys.argv[1], '--qrels', sys.argv[2], *{fmt!r}, '-q']) == 0\n"
            "lines = out.getvalue().splitlines()\n"
            "assert set(summary.splitlines()) <= set(lines), 'the -q output holds the summary lines unchanged'\n"
            "assert len(lines) > len(summary.splitlines()) and 'pandas' in sys.modules\n")
    _loaded(code, str(run), str(qrels))


def test_cli_evaluate_data_and_scores_does_not_load_torch(tmp_path):
    from rankwise.data import RankingDataset, write_svmlight

    rng = np.random.default_rng(3)
    data, scores = tmp_path / "d.txt", tmp_path / "s.txt"
    qid = np.repeat(np.arange(5), 6)
    write_svmlight(RankingDataset.from_arrays(rng.normal(size=(30, 3)), rng.integers(0, 3, 30), qid), data)
    np.savetxt(scores, rng.normal(size=30), fmt="%.17g")
    code = ("import sys\nfrom rankwise.cli.main import main\n"
            "assert main(['evaluate', sys.argv[1], '--scores', sys.argv[2]]) == 0\n")
    loaded = _loaded(code, str(data), str(scores))
    assert "torch" not in loaded and "sklearn" not in loaded, loaded


def test_cli_help_loads_nothing_heavy():
    code = ("import contextlib, io\nfrom rankwise.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            "import sys\nassert 'numpy' not in sys.modules and 'numba' not in sys.modules\n")
    assert _loaded(code) == []


def test_the_torch_losses_still_work_after_a_light_import():
    """The losses load torch on their first call and behave as before (values and gradients)."""
    code = ("import sys\nfrom rankwise import losses\nassert 'torch' not in sys.modules\n"
            "import torch\ns = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64, requires_grad=True)\n"
            "y = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)\n"
            "for name in ('ranknet', 'rankboost', 'pairwise_hinge', 'listnet', 'pointwise_logistic'):\n"
            "    v = losses.get(name)(s, y)\n    v.backward()\n    assert torch.isfinite(s.grad).all(), name\n"
            "    s.grad = None\n"
            "v = losses.training_loss('listnet', s, y)\nassert torch.isfinite(v)\n")
    assert "torch" in _loaded(code)


def test_evaluate_means_load_no_pandas_until_the_per_query_table_is_read():
    """The first evaluate() of a fresh process costs the measures, not pandas' import (issue 27's goal: within
    0.5 s of the import); ``per_query`` builds the DataFrame on first access, NA for dropped queries included."""
    code = ("import sys, numpy as np\nfrom rankwise.metrics import evaluate\n"
            "rng = np.random.default_rng(0)\nqid = np.repeat(np.arange(50), 10)\ny = rng.integers(0, 3, 500)\n"
            "y[:10] = 0\ns = rng.normal(size=500)\n"
            "r = evaluate(s, y, qid, metrics=['ndcg@10', 'map', 'err@10'], empty='drop')\n"
            "assert 'pandas' not in sys.modules and 0 < r.mean['map'] <= 1 and '50 queries' in repr(r)\n"
            "assert r.n_queries == 50 and 'pandas' not in sys.modules\n"
            "t = r.per_query\nassert 'pandas' in sys.modules and t.shape == (50, 3) and t['map'].isna().sum() == 1\n"
            "assert abs(t['map'].mean() - r.mean['map']) < 1e-12\n")
    assert "pandas" in _loaded(code)
