"""Issue 29: a folder save (``RankingDataset.save``, the parsed-data cache) is atomic.

``rankwise._io.atomic_folder`` writes the new folder beside the target and swaps it in
(``renameat2(RENAME_EXCHANGE)``, or where that is missing two renames through a backup name):

* a full disk (``ENOSPC`` from ``write`` or from ``fsync``) during a save over an existing folder
  is one :class:`~rankwise.errors.WriteError` naming the path; the previous folder stays byte for
  byte and loads; nothing is left under a temporary name;
* a save killed (SIGKILL, at random moments, in a child process) leaves the old folder or the new
  one, never a mix, with either swap; what a killed writer left is recovered or removed by name
  by the next load or save;
* a folder holding the user's own files is never replaced.
"""
from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rankwise._io as rio
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError, WriteError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import faults  # noqa: E402

SWAPS = ["exchange", "two renames"]


def _ds(n, seed, sparse=False):
    ds = make_synthetic(n, n_features=6, max_len=25, seed=seed)
    if sparse:
        import scipy.sparse as sp

        ds = RankingDataset.from_arrays(sp.csr_matrix(ds.X), ds.labels, ds.qid)
    return ds


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if rio.is_temp_name(p.name))


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


@pytest.fixture(params=SWAPS)
def swap(request, monkeypatch):
    if request.param == "two renames":
        monkeypatch.setattr(rio, "_exchange", lambda a, b: False)
    return request.param


def test_the_exchange_is_used_where_linux_offers_it(tmp_path):
    """On this Linux the one-step swap is what runs (else the two-renames tests are the only ones)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "y").write_text("b")
    if not rio._exchange(a, b):
        pytest.skip("this file system does not offer RENAME_EXCHANGE")
    assert (a / "y").exists() and (b / "x").exists()


@pytest.mark.parametrize("fail_in", ["write", "fsync"])
@pytest.mark.parametrize("sparse", [False, True])
def test_full_disk_keeps_the_previous_folder_identical_and_loadable(tmp_path, monkeypatch, swap, fail_in, sparse):
    target = tmp_path / "ds"
    old, new = _ds(3, 0, sparse), _ds(40, 1, sparse)
    old.save(target)
    before = _snapshot(target)
    calls = []

    def no_space(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2:  # two files made it, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    if fail_in == "write":
        real = np.save
        monkeypatch.setattr(np, "save", no_space)
    else:
        real = os.fsync
        monkeypatch.setattr(rio.os, "fsync", no_space)
    with pytest.raises(WriteError) as info:
        new.save(target)
    monkeypatch.undo()
    message = str(info.value)
    assert f"cannot save to {target}" in message and "No space left on device [ENOSPC]" in message, message
    assert rio.TEMP_MARK not in message and rio.OLD_MARK not in message
    assert info.value.errno == errno.ENOSPC and info.value.filename.startswith(str(target))
    assert _snapshot(target) == before
    back = RankingDataset.load(target)
    np.testing.assert_array_equal(back.labels, old.labels)
    assert _leftovers(tmp_path) == []
    new.save(target)  # and the disk, freed, takes the new save
    np.testing.assert_array_equal(RankingDataset.load(target).labels, new.labels)
    assert _leftovers(tmp_path) == []


def test_a_failing_swap_keeps_the_previous_folder(tmp_path, monkeypatch):
    """The last step (two renames) fails: the backup is put back under the name."""
    target = tmp_path / "ds"
    _ds(3, 0).save(target)
    before = _snapshot(target)
    monkeypatch.setattr(rio, "_exchange", lambda a, b: False)
    real_rename = os.rename

    def rename(src, dst):
        if rio.TEMP_MARK in str(src) and Path(dst) == target and not os.path.lexists(target):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_rename(src, dst)

    monkeypatch.setattr(rio.os, "rename", rename)
    with pytest.raises(WriteError, match=rf"cannot save to {target}: Input/output error"):
        _ds(40, 1).save(target)
    monkeypatch.undo()
    assert _snapshot(target) == before and _leftovers(tmp_path) == []


def _killed_mid_swap(tmp_path: Path, after_first_rename: bool) -> tuple[Path, dict, dict]:
    """The state a writer killed between the steps of the two-renames swap leaves."""
    target = tmp_path / "ds"
    old, new = _ds(3, 0), _ds(40, 1)
    old.save(target)
    new.save(tmp_path / "new")
    before, after = _snapshot(target), _snapshot(tmp_path / "new")
    pid = _dead_pid()
    tmp = tmp_path / f".ds{rio.TEMP_MARK}{pid}-abc123"
    os.rename(tmp_path / "new", tmp)
    if after_first_rename:  # old -> backup done, new -> name not yet: the name is empty
        os.rename(target, tmp_path / f".ds{rio.OLD_MARK}{pid}-def456")
    return target, before, after


@pytest.mark.parametrize("after_first_rename", [False, True])
def test_the_next_load_recovers_what_a_killed_swap_left(tmp_path, after_first_rename):
    target, before, _ = _killed_mid_swap(tmp_path, after_first_rename)
    assert os.path.lexists(target) is not after_first_rename
    back = RankingDataset.load(target)
    assert _snapshot(target) == before and len(back) == len(_ds(3, 0))
    if after_first_rename:
        assert _leftovers(tmp_path) == []  # the load tidied the name it needed
    RankingDataset.load(target)


@pytest.mark.parametrize("after_first_rename", [False, True])
def test_the_next_save_recovers_then_replaces(tmp_path, swap, after_first_rename):
    target, _, after = _killed_mid_swap(tmp_path, after_first_rename)
    _ds(40, 1).save(target)
    assert _snapshot(target) == after and _leftovers(tmp_path) == []


def test_a_live_writers_temporaries_are_left_alone(tmp_path):
    target = tmp_path / "ds"
    live = tmp_path / f".ds{rio.TEMP_MARK}{os.getpid()}-live00"
    live.mkdir()
    _ds(3, 0).save(target)
    assert live.exists()


def test_a_folder_of_other_files_is_never_replaced(tmp_path):
    target = tmp_path / "results"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"results: the folder holds files that are not a saved RankingDataset "
                                         r"\(notes.txt\)"):
        _ds(3, 0).save(target)
    assert (target / "notes.txt").read_text() == "mine" and _leftovers(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="it is a file, not a folder"):
        _ds(3, 0).save(tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _ds(3, 0).save(empty)  # an empty folder (e.g. made by mkdtemp) is fine
    assert RankingDataset.load(empty).n_queries == 3


def test_a_saved_folder_has_a_plain_folders_permissions(tmp_path):
    _ds(3, 0).save(tmp_path / "ds")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert (tmp_path / "ds").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # not mkdtemp's 0700


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("name", ["RankingDataset.save", "RankingDataset.save (two renames)"])
def test_a_killed_folder_save_leaves_old_or_new_never_a_mix(tmp_path, name):
    row = faults.kill_trials(name, 4, 0.15, random.Random(3), tmp_path)
    assert row["trials"] == 4
    assert row["old"] + row["new"] == 4, row  # before: 'refused' (a folder without meta.json) for most kills
    assert row["refused"] == row["torn"] == row["torn_accepted"] == row["temps_after"] == 0, row


def test_full_disk_on_a_real_small_tmpfs(swap):
    """A 64 KiB tmpfs (where the tests may mount one): the new save does not fit beside the old."""
    with faults.small_tmpfs(64) as disk:
        if disk is None:
            pytest.skip("mounting a 64 KiB tmpfs needs root; the ENOSPC tests above cover the same path")
        target = disk / "ds"
        _ds(3, 0).save(target)
        before = _snapshot(target)
        with pytest.raises(WriteError, match=rf"cannot save to {target}\S*: No space left on device \[ENOSPC\]"):
            _ds(400, 1).save(target)
        assert _snapshot(target) == before and len(RankingDataset.load(target)) == len(_ds(3, 0))
        assert _leftovers(disk) == []
