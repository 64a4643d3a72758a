"""Run fusion written from the formulas, one document at a time (Fox & Shaw 1994; Aslam &
Montague 2001; Cormack et al. 2009), for the tests of ``rankwise.data.fusion``."""
from __future__ import annotations

import statistics

EPS = 1e-9


def trec_order(docs: dict) -> list:
    """Documents of one query as trec_eval ranks them: score descending, then docno descending."""
    return sorted(docs, key=lambda d: (-docs[d], [-b for b in d.encode()] + [1]))


def normalise(docs: dict, norm, n_candidates: int) -> dict:
    order = trec_order(docs)
    n = len(order)
    s = [docs[d] for d in order]
    if norm is None:
        return dict(docs)
    if norm == "min-max":
        lo, hi = min(s), max(s)
        return {d: (docs[d] - lo) / max(hi - lo, EPS) for d in docs}
    if norm == "max":
        return {d: docs[d] / max(max(s), EPS) for d in docs}
    if norm == "sum":
        lo = min(s)
        return {d: (docs[d] - lo) / max(sum(s) - lo * n, EPS) for d in docs}
    if norm == "zmuv":
        mean = sum(s) / n
        sd = (sum((x - mean) ** 2 for x in s) / n) ** 0.5
        return {d: (docs[d] - mean) / max(sd, EPS) for d in docs}
    if norm == "rank":
        return {d: 1 - i / n for i, d in enumerate(order)}
    if norm == "borda":
        return {d: 1 - i / n_candidates for i, d in enumerate(order)}
    raise ValueError(norm)


def fuse(runs: list, method: str, norm, k: float = 60, missing: str = "skip") -> dict:
    """``{qid: {docno: fused score}}`` over the union of the runs' queries and documents."""
    out = {}
    queries = list(dict.fromkeys(q for run in runs for q in run))
    for q in queries:
        per_run = [run.get(q, {}) for run in runs]
        candidates = list(dict.fromkeys(d for docs in per_run for d in docs))
        n_cand = len(candidates)
        if method == "rrf":
            values = [{d: 1 / (k + i + 1) for i, d in enumerate(trec_order(docs))} for docs in per_run]
        else:
            values = [normalise(docs, norm, n_cand) if docs else {} for docs in per_run]
        fused = {}
        for d in candidates:
            xs = []
            for docs, v in zip(per_run, values):
                if d in v:
                    xs.append(v[d])
                elif norm == "borda" and method != "rrf":  # the mean of the points the run left
                    xs.append(0.5 - (len(docs) - 1) / (2 * n_cand))
                elif missing == "zero":
                    xs.append(0.0)
            n_present = sum(d in v for v in values) if norm != "borda" or method == "rrf" else len(runs)
            if method in ("combsum", "rrf"):
                fused[d] = sum(xs)
            elif method == "combmnz":
                fused[d] = sum(xs) * n_present
            elif method == "combanz":
                fused[d] = sum(xs) / len(xs)
            elif method == "combmax":
                fused[d] = max(xs)
            elif method == "combmin":
                fused[d] = min(xs)
            elif method == "combmed":
                fused[d] = statistics.median(xs)
            else:
                raise ValueError(method)
        out[q] = fused
    return out
