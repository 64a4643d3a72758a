"""numba kernel of run fusion (imported lazily by ``fusion.py``): the byte check that confirms
that the documents grouped by their 64-bit hash are the same ids."""
from __future__ import annotations

import numba as nb

from rankwise.data._trec_kernel import _cmp


@nb.njit(cache=True, nogil=True)
def same_ids(order, starts, buf, s, e):
    """True if, in every group ``order[starts[g]:starts[g + 1]]``, every span equals the first."""
    n = order.shape[0]
    for g in range(starts.shape[0]):
        end = starts[g + 1] if g + 1 < starts.shape[0] else n
        a = order[starts[g]]
        for i in range(starts[g] + 1, end):
            b = order[i]
            if _cmp(buf, s[a], e[a], buf, s[b], e[b]) != 0:
                return False
    return True
