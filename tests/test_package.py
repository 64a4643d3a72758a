import subprocess
import sys


def test_import_rankwise_is_light():
    code = ("import sys, rankwise, rankwise.data, rankwise.metrics; "
            "heavy = [m for m in ('torch', 'lightgbm', 'xgboost') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_demo_runs():
    from rankwise.cli import main

    assert main(["demo"]) == 0


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_every_subpackage_is_an_attribute_of_rankwise_imported_on_first_use():
    """``rankwise.clicks`` (and every other subpackage) without importing it first; ``import rankwise``
    itself imports none of them, nor numpy, pandas, scikit-learn or torch."""
    from pathlib import Path

    import rankwise

    pkg = Path(rankwise.__file__).parent
    subpackages = sorted(p.name for p in pkg.iterdir() if (p / "__init__.py").exists() and not p.name.startswith("_"))
    assert "clicks" in subpackages
    code = ("import sys, rankwise\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('rankwise.') or m.split('.')[0] in "
            "('numpy', 'pandas', 'sklearn', 'torch', 'dask'))\n"
            "assert loaded == ['rankwise.errors'] or not loaded, loaded\n"
            "for name in sys.argv[1:]:\n"
            "    mod = getattr(rankwise, name)\n"
            "    assert mod is sys.modules['rankwise.' + name], name\n"
            "print(rankwise.clicks.PBM.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code, *subpackages], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "rankwise.clicks.models"


def test_all_lists_exactly_the_public_names_and_each_imports():
    from pathlib import Path

    import rankwise
    import rankwise.models

    pkg = Path(rankwise.__file__).parent
    subpackages = {p.name for p in pkg.iterdir() if (p / "__init__.py").exists() and not p.name.startswith("_")}
    assert len(rankwise.__all__) == len(set(rankwise.__all__))
    assert set(rankwise.__all__) == set(rankwise._LAZY) | subpackages
    assert "clicks" in rankwise.__all__ and "LinearRanker" in rankwise.__all__
    # rankwise.models: every public class or function its namespace holds (submodules aside), no other
    import inspect

    public = {n for n, v in vars(rankwise.models).items() if not n.startswith("_") and not inspect.ismodule(v)
              and n != "annotations"}
    assert sorted(rankwise.models.__all__) == sorted(public)
    for mod in ("rankwise", "rankwise.models"):
        out = _fresh(f"import {mod} as m\nfrom {mod} import *\n"
                     "missing = [n for n in m.__all__ if n not in globals()]\nassert not missing, missing\n")
        assert out.returncode == 0, f"{mod}: {out.stderr[-3000:]}"
