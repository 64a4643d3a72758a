"""rankwise.distributed is optional: not imported by `import rankwise`, clear error without Dask."""
from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_rankwise_does_not_import_distributed_or_dask():
    r = _run("import sys, rankwise, rankwise.metrics, rankwise.data; "
             "print('rankwise.distributed' in sys.modules, 'dask' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_missing_dask_gives_install_hint():
    # make `import dask` fail in a fresh interpreter, then import rankwise.distributed
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'dask' or name.startswith('dask.') or name == 'distributed':\n"
            "            raise ImportError(f'No module named {name!r}')\n"
            "        return None\n"
            "sys.meta_path.insert(0, Block())\n"
            "try:\n"
            "    import rankwise.distributed\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert "pip install rankwise[dask]" in r.stdout
