"""The quick subset of the fault-injection suite (benchmarks/faults.py; issue 29).

SIGKILL at random moments of two writers (a TREC run, an SVMlight file), three kills each: the
target is the old file or the whole new one, a killed writer's temporary file goes with the next
write. And the comparison the suite is built on: the same kills with atomic_write replaced by a
plain open leave torn files, which the SVMlight reader refuses (its trailer is missing).
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import faults  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


@pytest.mark.parametrize("name", ["write_trec_run", "write_svmlight"])
def test_killed_writer_leaves_old_or_new_never_torn(tmp_path, name):
    row = faults.kill_trials(name, 3, 0.15, random.Random(1), tmp_path)
    assert row["trials"] == 3
    assert row["old"] + row["new"] == 3, row
    assert row["torn"] == row["torn_accepted"] == 0 and row["temps_after"] == 0, row


def test_plain_open_writes_leave_torn_svmlight_that_the_reader_refuses(tmp_path):
    """Without atomic_write a kill mid-write leaves a prefix (how many: timing; the benchmark counts
    them): whatever it leaves, rankwise's SVMlight reader must not load a torn file."""
    row = faults.kill_trials("write_svmlight", 3, 0.15, random.Random(2), tmp_path, plain=True)
    assert row["old"] + row["new"] + row["torn"] == 3, row  # torn whenever a kill lands inside the write
    assert row["torn_accepted"] == 0, row  # ... and the reader refuses every torn file (no trailer)
