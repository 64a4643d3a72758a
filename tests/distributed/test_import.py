"""rankwise.distributed is optional: not imported by `import rankwise`; its Dask functions say what to install
when Dask is missing, and its DDP functions need PyTorch only."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_rankwise_does_not_import_distributed_or_dask():
    r = _run("import sys, rankwise, rankwise.metrics, rankwise.data; "
             "print('rankwise.distributed' in sys.modules, 'dask' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# A fresh interpreter in which `import dask` / `import distributed` fail (None in sys.modules).
_BLOCK = "import sys\nfor _n in ('dask', 'dask.dataframe', 'distributed'):\n    sys.modules[_n] = None\n"


def test_missing_dask_gives_install_hint():
    r = _run(_BLOCK + "import numpy as np, pandas as pd\n"
                      "import rankwise.distributed as rd\n"
                      "try:\n"
                      "    rd.from_pandas(pd.DataFrame({'qid': [1, 1], 'label': [0.0, 1.0], 'f0': [0.5, 1e-3]}))\n"
                      "except ImportError as e:\n"
                      "    print(e)\n")
    assert r.returncode == 0, r.stderr
    assert "pip install rankwise[dask]" in r.stdout


def test_ddp_imports_with_torch_alone():
    """Dask is loaded by the Dask functions only: the DDP module and functions import without it."""
    pytest.importorskip("torch", reason="PyTorch is not installed (the DDP functions need it)")
    r = _run(_BLOCK + "import rankwise.distributed.ddp\n"
                      "from rankwise.distributed import fit_ddp, fit_shard\n"
                      "print(fit_ddp.__module__, fit_shard.__module__, sys.modules['dask'])\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["rankwise.distributed.ddp", "rankwise.distributed.ddp", "None"]


@pytest.mark.slow
def test_ddp_trains_without_dask_in_any_process(tmp_path):
    """Two gloo ranks (fresh interpreters, spawned) with Dask blocked in each by a ``sitecustomize``."""
    pytest.importorskip("torch", reason="PyTorch is not installed (the DDP functions need it)")
    (tmp_path / "sitecustomize.py").write_text(_BLOCK)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    code = ("import sys, numpy as np\n"
            "from rankwise.data import make_synthetic\n"
            "from rankwise.distributed import fit_ddp\n"
            "from rankwise.models import LinearRanker\n"
            "assert sys.modules['dask'] is None\n"
            "d = make_synthetic(20, n_features=4, list_length=(2, 9), seed=1)\n"
            "kw = dict(loss='listnet', solver='adam', max_iter=2, batch_queries=5, random_state=0, verbose=False,\n"
            "          fit_intercept=False)\n"
            "one = LinearRanker(**kw).fit(d.X, d.labels, qid=d.qid)\n"
            "two = fit_ddp(LinearRanker(**kw), d.X, d.labels, qid=d.qid, world_size=2)\n"
            "print(float(np.abs(two.coef_ - one.coef_).max()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.split()[-1]) <= 1e-5  # the tolerance of test_ddp.py: float32 sums in another order
