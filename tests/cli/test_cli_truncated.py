"""``--allow-truncated`` (issue 29): a TREC run, qrels or SVMlight file cut short is refused by every
command that reads one, with ``path:line`` and the option to name; with the option it is read as
it is, and the command's output equals that of the whole file."""
from __future__ import annotations

import re

import numpy as np
import pytest

from rankwise.cli import main
from rankwise.data import make_synthetic, write_svmlight, write_trec_qrels, write_trec_run
from rankwise.models import LinearRanker


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("torn")
    rng = np.random.default_rng(7)
    qrels = {f"q{q}": {f"d{q}-{k}": int(k % 3) for k in range(12)} for q in range(6)}
    runs = [{q: {doc: float(rng.normal()) * 1e-3 for doc in docs} for q, docs in qrels.items()} for _ in range(2)]
    write_trec_qrels(qrels, d / "qrels.txt")
    for i, r in enumerate(runs):
        write_trec_run(r, d / f"run{i}.txt")
    ds = make_synthetic(12, n_features=6, list_length=(3, 9), seed=5)
    write_svmlight(ds, d / "data.txt")
    LinearRanker(max_iter=20).fit(ds).save(d / "model.npz")
    np.savetxt(d / "scores.txt", rng.normal(size=len(ds)))
    return d


def _torn(d, name, how):
    """A copy of ``name`` cut short: its last line break gone, or (SVMlight) its closing trailer line,
    which only the trailer's absence tells (the rows are all there: the outputs must then agree)."""
    raw = (d / name).read_bytes()
    cut = raw[:-1] if how == "newline" else b"".join(raw.splitlines(keepends=True)[:-1])
    out = d / f"torn-{how}-{name}"
    out.write_bytes(cut)
    return out, raw[:-1].count(b"\n") + 1


def _commands(d, torn, which):
    """Command lines reading the torn file in the place of ``which`` (run, qrels or data)."""
    run0, run1, qrels = d / "run0.txt", d / "run1.txt", d / "qrels.txt"
    if which == "run":
        run0 = torn
    if which == "qrels":
        qrels = torn
    if which in ("run", "qrels"):
        return [["evaluate", "--qrels", qrels, run0, "--metrics", "ndcg@10,map"],
                ["trec_eval", "-m", "map", "-m", "ndcg_cut.10", qrels, run0],
                ["compare", run0, run1, "--qrels", qrels, "--metrics", "map", "--resamples", "200",
                 "--names", "a,b"]] + \
            ([["fuse", run0, run1, "--out", d / f"fused-{torn.name}"]] if which == "run" else [])
    return [["evaluate", torn, "--scores", d / "scores.txt"],
            ["train", torn, "--out", d / f"m-{torn.name}.npz", "--param", "max_iter=3"],
            ["predict", d / "model.npz", torn, "--out", d / f"s-{torn.name}.txt"]]


CASES = [("run", "run0.txt", "newline"), ("qrels", "qrels.txt", "newline"), ("data", "data.txt", "newline"),
         ("data", "data.txt", "trailer")]


@pytest.mark.parametrize("which,name,how", CASES, ids=[f"{w}-{h}" for w, _, h in CASES])
def test_torn_inputs_are_refused_with_path_line_and_read_with_the_option(files, capsys, which, name, how):
    torn, line = _torn(files, name, how)
    for argv in _commands(files, torn, which):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "", (argv, err)
        where = rf"{re.escape(str(torn))}:{line if how == 'newline' else r'[0-9]+'}: "
        assert re.search(where, err) and "--allow-truncated" in err and "allow_truncated=" not in err, (argv, err)
        code, out_torn, err = run_cli(capsys, *argv, "--allow-truncated")
        assert code == 0, (argv, err)
        if argv[0] in ("evaluate", "trec_eval", "compare"):  # the same rows: the same numbers
            whole = [files / name if a == torn else a for a in argv]
            code, out_whole, _ = run_cli(capsys, *whole)
            assert code == 0 and out_torn.replace(torn.name, name) == out_whole, argv


def test_the_option_is_in_the_help_of_each_reading_command(capsys):
    for command in ("train", "predict", "evaluate", "compare", "report", "trec_eval", "fuse"):
        code, out, _ = run_cli(capsys, command, "--help")
        assert code == 0 and "--allow-truncated" in out, command
