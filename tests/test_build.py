"""The compiled kernels (issue 27): every ``.pyx`` under src/rankwise is built into an extension module,
the build is not older than its source, and a machine without a C++ compiler gets a message saying what
to install rather than a compiler traceback."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise

PKG = Path(rankwise.__file__).resolve().parent
ROOT = PKG.parent.parent
SOURCES = sorted(PKG.rglob("*.pyx"))


def _module(pyx: Path) -> str:
    return ".".join(pyx.relative_to(PKG.parent).with_suffix("").parts)


def test_there_are_compiled_kernels():
    assert SOURCES, f"no .pyx under {PKG}"


@pytest.mark.parametrize("pyx", SOURCES, ids=lambda p: _module(p))
def test_every_kernel_source_is_an_extension_module(pyx):
    mod = importlib.import_module(_module(pyx))
    built = Path(mod.__file__)
    assert built.suffix in {".so", ".pyd"}, f"{_module(pyx)} is {built}, not a compiled extension"
    if built.parent == pyx.parent:  # an in-place (editable) build: it must not be older than its source
        assert built.stat().st_mtime >= pyx.stat().st_mtime, (
            f"{built.name} is older than {pyx.name}: rebuild with `make install` or "
            "`python setup.py build_ext --inplace`")


def test_no_numba_at_import_or_in_the_kernels(tmp_path):
    """rankwise compiles nothing at run time: the imports and the hot paths (measures, a TREC run and its
    qrels, an SVMlight file, a loss's gradient, click-model EM) run without numba or llvmlite."""
    code = ("import sys, numpy as np, rankwise, rankwise.metrics, rankwise.data, rankwise.losses\n"
            "from rankwise.metrics import evaluate, evaluate_runs\nfrom rankwise.data import RankingDataset, "
            "read_svmlight, write_svmlight\nfrom rankwise.losses import grad_hess\n"
            "rng = np.random.default_rng(0)\nqid = np.repeat(np.arange(20), 10)\ny = rng.integers(0, 3, 200)\n"
            "s = rng.normal(size=200)\nevaluate(s, y, qid, metrics=['ndcg@10', 'map', 'err@10', 'kendall_tau'])\n"
            "off = np.arange(0, 201, 10)\nfor loss in ('lambdarank', 'listnet', 'ranknet'):\n"
            "    grad_hess(loss, s, y.astype(float), off)\n"
            f"d = {str(tmp_path)!r}\n"
            "write_svmlight(RankingDataset.from_arrays(rng.normal(size=(200, 3)), y, qid), d + '/t.txt')\n"
            "read_svmlight(d + '/t.txt')\n"
            "with open(d + '/run', 'w') as r, open(d + '/qrels', 'w') as q:\n"
            "    for i in range(200):\n"
            "        r.write(f'{qid[i]} Q0 d{i} {i % 10 + 1} {float(s[i])!r} sys\\n')\n"
            "        q.write(f'{qid[i]} 0 d{i} {y[i]}\\n')\n"
            "evaluate_runs(d + '/qrels', [d + '/run'], 'all_trec')\n"
            "from rankwise.clicks import ClickLog, DBN, UBM, CCM\n"
            "docs = [list(rng.permutation(8)) for _ in range(300)]\n"
            "log = ClickLog.from_arrays([i % 5 for i in range(300)], docs, [(rng.random(8) < 0.2).astype(int) for _ in docs])\n"
            "for m in (DBN(), UBM(), CCM()):\n    m.fit(log)\n"
            "assert 'numba' not in sys.modules and 'llvmlite' not in sys.modules, 'numba loaded'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="needs the source tree (setup.py)")
def test_a_missing_compiler_gets_a_message_saying_what_to_install(tmp_path):
    pytest.importorskip("Cython")
    src = tmp_path / "src" / "rankwise"
    src.mkdir(parents=True)
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    shutil.copytree(PKG / "_native", src / "_native")
    (src / "__init__.py").write_text("")
    (src / "_k.pyx").write_text("def f(double x):\n    return x + 1\n")
    env = dict(os.environ, CC=str(tmp_path / "no-such-cc"), CXX=str(tmp_path / "no-such-c++"))
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "no working C++ compiler was found" in out.stderr, out.stderr[-3000:]
    assert "apt-get install g++" in out.stderr
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
