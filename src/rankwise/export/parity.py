"""How the served scores compare with rankwise's own: the parity report of an export on a data set.

:func:`parity_report` scores the same rows with the model (``predict``) and with the target's
reference evaluator and reports, as measured:

- ``max_abs_diff`` = max |Δscore| and ``max_rel_diff`` = max |Δscore| / (max - min of the offline
  scores), after the export's declared constant offset (``shift``, a dropped intercept);
- ``identical_rankings``: the share of queries in which every pair of documents is ordered the same
  way (a tie on one side and not on the other counts as a difference); ``reordered`` lists the
  other queries with the widest offline score gap among their swapped pairs (a gap within
  float32 rounding is a near-tie the served precision cannot order);
- ``top10_equal``: the share of queries whose first ten documents (ties broken by row order) are
  the same documents in the same order;
- ``differing_rows``: each row whose |Δscore| exceeds ``rel_tol`` × the score range, with the
  reason -- an absent feature, a different leaf in a named tree (a decision that differs), or the
  float32 sum of the same leaves.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError

__all__ = ["ParityReport", "parity_report", "compare_scores"]


@dataclass
class ParityReport:
    n_rows: int
    n_queries: int
    max_abs_diff: float
    score_range: float
    max_rel_diff: float
    identical_rankings: float
    top10_equal: float
    rel_tol: float
    score_offset: float = 0.0
    differing_rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    reordered: list = field(default_factory=list)  # per query ranked differently: the widest offline gap swapped

    @property
    def passed(self) -> bool:
        """Scores within ``rel_tol`` × range and every query's ranking identical."""
        return self.max_rel_diff <= self.rel_tol and self.identical_rankings == 1.0

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("n_rows", "n_queries", "max_abs_diff", "score_range", "max_rel_diff",
                                              "identical_rankings", "top10_equal", "rel_tol", "score_offset",
                                              "differing_rows", "notes", "reordered")} | {"passed": self.passed}

    def __str__(self) -> str:
        lines = [f"rows {self.n_rows}, queries {self.n_queries}",
                 f"max |dscore|            {self.max_abs_diff:.3g} (score range {self.score_range:.6g})",
                 f"max |dscore| / range    {self.max_rel_diff:.3g} (tolerance {self.rel_tol:g})",
                 f"identical rankings      {self.identical_rankings:.2%} of queries",
                 f"top-10 equal            {self.top10_equal:.2%} of queries"]
        if self.score_offset:
            lines.append(f"declared score offset   {self.score_offset!r} (served = predict + offset)")
        for r in self.reordered[:5]:
            lines.append(f"  query {r['qid']} ranked differently: pairs swapped or tied with offline scores up to "
                         f"{r['max_gap']:.3g} apart")
        lines.append(f"rows beyond tolerance   {len(self.differing_rows)}")
        for r in self.differing_rows[:10]:
            lines.append(f"  row {r['row']} (qid {r['qid']}): {r['offline']!r} vs {r['served']!r}: {r['reason']}")
        lines += [f"note: {n}" for n in self.notes]
        lines.append("PASSED" if self.passed else "NOT PASSED")
        return "\n".join(lines)


def _pair_signs(s: np.ndarray) -> np.ndarray:
    return np.sign(s[:, None] - s[None, :])


def compare_scores(offline, served, qid, *, rel_tol: float = 1e-6, score_offset: float = 0.0, reasons=None,
                   notes=()) -> ParityReport:
    """The parity report of two score vectors over the same rows grouped by ``qid``.

    ``reasons(rows)`` (optional) explains the rows beyond tolerance, one string per row.
    """
    offline = np.asarray(offline, dtype=np.float64)
    served = np.asarray(served, dtype=np.float64)
    qid = np.asarray(qid)
    if not (offline.shape == served.shape == qid.shape) or offline.ndim != 1:
        raise InputError(f"offline, served, qid: expected three 1-d arrays of one length, got shapes "
                         f"{offline.shape}, {served.shape}, {qid.shape}")
    if not (np.all(np.isfinite(offline)) and np.all(np.isfinite(served))):
        raise InputError("offline/served scores: expected finite values, got NaN or inf")
    target = offline + score_offset
    diff = np.abs(served - target)
    rng = float(offline.max() - offline.min()) if len(offline) else 0.0
    max_abs = float(diff.max()) if len(diff) else 0.0
    max_rel = max_abs / rng if rng > 0 else (0.0 if max_abs == 0 else np.inf)
    same_rank = same_top = 0
    reordered = []
    groups = [np.flatnonzero(qid == q) for q in np.unique(qid)]
    for rows in groups:
        a, b = target[rows], served[rows]
        flipped = _pair_signs(a) != _pair_signs(b)
        if flipped.any():
            gap = np.abs(a[:, None] - a[None, :])[flipped].max()
            reordered.append({"qid": qid[rows[0]].item(), "max_gap": float(gap)})
        else:
            same_rank += 1
        ta = rows[np.lexsort((rows, -a))][:10]
        tb = rows[np.lexsort((rows, -b))][:10]
        same_top += bool(np.array_equal(ta, tb))
    bad = np.flatnonzero(diff > rel_tol * rng)
    why = reasons(bad) if (reasons is not None and len(bad)) else ["float32 arithmetic"] * len(bad)
    rows_out = [{"row": int(r), "qid": qid[r].item(), "offline": float(target[r]), "served": float(served[r]),
                 "diff": float(served[r] - target[r]), "reason": w} for r, w in zip(bad, why)]
    n_q = len(groups)
    return ParityReport(len(offline), n_q, max_abs, rng, float(max_rel), same_rank / n_q if n_q else 1.0,
                        same_top / n_q if n_q else 1.0, rel_tol, score_offset, rows_out, list(notes), reordered)


def parity_report(model, export, X, qid, *, rel_tol: float = 1e-6, missing: str = "branch") -> ParityReport:
    """Parity of an export (:class:`~rankwise.export.opensearch.OpenSearchExport`, or any export whose
    ``reference()`` has ``.score(X, missing=...)``) with ``model.predict``.

    ``X``: rows in the model's column order (which is the feature set's), NaN = feature absent.
    """
    X = np.asarray(X, dtype=np.float64)
    ref = export.reference()
    if getattr(export, "per_query", False):  # a list-dependent scorer: both sides score whole queries
        offline, served = model.predict(X, qid=qid), ref.score(X, qid=qid, missing=missing)
    else:
        offline, served = model.predict(X), ref.score(X, missing=missing)

    def reasons(rows):
        out = []
        leaves = None
        if ref.kind == "trees" and hasattr(model, "booster_"):
            from rankwise.export._trees import tree_ensemble

            ens = tree_ensemble(model)
            mine = ens.leaf_values(X[rows].astype(np.float32))
            theirs = ref.leaf_values(X[rows], missing=missing).astype(np.float64)
            start = 1 if ens.base_score != 0.0 else 0  # the exports put the base margin first, as a one-leaf tree
            leaves = (mine, theirs[:, start:start + len(ens.trees)])
        for i, r in enumerate(rows):
            absent = np.flatnonzero(np.isnan(X[r]))
            if leaves is not None:
                differs = np.flatnonzero(np.float32(leaves[0][i]) != np.float32(leaves[1][i]))
                if len(differs):
                    t = int(differs[0])
                    out.append(f"tree {t} reaches another leaf" + (f" (absent features {absent.tolist()})"
                                                                   if len(absent) else ""))
                    continue
                out.append("same leaves; float32 sum of the leaves")
                continue
            out.append(f"absent features {absent.tolist()}" if len(absent) else "float32 arithmetic")
        return out

    return compare_scores(offline, served, qid, rel_tol=rel_tol, score_offset=export.score_offset, reasons=reasons,
                          notes=export.notes)
