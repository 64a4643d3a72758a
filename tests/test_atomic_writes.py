"""Issue 29: every writer goes through rankwise._io.atomic_write; a full disk is one clear error.

* the helper: the old file or the whole new one under the target name, never a prefix; the
  temporary file removed on any exception; its permissions those of a plain ``open``; a killed
  writer's temporary file removed by the next write to the same target (and only that one);
* every writer (TREC run and qrels, SVMlight three ways, Parquet, a data-set folder, a model,
  a checkpoint, a report, a plot, the CLI's scores, a feature log) on a full disk -- simulated by
  ``ENOSPC`` from ``fsync`` everywhere, and for real on a 64 KiB tmpfs where the tests may mount
  one (root) -- raises :class:`~rankwise.errors.WriteError` naming the target, leaves the previous
  file as it was and nothing under a temporary name;
* readers refuse torn TREC and SVMlight files with ``path:line`` (``allow_truncated=True`` reads
  them), and a file write_svmlight wrote is checked whole against its trailer.
"""
from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rankwise._io as rio
from rankwise.data import (RankingDataset, make_synthetic, read_svmlight, read_trec_qrels, read_trec_run,
                           write_parquet, write_svmlight, write_trec_qrels, write_trec_run)
from rankwise.errors import InputError, ParseError, WriteError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import faults  # noqa: E402  (the fault-injection suite: its small tmpfs)


def _ds(n=6, seed=0):
    return make_synthetic(n, n_features=5, max_len=20, seed=seed)


def _temps(folder: Path):
    return [p for p in Path(folder).rglob("*") if rio.is_temp_name(p.name)]


# ------------------------------------------------------------------ the helper

def test_atomic_write_replaces_whole_and_keeps_mode(tmp_path):
    target = tmp_path / "f.txt"
    with rio.atomic_write(target, "w") as fh:
        fh.write("one\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert target.read_text() == "one\n"
    assert target.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # not mkstemp's 0600
    target.chmod(0o640)
    with rio.atomic_write(target) as fh:
        fh.write(b"two\n")
    assert target.read_bytes() == b"two\n" and target.stat().st_mode & 0o777 == 0o640
    assert _temps(tmp_path) == []


def test_exception_inside_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    with pytest.raises(KeyError):
        with rio.atomic_write(target, "w") as fh:
            fh.write("new, half written")
            raise KeyError("boom")
    assert target.read_text() == "old\n" and _temps(tmp_path) == []


def test_a_killed_writers_temp_is_removed_by_the_next_write_and_only_that(tmp_path):
    target = tmp_path / "run.txt"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stray = tmp_path / f".run.txt{rio.TEMP_MARK}{dead}-abc123"  # a SIGKILLed writer's leftover
    live = tmp_path / f".run.txt{rio.TEMP_MARK}{os.getpid()}-live99"  # a writer of this process, still going
    other = tmp_path / f".other.txt{rio.TEMP_MARK}{dead}-abc123"  # another target's: not this write's business
    for p in (stray, live, other):
        p.write_text("partial")
    assert rio.is_temp_name(stray.name) and not rio.is_temp_name("run.txt")
    with rio.atomic_write(target, "w") as fh:
        fh.write("x\n")
    assert not stray.exists() and live.exists() and other.exists()


@pytest.mark.parametrize("bad", ["missing/dir/f.txt", "."])
def test_bad_targets_are_input_errors(tmp_path, bad):
    with pytest.raises(InputError, match="cannot save to"):
        with rio.atomic_write(tmp_path / bad):
            pass


# ------------------------------------------------------------------ every writer on a full disk

def _writers():
    """(name, write(path, version), suffix): every public writer of rankwise."""
    import rankwise
    from rankwise.models import LinearRanker

    def run(path, v):
        rng = np.random.default_rng(v)
        write_trec_run({f"q{q}": {f"d{d}": float(rng.normal()) for d in range(40 + 400 * v)} for q in range(5)}, path)

    def qrels(path, v):
        write_trec_qrels({f"q{q}": {f"d{d}": d % 3 for d in range(40 + 400 * v)} for q in range(5)}, path)

    def model(path, v):
        ds = _ds(4 + 40 * v, seed=v)
        LinearRanker(max_iter=2 + v).fit(ds).save(path)

    def checkpoint(path, v):
        from rankwise.models import persistence

        m = LinearRanker(max_iter=2).fit(_ds(4))
        persistence.save_checkpoint(m, path, {"epoch": v}, {"big": np.zeros(10 + 20000 * v)})

    def report(folder, v):
        from rankwise.metrics import evaluate
        from rankwise.report.markdown import write_report

        ds = _ds(8)
        res = {f"r{k}": evaluate(np.random.default_rng(k).normal(size=len(ds)), ds.labels, ds.qid,
                                 metrics=["ndcg@10"]) for k in range(2)}
        write_report(res, folder, metrics=["ndcg@10"], title="t" * (10 + 100000 * v))

    def plot(path, v):
        from rankwise.report.plots import plot_learning_curves

        plot_learning_curves({"a": {"loss": list(np.linspace(1, 0, 10 + 1000 * v))}}, path)

    def cli_scores(path, v):
        from rankwise.cli.main import main

        m, data = Path(str(path) + ".model.npz"), Path(str(path) + ".data.txt")
        if v == 0:
            LinearRanker(max_iter=2).fit(_ds(4)).save(m)
            write_svmlight(_ds(40), data)
        return main(["predict", str(m), str(data), "--out", str(path)])

    def feature_log(path, v):
        from rankwise.data.feature_logs import write_feature_log

        ds = _ds(4 + 40 * v)
        write_feature_log(path, "opensearch", ds.X, ds.qid, doc_ids=[f"doc{i}" for i in range(len(ds))])

    return [
        ("write_trec_run", run, ".txt"), ("write_trec_qrels", qrels, ".txt"),
        ("write_svmlight", lambda p, v: write_svmlight(_ds(3 + 60 * v), p), ".txt"),
        ("write_svmlight .gz", lambda p, v: write_svmlight(_ds(3 + 60 * v), p), ".txt.gz"),
        ("write_svmlight decimals", lambda p, v: write_svmlight(
            RankingDataset.from_arrays(_ds(3 + 60 * v).X, np.round(_ds(3 + 60 * v).labels), _ds(3 + 60 * v).qid),
            p, decimals=6), ".txt"),
        ("write_parquet", lambda p, v: write_parquet(_ds(3 + 60 * v), p), ".parquet"),
        ("model.save", model, ".npz"), ("checkpoint", checkpoint, ".npz"),
        ("write_report", report, "/report.md"), ("plot", plot, ".png"),
        ("rankwise predict --out", cli_scores, ".scores"), ("write_feature_log", feature_log, ".json"),
    ]


WRITERS = _writers()


def _target(folder: Path, suffix: str) -> tuple[Path, Path]:
    """(what the writer is given, the file whose old bytes must survive)."""
    if suffix.startswith("/"):  # a folder writer: the file inside it
        return folder / "out", folder / "out" / suffix[1:]
    return folder / f"target{suffix}", folder / f"target{suffix}"


@pytest.mark.parametrize("name,write,suffix", WRITERS, ids=[w[0] for w in WRITERS])
def test_full_disk_is_one_clear_error_and_the_previous_file_stays(tmp_path, monkeypatch, name, write, suffix):
    given, target = _target(tmp_path, suffix)
    write(given, 0)
    before = target.read_bytes()

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rio.os, "fsync", no_space)
    if name == "rankwise predict --out":  # the CLI: exit 2 and the message, no traceback
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert write(given, 1) == 2
        message = err.getvalue()
    else:
        with pytest.raises(WriteError) as info:
            write(given, 1)
        message = str(info.value)
        assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    # a report names the file of its folder that could not be written (its first plot here)
    where = re.escape(str(given) + "/") + r"\S+" if suffix.startswith("/") else re.escape(str(target))
    assert re.search(f"cannot save to {where}: No space left on device \\[ENOSPC\\]", message), message
    assert rio.TEMP_MARK not in message
    assert target.read_bytes() == before
    assert _temps(tmp_path) == []


def test_dataset_folder_on_a_full_disk_keeps_the_previous_folder(tmp_path, monkeypatch):
    """RankingDataset.save writes several files: a failed save leaves the previous folder as it was
    (the whole folder is swapped in; tests/faults/test_atomic_folder.py has the other cases)."""
    old, new = _ds(3), _ds(30, seed=1)
    old.save(tmp_path / "ds")
    before = {p.name: p.read_bytes() for p in (tmp_path / "ds").iterdir()}
    calls = []

    def fsync_then_fail(fd):  # the third file on: no space
        calls.append(fd)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rio.os, "fsync", fsync_then_fail)
    with pytest.raises(WriteError, match=rf"cannot save to {re.escape(str(tmp_path / 'ds'))}: No space left on device"):
        new.save(tmp_path / "ds")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in (tmp_path / "ds").iterdir()} == before
    np.testing.assert_array_equal(RankingDataset.load(tmp_path / "ds").X, old.X)
    assert _temps(tmp_path) == []
    new.save(tmp_path / "ds")
    np.testing.assert_array_equal(RankingDataset.load(tmp_path / "ds").X, new.X)


REAL_DISK = [w for w in WRITERS if w[0] in ("write_trec_run", "write_trec_qrels", "write_svmlight",
                                            "write_svmlight .gz", "write_parquet", "checkpoint")]


@pytest.mark.parametrize("name,write,suffix", REAL_DISK, ids=[w[0] for w in REAL_DISK])
def test_full_disk_on_a_real_small_tmpfs(name, write, suffix):
    with faults.small_tmpfs(64) as disk:
        if disk is None:
            pytest.skip("mounting a 64 KiB tmpfs needs root; the ENOSPC test above covers the same path")
        target = disk / f"target{suffix}"
        write(target, 0)
        before = target.read_bytes()
        with pytest.raises(WriteError, match=rf"cannot save to {target}: No space left on device"):
            write(target, 5)  # version 5: more than 64 KiB
        assert target.read_bytes() == before
        assert _temps(disk) == []


# ------------------------------------------------------------------ readers tell whole from torn

def test_torn_trec_files_are_refused_with_path_and_line(tmp_path):
    run, qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
    write_trec_run({"q1": {"d1": 0.5, "d2": 1.25e-3}, "q2": {"d3": 2.0}}, run)
    write_trec_qrels({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}, qrels)
    for path, read in ((run, read_trec_run), (qrels, read_trec_qrels)):
        whole = read(path)
        raw = path.read_bytes()
        path.write_bytes(raw[:-1])  # the last line without its line break
        with pytest.raises(ParseError, match=rf"{path.name}:3: the last line has no line break.*allow_truncated=True"):
            read(path)
        assert read(path, allow_truncated=True) == whole
        path.write_bytes(raw[:-7])  # cut inside the last score / grade
        with pytest.raises(ParseError, match=":3: "):
            read(path)


def test_svmlight_written_by_rankwise_is_checked_whole(tmp_path):
    ds = _ds(5)
    p = tmp_path / "d.txt"
    write_svmlight(ds, p)
    raw = p.read_bytes()
    lines = raw.splitlines(keepends=True)
    assert lines[0].startswith(b"# rankwise-svmlight 1") and lines[-1].startswith(b"# rankwise-svmlight end rows=")
    from sklearn.datasets import load_svmlight_file  # the comment lines are comments to other readers too

    assert load_svmlight_file(str(p), query_id=True)[0].shape[0] == len(ds)
    # cut at a line boundary: only the missing trailer tells
    p.write_bytes(b"".join(lines[:-3]))
    with pytest.raises(ParseError, match=rf"d.txt:{len(lines) - 3}: .*closing '# rankwise-svmlight end"):
        read_svmlight(p)
    assert len(read_svmlight(p, allow_truncated=True)) == len(ds) - 2
    # one value changed, same length: the digest tells
    p.write_bytes(raw.replace(b" 1:", b" 1:9", 1))
    with pytest.raises(ParseError, match=r"SHA-256 .* changed or damaged"):
        read_svmlight(p)
    # a file cut inside a line
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ParseError, match="no line break"):
        read_svmlight(p)
    # trailer=False: plain lines, for XGBoost / LightGBM text loaders
    write_svmlight(ds, p, trailer=False)
    assert b"rankwise" not in p.read_bytes()
    np.testing.assert_array_equal(read_svmlight(p, dense=True).X, np.asarray(ds.X, dtype=np.float32))
