"""``rankwise fuse`` and the significance options of ``rankwise compare``."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rankwise.cli import main
from rankwise.cli.fusion import METHODS_HELP
from rankwise.data import Run, write_trec_qrels, write_trec_run
from rankwise.data.fusion import FUSION_METHODS, fuse


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _runs(tmp_path, n_runs=3, n_queries=25):
    rng = np.random.default_rng(11)
    qrels, paths = {}, []
    runs = [{} for _ in range(n_runs)]
    for q in range(n_queries):
        docs = [f"doc{q}-{i}" for i in range(40)]
        rel = rng.integers(0, 3, 40)
        qrels[f"{301 + q}"] = dict(zip(docs, rel.tolist()))
        for r in range(n_runs):
            keep = rng.choice(40, size=int(rng.integers(15, 40)), replace=False)
            s = rel[keep] * (0.5 + r) + rng.normal(size=len(keep))
            runs[r][f"{301 + q}"] = {docs[i]: float(v) * 1e-3 ** (r == 1) for i, v in zip(keep, s)}
    write_trec_qrels(qrels, tmp_path / "qrels")
    for r, run in enumerate(runs):
        write_trec_run(run, tmp_path / f"run{r}")
        paths.append(str(tmp_path / f"run{r}"))
    return runs, paths


def test_methods_help_lists_every_method():
    assert [m.split()[0] for m in METHODS_HELP.split(", ")] == list(FUSION_METHODS)


@pytest.mark.parametrize("method,norm", [("rrf", "min-max"), ("combmnz", "zmuv"), ("combsum", "none")])
def test_fuse_writes_the_api_run(tmp_path, capsys, method, norm):
    runs, paths = _runs(tmp_path)
    out = tmp_path / "fused.run"
    code, _, err = run_cli(capsys, "fuse", *paths, "--method", method, "--norm", norm, "--depth", "30",
                           "--out", str(out))
    assert code == 0, err
    assert "3 runs fused" in err
    expected = fuse(runs, method=method, norm=None if norm == "none" else norm, depth=30)
    back = Run.read(out)
    assert back.to_dict() == expected.to_dict()
    assert back.tag == method


def test_fuse_errors_exit_2(tmp_path, capsys):
    _, paths = _runs(tmp_path)
    code, _, err = run_cli(capsys, "fuse", *paths, "--method", "borda", "--out", str(tmp_path / "f"))
    assert code == 2 and "method must be one of" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "fuse", paths[0], "--out", str(tmp_path / "f"))
    assert code == 2 and "at least 2 runs" in err
    code, _, err = run_cli(capsys, "fuse", *paths, "--method", "rrf", "--norm", "borda", "--out", str(tmp_path / "f"))
    assert code == 2 and "does not apply" in err


def test_fuse_subprocess(tmp_path):
    _, paths = _runs(tmp_path, n_queries=3)
    proc = subprocess.run([sys.executable, "-m", "rankwise", "fuse", *paths, "--method", "rrf", "--out",
                           str(tmp_path / "f.run")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "f.run").read_text().splitlines()[0].endswith(" rrf")


def test_compare_significance_options(tmp_path, capsys):
    _, paths = _runs(tmp_path)
    code, out, err = run_cli(capsys, "compare", *paths, "--qrels", str(tmp_path / "qrels"), "--metrics", "ndcg@10,map",
                             "--resamples", "20", "--correction", "bh", "--family", "metric", "--tukey",
                             "--effect-size", "--bootstrap", "500")
    assert code == 0, err
    assert "Benjamini-Hochberg-corrected per metric" in out
    for column in ("p_ttest_bh", "p_randomization_bh", "p_tukey_hsd", "effect_size", "ci_low", "ci_high"):
        assert column in out, column
    # 3 pairs per metric, 20 resamples: the floor 3/21 > alpha/10, said with the table
    assert "Note: the randomisation test's resolution floors" in out and "use at least 599 resamples" in out
    code, _, err = run_cli(capsys, "compare", *paths, "--qrels", str(tmp_path / "qrels"), "--correction", "fdr")
    assert code == 2 and "invalid choice" in err
