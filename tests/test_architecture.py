"""The layering of docs/architecture.md, enforced.

* ``lint-imports`` (import-linter, contract in ``pyproject.toml``) passes: every import, at module
  level or inside a function, goes down the layers. A second run on a copy of ``src/`` with one
  upward import planted inside a function shows that the contract catches lazy imports.
* Dynamic imports (``importlib.import_module``/``__import__``), which import-linter cannot see,
  only reach modules of their own subpackage.
* Every module imports in a fresh interpreter, whichever is imported first (no import cycle held
  together by import order), and all of them import together in any order.
* No two modules import each other, directly or round a loop, at module level or inside functions
  (grimp's module graph; the layers contract sees packages only, not cycles inside one).
"""
from __future__ import annotations

import ast
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "rankwise"

_LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _env(src: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                     if p and Path(p).resolve() != SRC.resolve()])
    return env


def _lint(cwd: Path, src: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("importlinter", reason="import-linter is in the [test] extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-c", _LINT, "--no-cache"], cwd=cwd, env=_env(src),
                          capture_output=True, text=True, timeout=300)


def _modules() -> list[str]:
    """Every module of the package, from the files (``rankwise.__main__`` included)."""
    mods = []
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods.append(".".join(parts))
    return mods


def _importable() -> list[str]:
    """All modules: none needs an optional extra to import (``rankwise.distributed`` loads Dask, and its
    DDP module PyTorch, only inside the functions that use them)."""
    return _modules()


def test_layers_contract_passes():
    out = _lint(ROOT, SRC)
    assert out.returncode == 0, f"lint-imports failed (an import goes up the layers):\n{out.stdout}\n{out.stderr}"
    assert "1 kept, 0 broken" in out.stdout, out.stdout


def test_layers_contract_catches_a_lazy_upward_import(tmp_path):
    """metrics (low) importing models (high) inside a function breaks the contract."""
    shutil.copytree(PKG, tmp_path / "src" / "rankwise", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src" / "rankwise" / "metrics" / "gains.py"
    target.write_text(target.read_text() + "\n\ndef _planted():\n    from rankwise.models import base  # noqa\n")
    out = _lint(tmp_path, tmp_path / "src")
    assert out.returncode != 0, out.stdout
    assert "rankwise.metrics is not allowed to import rankwise.models" in out.stdout, out.stdout
    assert "rankwise.metrics.gains -> rankwise.models.base" in out.stdout, out.stdout


# a module path, or the literal head of an f-string naming one (f"rankwise.theory.{mod}")
_MODULE = re.compile(r"rankwise(\.\w+)+\.?")


def _dynamic_targets(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in ("import_module", "__import__"):
                return True
    return False


def _cross_package_dynamic_imports(pkg: Path) -> list[str]:
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg)
        tree = ast.parse(path.read_text(), filename=str(path))
        if rel == Path("__init__.py") or not _dynamic_targets(tree):
            continue  # the root package's lazy attributes may name every subpackage
        own = rel.parts[0].removesuffix(".py")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE.fullmatch(node.value):
                sub = node.value.split(".")[1]
                if sub and sub != own:
                    bad.append(f"{rel}:{node.lineno}: {node.value!r} (from {own})")
    return bad


def test_dynamic_imports_stay_inside_their_subpackage(tmp_path):
    """import-linter cannot follow ``import_module(name)``: such a module may only name its own subpackage."""
    bad = _cross_package_dynamic_imports(PKG)
    assert not bad, "dynamic imports across subpackages (invisible to import-linter):\n" + "\n".join(bad)
    # and the check can fail: metrics importing models by name
    planted = tmp_path / "rankwise"
    (planted / "metrics").mkdir(parents=True)
    (planted / "metrics" / "x.py").write_text("import importlib\n\n\ndef f():\n"
                                               "    return importlib.import_module('rankwise.models')\n")
    assert _cross_package_dynamic_imports(planted) == ["metrics/x.py:5: 'rankwise.models' (from metrics)"]


_EACH_FIRST = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for key in [k for k in sys.modules if k == "rankwise" or k.startswith("rankwise.")]:
        del sys.modules[key]  # rankwise is imported afresh; torch & co. stay loaded (speed only)
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ":\\n" + traceback.format_exc(limit=-3))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter():
    """Each module is the first rankwise module imported (sys.modules purged of rankwise before each)."""
    mods = _importable()
    assert "rankwise._validation" in mods and len(mods) > 50
    out = subprocess.run([sys.executable, "-c", _EACH_FIRST, *mods], env=_env(SRC), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, f"modules that fail when imported first:\n{out.stdout}\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("seed", [0])
def test_all_modules_import_in_a_random_order(seed):
    mods = _importable()
    random.Random(seed).shuffle(mods)
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    out = subprocess.run([sys.executable, "-c", code, *mods], env=_env(SRC), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"import order (seed {seed}) {mods}:\n{out.stderr[-3000:]}"


def test_a_cycle_would_be_caught(tmp_path):
    """The each-first check is able to fail: a planted cycle a <-> b fails when b is imported first."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import g\n\ndef f():\n    return 1\n")
    (pkg / "b.py").write_text("from cyc.a import f\n\ndef g():\n    return 2\n")
    code = _EACH_FIRST.replace('"rankwise"', '"cyc"').replace('"rankwise."', '"cyc."')
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code, "cyc.b"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "cyc.b" in out.stdout, out.stdout + out.stderr


# Every import grimp finds in a module's file — at module level, inside functions and methods, under
# ``if TYPE_CHECKING`` — is an edge of the graph: a cycle closed by a lazy import still ties the two
# modules together (neither can be read, tested or moved without the other), and it is one edit away
# from an import-order failure. Printed as JSON: a list of cycles, each a list of modules a -> ... -> a.
# A module naming itself (``ddp``'s ``__main__`` guard runs the function of the imported copy) is no cycle.
_CYCLES = """
import json, sys
import grimp
graph = grimp.build_graph(sys.argv[1], cache_dir=None)
seen, cycles = set(), []
for a in sorted(graph.modules):
    for b in sorted(graph.find_modules_directly_imported_by(a)):
        back = None if b == a else graph.find_shortest_chain(importer=b, imported=a)
        if back and frozenset(back) not in seen:
            seen.add(frozenset(back))
            cycles.append([a, *back])
print(json.dumps(cycles))
"""


def _import_cycles(package: str, src: Path) -> list:
    pytest.importorskip("grimp", reason="grimp comes with import-linter, in the [test] extra: pip install -e '.[test]'")
    out = subprocess.run([sys.executable, "-c", _CYCLES, package], env=_env(src), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    return json.loads(out.stdout)


def test_no_import_cycle_between_modules():
    """No two rankwise modules import each other, directly or round a longer loop, even lazily.

    The layers contract sees packages only: ``metrics.evaluate -> metrics.trec -> metrics.evaluate``
    stays inside ``metrics`` and is invisible to it; this check is file by file.
    """
    cycles = _import_cycles("rankwise", SRC)
    assert not cycles, "import cycles between rankwise modules:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_an_import_cycle_inside_a_function_is_caught(tmp_path):
    """The check can fail: a.py imports b at module level, b.py imports a inside a function."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import g\n\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from cyc.a import f  # noqa\n\n    return 2\n")
    (pkg / "c.py").write_text("def h():\n    from cyc.c import h as again  # noqa\n\n    return again\n")
    assert _import_cycles("cyc", tmp_path) == [["cyc.a", "cyc.b", "cyc.a"]]
