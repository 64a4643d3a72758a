"""The trec_eval 10 binary, built from its C sources (``$TREC_EVAL_SRC``, else
``../shared/tools/trec_eval-10.0-src``, else ``tools/trec_eval-10.0-src`` beside
``$RANKWISE_DATA``) into a temporary folder once per session; the tests that need it skip with
a message where the sources, a C compiler or make are absent."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory) -> Path:
    src = Path(os.environ.get("TREC_EVAL_SRC", REPO.parent / "shared" / "tools" / "trec_eval-10.0-src"))
    if "TREC_EVAL_SRC" not in os.environ and not src.exists() and os.environ.get("RANKWISE_DATA"):
        src = Path(os.environ["RANKWISE_DATA"]).parent / "tools" / "trec_eval-10.0-src"  # a worktree elsewhere
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not (src / "Makefile").exists():
        pytest.skip(f"trec_eval 10 sources absent: expected {src} (or set TREC_EVAL_SRC or RANKWISE_DATA)")
    if cc is None or shutil.which("make") is None:
        pytest.skip("no C compiler or make found: the trec_eval binary cannot be built")
    work = tmp_path_factory.mktemp("trec_eval") / "src"
    shutil.copytree(src, work)
    done = subprocess.run(["make", "-s", f"CC={cc}"], cwd=work, capture_output=True, text=True)
    if done.returncode != 0 or not (work / "trec_eval").exists():
        pytest.skip(f"building trec_eval failed: {done.stderr.strip()[:200]}")
    return work / "trec_eval"
