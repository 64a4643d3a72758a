"""``grade_levels`` (compiled: a short sorted list per group, a sort beyond ``_FEW_GRADES`` distinct
grades) against ``np.unique`` per group, on groups as qrels have them and on hostile ones."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.data.trec import grade_levels


def _reference(offsets, grades):
    off, lv, cnt = [0], [], []
    for g in range(len(offsets) - 1):
        x = grades[offsets[g]:offsets[g + 1]]
        u, c = np.unique(x[x >= 0], return_counts=True)
        lv += u.tolist()
        cnt += c.tolist()
        off.append(len(lv))
    return off, lv, cnt


@pytest.mark.parametrize("seed", range(6))
def test_grade_levels_equal_np_unique_per_group(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 300, size=40)
    sizes[::7] = 0  # empty groups
    parts = []
    for i, size in enumerate(sizes):
        if i % 5 == 0:  # many distinct grades: past the sorted list, the sort
            parts.append(rng.integers(-3, 1_000_000, size=size))
        elif i % 5 == 1:  # exactly at the list's capacity and one past it
            parts.append(np.resize(np.arange(32 + i % 2), size)[rng.permutation(size)])
        elif i % 5 == 2:  # judged -1 only
            parts.append(np.full(size, -1))
        else:  # qrels-like: a few grades, mostly 0
            parts.append(rng.choice([-1, 0, 0, 0, 1, 2, 4], size=size))
    grades = np.concatenate(parts).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    off, lv, cnt = grade_levels(offsets, grades)
    assert (off.tolist(), lv.tolist(), cnt.tolist()) == _reference(offsets, grades)


def test_grade_levels_of_nothing():
    off, lv, cnt = grade_levels(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert off.tolist() == [0] and lv.tolist() == [] and cnt.tolist() == []
