"""Metric speed: rankwise.metrics vs ranx, pytrec_eval and a plain numpy floor, in one run.

Measures ndcg@10 + map + err@10 per query from flat arrays (qid, doc, score, label) on
(1) 10k queries x 100 documents and (2) an MSLR-WEB30K-like ragged set (31,531 queries,
lengths 1..1,300, ~3.8M rows), with ties="input" and ties="average".

* ranx end to end: arrays -> string ids -> DataFrames -> Qrels/Run -> evaluate (JIT warm);
  ranx scoring alone: evaluate() on prebuilt Qrels/Run, JIT warm. ranx has no ERR, so ranx
  computes ndcg@10 + map while rankwise computes ndcg@10 + map + err@10.
* pytrec_eval end to end: arrays -> nested dicts -> RelevanceEvaluator -> evaluate
  (ndcg_cut_10 + map; trec_eval has no ERR either), best of 3 like rankwise. Two rankwise
  figures face it: the full ndcg@10 + map + err@10 (more work than pytrec_eval does: the goal
  is judged on this one) and the same two measures under the same conventions
  (``profile="trec_eval"``: linear gain, ties by docno; checked equal to pytrec_eval's values).
* numpy floor: one lexsort by (qid, -score) and segment sums for ndcg@10 + map (input ties).
* rankwise first call measured in fresh processes (the kernels are compiled at install; the old
  numba build compiled them here), with an empty and with a filled ``NUMBA_CACHE_DIR`` (no difference
  expected now: the check that nothing is JIT-compiled).
* peak memory: peak RSS of a fresh process that builds the data and runs one tool, minus the
  peak of one that only builds the data.

Usage: python benchmarks/bench_metrics.py [--quick]
Writes benchmarks/results/bench_metrics.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
METRICS = ["ndcg@10", "map", "err@10"]


# ----------------------------------------------------------------------------- data

def make_data(name: str, quick: bool = False):
    rng = np.random.default_rng(0)
    if name == "uniform":
        nq = 2_000 if quick else 10_000
        sizes = np.full(nq, 100)
    else:  # MSLR-WEB30K-like: 31,531 queries, mean ~120 docs, max ~1,300
        nq = 6_000 if quick else 31_531
        sizes = np.clip(np.round(rng.lognormal(4.45, 0.75, nq)), 1, 1300).astype(np.int64)
    n = int(sizes.sum())
    qid = np.repeat(np.arange(nq, dtype=np.int64), sizes)
    labels = rng.choice(5, size=n, p=[0.514, 0.325, 0.134, 0.019, 0.008]).astype(np.float64)
    scores = 0.4 * labels + rng.normal(size=n)
    docs = np.arange(n, dtype=np.int64)
    return qid, docs, scores, labels


# ----------------------------------------------------------------------------- tools

def run_rankwise(qid, docs, scores, labels, ties):
    import rankwise.metrics as M
    return M.evaluate(scores, labels, qid, METRICS, ties=ties, max_grade=4).per_query


def ranx_build(qid, docs, scores, labels):
    import pandas as pd
    from ranx import Qrels, Run
    q = qid.astype(str).astype(object)  # ranx requires object (str) columns
    d = docs.astype(str).astype(object)
    q = pd.Series(q, dtype=object)  # pandas >= 3 would infer its "str" dtype, which ranx rejects
    d = pd.Series(d, dtype=object)
    qrels = Qrels.from_df(pd.DataFrame({"q_id": q, "doc_id": d, "score": labels.astype(np.int64)}))
    run = Run.from_df(pd.DataFrame({"q_id": q, "doc_id": d, "score": scores}))
    return qrels, run


def ranx_score(qrels, run):
    from ranx import evaluate
    return evaluate(qrels, run, ["ndcg@10", "map"], return_mean=False, make_comparable=False)


def run_ranx(qid, docs, scores, labels):
    return ranx_score(*ranx_build(qid, docs, scores, labels))


def run_pytrec(qid, docs, scores, labels):
    import pytrec_eval
    qrel, run = {}, {}
    qs, ds = qid.astype(str).tolist(), docs.astype(str).tolist()
    for q, d, y, s in zip(qs, ds, labels.astype(int).tolist(), scores.tolist()):
        qrel.setdefault(q, {})[d] = y
        run.setdefault(q, {})[d] = s
    return pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut_10", "map"}).evaluate(run)


def run_rankwise_trec(qid, docs, scores, labels):
    """What pytrec_eval computes (ndcg_cut_10, map) under its conventions."""
    import rankwise.metrics as M
    return M.evaluate(scores, labels, qid, ["ndcg@10", "map"], profile="trec_eval", doc_ids=docs).per_query


def numpy_floor(qid, docs, scores, labels):
    """ndcg@10 (exp2 gain) + map (label >= 1) with one lexsort and segment sums."""
    n = len(qid)
    order = np.lexsort((-scores, qid))
    q = qid[order]
    y = labels[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    sizes = np.diff(np.r_[starts, n])
    pos = np.arange(n) - np.repeat(starts, sizes)  # 0-based position within query
    disc = np.where(pos < 10, 1.0 / np.log2(pos + 2.0), 0.0)
    gain = np.exp2(y) - 1.0
    dcg = np.add.reduceat(gain * disc, starts)
    ideal_order = np.lexsort((-labels, qid))
    idcg = np.add.reduceat((np.exp2(labels[ideal_order]) - 1.0) * disc, starts)
    ndcg = np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)
    rel = (y >= 1).astype(np.float64)
    csum = np.cumsum(rel)
    before = np.repeat(np.r_[0.0, csum[starts[1:] - 1]], sizes)
    prec = (csum - before) / (pos + 1.0)
    R = np.add.reduceat(rel, starts)
    ap = np.divide(np.add.reduceat(prec * rel, starts), R, out=np.zeros_like(R), where=R > 0)
    return ndcg, ap


# ----------------------------------------------------------------------------- helpers

def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def child(tool: str, dataset: str, quick: bool):
    """Run in a fresh process: print JSON with peak RSS (MiB) and timings."""
    data = make_data(dataset, quick)
    base = _reset_peak()
    out = {"base_mib": base}
    if tool == "jit":
        t0 = time.perf_counter()
        import rankwise.metrics as M
        out["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        M.evaluate(data[2][:1000], data[3][:1000], data[0][:1000], METRICS, ties="average")
        out["first_call_s"] = time.perf_counter() - t0
    elif tool == "rankwise":
        run_rankwise(*data, "average")
    elif tool == "ranx":
        run_ranx(*data)
    elif tool == "pytrec_eval":
        run_pytrec(*data)
    elif tool == "numpy":
        numpy_floor(*data)
    out["peak_mib"] = _status_mib("VmHWM")
    print(json.dumps(out))


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> float:
    """Reset the peak-RSS mark (Linux clear_refs 5) after building the data; return current RSS."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status_mib("VmRSS")


def spawn(tool, dataset, quick, env=None):
    cmd = [sys.executable, __file__, "--child", tool, "--dataset", dataset] + (["--quick"] if quick else [])
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller data sets")
    ap.add_argument("--child", default=None)
    ap.add_argument("--dataset", default="uniform")
    ap.add_argument("--no-pytrec-ragged", action="store_true", help="skip pytrec_eval on the ragged set")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.dataset, args.quick)
        return 0

    import rankwise.metrics as M
    from rankwise.metrics import _kernels as K

    # warm every JIT (rankwise and ranx) on a small input first: end-to-end timings exclude compilation
    small = make_data("uniform", quick=True)
    small = tuple(a[:5000] for a in small)
    for t in ("input", "average"):
        run_rankwise(*small, t)
    run_rankwise_trec(*small)
    run_ranx(*small)

    # first call in fresh processes, cold (empty JIT cache folder) and again
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold = spawn("jit", "uniform", True, env)
    warm = spawn("jit", "uniform", True)

    rows, mem_rows, checks = [], [], []
    for dataset in ("uniform", "ragged"):
        data = make_data(dataset, args.quick)
        qid, docs, scores, labels = data
        nq, n = len(np.unique(qid)), len(qid)
        label = f"{'10k' if not args.quick else '2k'} queries x 100" if dataset == "uniform" else \
            f"MSLR-like ragged ({nq:,} queries, max list {np.bincount(qid).max():,})"
        t_floor = best_of(lambda: numpy_floor(*data), 3)
        ours = {t: best_of(lambda t=t: run_rankwise(*data, t), 3) for t in ("input", "average")}
        ours_2 = best_of(lambda: M.evaluate(scores, labels, qid, ["ndcg@10", "map"], ties="input"), 3)
        ours_trec = best_of(lambda: run_rankwise_trec(*data), 3)
        t_build = best_of(lambda: ranx_build(*data), 2)
        qrels, run = ranx_build(*data)
        t_score = best_of(lambda: ranx_score(qrels, run), 2)
        t_ranx = t_build + t_score
        skip_trec = dataset == "ragged" and args.no_pytrec_ragged
        t_trec = None if skip_trec else best_of(lambda: run_pytrec(*data), 3)
        if not skip_trec:  # same measures, same conventions: the values agree
            peer = run_pytrec(*data)
            mine_t = run_rankwise_trec(*data)
            checks.append(max(
                max(abs(peer[str(q)]["ndcg_cut_10"] - v) for q, v in zip(mine_t.index, mine_t["ndcg@10"])),
                max(abs(peer[str(q)]["map"] - v) for q, v in zip(mine_t.index, mine_t["map"]))))
            del peer, mine_t
        # correctness on the way: ranx ndcg@10 (linear gain) and map equal ours under the ranx profile
        r = ranx_score(qrels, run)
        mine = M.evaluate(scores, labels, qid, ["ndcg@10", "map"], profile="ranx").per_query
        mine = mine.loc[[int(k) for k in run.keys()]]  # ranx orders queries by id string
        checks.append(max(float(np.abs(mine["ndcg@10"].to_numpy() - r["ndcg@10"]).max()),
                          float(np.abs(mine["map"].to_numpy() - r["map"]).max())))
        fl_ndcg, fl_map = numpy_floor(*data)
        mine_in = M.evaluate(scores, labels, qid, ["ndcg@10", "map"], ties="input").per_query
        checks.append(max(float(np.abs(mine_in["ndcg@10"].to_numpy() - fl_ndcg).max()),
                          float(np.abs(mine_in["map"].to_numpy() - fl_map).max())))
        for t in ("input", "average"):
            rows.append({
                "data": label, "rows": n, "ties": t, "rankwise_s": ours[t],
                "ranx_e2e_s": t_ranx, "ranx_score_s": t_score, "pytrec_s": t_trec,
                "numpy_s": t_floor, "rankwise_2_s": ours_2, "rankwise_trec_s": ours_trec,
            })
        print(rows[-2], rows[-1], flush=True)
        for tool in ("rankwise", "ranx", "numpy") + (() if skip_trec else ("pytrec_eval",)):
            m = spawn(tool, dataset, args.quick)
            mem_rows.append((label, tool, m["peak_mib"] - m["base_mib"]))
        del data, qrels, run

    lines = ["## Metrics: rankwise.metrics vs ranx, pytrec_eval and a numpy floor", "",
             f"`python benchmarks/bench_metrics.py{' --quick' if args.quick else ''}` on {platform.node()} "
             f"({os.cpu_count()} cores, shared with other jobs; Python {platform.python_version()}; "
             f"numpy {np.__version__}). Wall-clock, best of 3 (ranx: best of 2), every ratio taken from "
             "timings of this one run. rankwise computes ndcg@10 + map + err@10; ranx and pytrec_eval have "
             "no ERR and compute ndcg@10 + map only (so the ratios below favour the peers); the numpy floor "
             "computes ndcg@10 + map with input-order ties. Ratios are peer time / rankwise time (> 1: "
             f"rankwise faster). rankwise sorts and scores inputs of {K.PARALLEL_MIN_ROWS:,} rows or more on "
             f"{K.n_threads(10**9)} threads (kernel_threads; query ranges in parallel), ranx on numba's threads,"
             " pytrec_eval and the numpy floor on one.", "",
             "| data | rows | ties | rankwise (s) | ranx end-to-end (s) | ratio | ranx scoring only (s) | ratio "
             "| pytrec_eval end-to-end (s) | ratio | numpy floor (s) | ratio |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ours = r["rankwise_s"]
        trec = "—" if r["pytrec_s"] is None else f"{r['pytrec_s']:.2f}"
        trec_ratio = "—" if r["pytrec_s"] is None else f"{r['pytrec_s'] / ours:.1f}×"
        lines.append(
            f"| {r['data']} | {r['rows']:,} | {r['ties']} | {ours:.3f} | {r['ranx_e2e_s']:.2f} | "
            f"{r['ranx_e2e_s'] / ours:.1f}× | {r['ranx_score_s']:.3f} | {r['ranx_score_s'] / ours:.1f}× | "
            f"{trec} | {trec_ratio} | {r['numpy_s']:.3f} | {r['numpy_s'] / ours:.2f}× |")
    lines += ["", "Same-work comparison (ndcg@10 + map only, ties=\"input\"): "
              + "; ".join(f"{r['data']}: rankwise {r['rankwise_2_s']:.3f} s, ranx scoring "
                          f"{r['ranx_score_s'] / r['rankwise_2_s']:.1f}×, numpy floor {r['numpy_s'] / r['rankwise_2_s']:.2f}×"
                          for r in rows if r["ties"] == "input") + ".", "",
              "Same measures and conventions as pytrec_eval (ndcg_cut_10 + map, `profile=\"trec_eval\"`: "
              "linear gain, ties by docno, doc ids passed): "
              + "; ".join(f"{r['data']}: rankwise {r['rankwise_trec_s']:.3f} s, pytrec_eval "
                          + ("—" if r["pytrec_s"] is None else f"{r['pytrec_s'] / r['rankwise_trec_s']:.1f}×")
                          for r in rows if r["ties"] == "input") + ".", "",
              "### Goals (from the numbers above; a goal is met when every row reaches it)", "",
              "| comparison | goal | measured (lowest row … highest) | |", "|---|---:|---|---|"]
    goals = [("rankwise vs ranx end to end", 10.0, [r["ranx_e2e_s"] / r["rankwise_s"] for r in rows]),
             ("rankwise vs ranx scoring only (Qrels/Run built, JIT warm)", 3.0,
              [r["ranx_score_s"] / r["rankwise_s"] for r in rows]),
             ("rankwise (ndcg@10 + map + err@10) vs pytrec_eval (ndcg_cut_10 + map) end to end", 30.0,
              [r["pytrec_s"] / r["rankwise_s"] for r in rows if r["pytrec_s"] is not None])]
    for name, goal, ratios in goals:
        if not ratios:
            lines.append(f"| {name} | ≥ {goal:.0f}× | not measured | — |")
            continue
        met = min(ratios) >= goal
        lines.append(f"| {name} | ≥ {goal:.0f}× | {min(ratios):.1f}× … {max(ratios):.1f}× | "
                     f"{'met' if met else f'**not met** (lowest {min(ratios):.1f}×)'} |")
    lines += ["",
              f"First call, fresh process, 1,000 rows, ties=\"average\": import {cold['import_s']:.2f} s, "
              f"first evaluate() {cold['first_call_s']:.2f} s with an empty JIT cache folder; "
              f"{warm['first_call_s']:.2f} s in the next fresh process (the kernels are compiled at install).", "",
              "Peak memory above the data (peak RSS of a fresh process while running one tool, minus its RSS "
              "just before, the peak mark reset after building the arrays):", "",
              "| data | tool | extra peak RSS (MiB) |", "|---|---|---:|"]
    lines += [f"| {d} | {t} | {m:.0f} |" for d, t, m in mem_rows]
    lines += ["", f"Cross-checks in the same run: max |rankwise(profile=ranx) − ranx|, max |rankwise − numpy floor| "
              f"and max |rankwise(profile=trec_eval) − pytrec_eval| over all per-query values = {max(checks):.1e}.", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_metrics.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
