"""rankwise.distributed on a LocalCluster: 1 vs 2 workers against the single-machine functions.

Data: an MSLR-like synthetic set (136 features, MSLR label histogram and list lengths) of
>= 1M rows (``--quick``: ~250k), written as 8 query-grouped Parquet files; every setup reads
them back (the single-machine setup into numpy arrays, untimed; the Dask setups through
``rankwise.distributed.read_parquet``, timed inside the evaluation).

Each setup runs in its own fresh Python process, so that no setup's memory is counted in
another's. Per setup and phase:

* evaluation of ndcg@10 + map + err@10: ``rankwise.metrics.evaluate`` on in-memory arrays vs
  ``rankwise.distributed.evaluate`` on 1 and 2 workers (the means must be identical);
* one GBDT training (XGBoost ``hist``, rankwise ``listnet`` objective, 10 rounds, depth 6):
  ``GBDTRanker.fit`` (2 threads) vs ``rankwise.distributed.fit_gbdt`` on 1 and 2 workers;
  the trained model's NDCG@10 and its largest score difference to the single-machine model;
* peak RSS during the phase, of each worker process and of the client process (which also
  hosts the LocalCluster's scheduler): the kernel's high-water mark ``VmHWM`` from
  ``/proc/<pid>/status``, reset to the current RSS at the start of each phase by writing ``5``
  to ``/proc/<pid>/clear_refs`` (Linux >= 4.0). This is the exact peak, not a sample. (Not
  ``ru_maxrss``: a spawned worker inherits in it the RSS its parent had when it was forked.)

A second, smaller table repeats the GBDT training on the same rows with every feature quantised
to 32 levels: with at most ``max_bin`` distinct values per feature the histogram bins are the
distinct values themselves, whatever the number of workers, which isolates the one source of
difference between 1 and 2 workers (XGBoost merging per-worker quantile sketches).

This machine has 2 cores: 2 single-threaded workers on 2 cores is *not* a scaling test (the
client, scheduler and workers share the cores, and other jobs may be running: the load
average is recorded); the numbers show overhead and memory, not speed-up.

Usage: python benchmarks/bench_distributed.py [--quick]
Writes benchmarks/results/bench_distributed.md (``_quick`` suffix with --quick).
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
GBDT = dict(backend="xgboost", n_estimators=10, max_depth=6, random_state=0, verbose=False)
LEVELS = 32


# ----------------------------------------------------------------------------- memory (Linux /proc)

def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_mb() -> float:
    """Peak RSS of this process since it started or since the last :func:`reset_peak` (VmHWM)."""
    return _status_kib("VmHWM") / 1024.0


def rss_mb() -> float:
    return _status_kib("VmRSS") / 1024.0


def reset_peak() -> float:
    """Reset this process's VmHWM to its current RSS (``echo 5 > /proc/self/clear_refs``); return that RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return rss_mb()


def _warm_up():
    """Import the libraries and load the metric and loss kernels once, so no phase times them."""
    import rankwise.distributed  # noqa: F401
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    evaluate(np.array([0.3, 0.1, 0.2]), np.array([2.0, 0.0, 1.0]), np.array([1, 1, 1]), metrics=METRICS)
    rng = np.random.default_rng(0)
    GBDTRanker("listnet", backend="xgboost", n_estimators=1, n_jobs=1, verbose=False).fit(
        rng.normal(size=(20, 3)).astype(np.float32), rng.integers(0, 3, 20).astype(np.float64),
        qid=np.repeat([0, 1], 10))
    return True


# ----------------------------------------------------------------------------- one setup per process

def _load_arrays(data_dir: Path):
    import pyarrow.parquet as pq

    files = sorted(data_dir.glob("part*.parquet"))
    tables = [pq.read_table(f) for f in files]
    cols = tables[0].column_names
    feats = [c for c in cols if c.startswith("f")]
    import pyarrow as pa

    t = pa.concat_tables(tables)
    del tables
    X = np.column_stack([t.column(c).to_numpy() for c in feats]).astype(np.float32, copy=False)
    out = dict(X=X, label=t.column("label").to_numpy(), qid=t.column("qid").to_numpy(),
               score=t.column("score").to_numpy() if "score" in cols else None)
    del t
    pa.default_memory_pool().release_unused()  # give back what the Arrow allocator kept from the read
    return out


def run_single(data_dir: Path, with_eval: bool) -> dict:
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    _warm_up()
    d = _load_arrays(data_dir)
    out = {}
    if with_eval:
        out["rss_start_eval"] = reset_peak()
        t = time.perf_counter()
        res = evaluate(d["score"], d["label"], d["qid"], metrics=METRICS)
        out["eval_s"] = time.perf_counter() - t
        out["client_eval_peak"] = peak_mb()
        out["eval_means"] = {m: float(res.mean[m]) for m in METRICS}
    out["rss_start_fit"] = reset_peak()
    t = time.perf_counter()
    model = GBDTRanker("listnet", n_jobs=2, **GBDT).fit(d["X"], d["label"], qid=d["qid"])
    out["fit_s"] = time.perf_counter() - t
    out["client_fit_peak"] = peak_mb()
    pred = model.predict(d["X"])
    out["ndcg"] = float(evaluate(pred, d["label"], d["qid"], metrics=["ndcg@10"]).mean["ndcg@10"])
    return out, pred


def run_dask(data_dir: Path, n_workers: int, with_eval: bool) -> dict:
    from distributed import Client, LocalCluster

    import rankwise.distributed as rd
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    _warm_up()
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, memory_limit="8GiB")
    client = Client(cluster)
    out = {}
    try:
        client.run(_warm_up)
        workers = sorted(client.scheduler_info()["workers"])
        pattern = str(data_dir / "part*.parquet")

        def peaks():
            got = client.run(peak_mb)
            return [got[w] for w in workers]

        def reset_all():
            got = client.run(reset_peak)
            return [got[w] for w in workers]

        if with_eval:
            # evaluation reads only the three columns it needs (the whole-query regrouping of
            # rd.read_parquet stops Dask from pushing a later column selection into the read)
            t = time.perf_counter()
            scored = rd.read_parquet(pattern, columns=["qid", "score", "label"])  # + one pass over qid
            out["read_check_eval_s"] = time.perf_counter() - t
            out["worker_start_eval"] = reset_all()
            out["rss_start_eval"] = reset_peak()
            t = time.perf_counter()
            res = rd.evaluate(scored, METRICS)
            out["eval_s"] = time.perf_counter() - t
            out["worker_eval_peak"] = peaks()
            out["client_eval_peak"] = peak_mb()
            out["eval_means"] = {m: float(res.mean[m]) for m in METRICS}
        t = time.perf_counter()
        frame = rd.read_parquet(pattern)  # every column; one pass over qid: whole queries?
        out["read_check_fit_s"] = time.perf_counter() - t
        feats = [c for c in frame.columns if c.startswith("f")]
        out["worker_start_fit"] = reset_all()
        out["rss_start_fit"] = reset_peak()
        t = time.perf_counter()
        model = rd.fit_gbdt(GBDTRanker("listnet", **GBDT), frame, client=client, features=feats)
        out["fit_s"] = time.perf_counter() - t
        out["worker_fit_peak"] = peaks()
        out["client_fit_peak"] = peak_mb()
        scored = rd.predict(model, frame[["row", "qid", "label"] + feats], features=feats).compute()
        scored = scored.sort_values("row")
        pred = scored["score"].to_numpy()
        out["ndcg"] = float(evaluate(pred, scored["label"].to_numpy(), scored["qid"].to_numpy(),
                                     metrics=["ndcg@10"]).mean["ndcg@10"])
    finally:
        client.close()
        cluster.close()
    return out, pred


# ----------------------------------------------------------------------------- driver

def write_data(tmp: Path, n_queries: int) -> dict:
    import pandas as pd

    from rankwise.data import make_synthetic, to_pandas

    t0 = time.perf_counter()
    ds = make_synthetic(n_queries, seed=0)
    w = np.random.default_rng(1).normal(size=ds.n_features).astype(np.float32)
    X = np.asarray(ds.X, dtype=np.float32)
    pdf = to_pandas(ds)
    pdf.insert(0, "row", np.arange(len(pdf), dtype=np.int64))
    pdf["score"] = np.asarray(X @ w, dtype=np.float64)
    # quantised copy: every feature cut into LEVELS bins at its quantiles -> bin index 0..LEVELS-1
    qpdf = pdf.drop(columns=["score"]).copy()
    for j, name in enumerate(ds.feature_names):
        edges = np.unique(np.quantile(X[:, j], np.linspace(0, 1, LEVELS + 1)[1:-1]))
        qpdf[name] = np.searchsorted(edges, X[:, j], side="right").astype(np.float32)
    bounds = np.linspace(0, ds.n_queries, 9).astype(int)
    for sub, frame in (("continuous", pdf), ("quantised", qpdf)):
        (tmp / sub).mkdir()
        for i in range(8):
            a, b = ds.query_offsets[bounds[i]], ds.query_offsets[bounds[i + 1]]
            frame.iloc[a:b].to_parquet(tmp / sub / f"part{i}.parquet", index=False)
    print(f"data: {len(ds):,} rows, {ds.n_queries:,} queries, {ds.n_features} features "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    assert int(pd.Series(qpdf[ds.feature_names[0]]).nunique()) <= LEVELS
    return dict(rows=len(ds), queries=ds.n_queries, features=ds.n_features)


def run_setup(tmp: Path, sub: str, setup: str, with_eval: bool) -> dict:
    """Run one setup in a fresh interpreter (its own memory); return its JSON result."""
    out = tmp / f"{sub}-{setup}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", setup, "--data", str(tmp / sub),
           "--result", str(out)] + ([] if with_eval else ["--no-eval"])
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    res = json.loads(out.read_text())
    res["pred"] = np.load(tmp / f"{sub}-{setup}.npy")
    print(f"  {sub} {setup}: {time.perf_counter() - t:.0f}s wall in all, load average now "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    return res


def fmt_mb(values) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--no-eval", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n-queries", type=int, help=argparse.SUPPRESS)  # smoke tests of this script
    args = ap.parse_args()

    if args.phase:  # a child process: one setup
        data_dir, result = Path(args.data), Path(args.result)
        if args.phase == "single":
            res, pred = run_single(data_dir, not args.no_eval)
        else:
            res, pred = run_dask(data_dir, int(args.phase.split("-")[1]), not args.no_eval)
        np.save(result.with_suffix(".npy"), pred)
        result.write_text(json.dumps(res))
        return

    setups = ["single", "dask-1", "dask-2"]
    load0 = os.getloadavg()
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rankwise-bench-dist-") as tmpname:
        tmp = Path(tmpname)
        info = write_data(tmp, args.n_queries or (2_100 if args.quick else 9_000))
        cont = {s: run_setup(tmp, "continuous", s, True) for s in setups}
        quant = {s: run_setup(tmp, "quantised", s, False) for s in setups}
    load1 = os.getloadavg()
    minutes = (time.perf_counter() - t_all) / 60

    base = cont["single"]
    names = {"single": "single machine (in-memory arrays, 2 threads)",
             "dask-1": "Dask LocalCluster, 1 worker x 1 thread, from Parquet",
             "dask-2": "Dask LocalCluster, 2 workers x 1 thread, from Parquet"}

    def maxdiff(a, b) -> str:
        d = float(np.max(np.abs(a - b)))
        return "0 (identical)" if d == 0 else f"{d:.2g}"

    def worker_mem(r, phase) -> str:
        if f"worker_{phase}_peak" not in r:
            return "-"
        return " / ".join(f"{p:,.0f} ({s:,.0f})" for p, s in zip(r[f"worker_{phase}_peak"], r[f"worker_start_{phase}"]))

    lines = [
        "## Distributed (Dask LocalCluster) — bench_distributed.py",
        "",
        f"Synthetic MSLR-like data: {info['rows']:,} rows, {info['queries']:,} queries, {info['features']} features "
        f"(float32: {info['rows'] * info['features'] * 4 / 2**20:,.0f} MB of features), 8 query-grouped Parquet "
        "files. Evaluation: ndcg@10 + map + err@10 (ties averaged). GBDT: XGBoost `hist` (max_bin 256), rankwise "
        f"`listnet` objective, 10 rounds, depth 6. Machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; load average {load0[0]:.1f} at the start "
        f"and {load1[0]:.1f} at the end: other jobs were running, so the times are noisy ({minutes:.0f} min in "
        "all). Each setup ran in a fresh process, after importing the libraries and loading (compiling) the metric "
        "and loss kernels, in the client and in every worker.",
        "",
        "| setup | evaluate (s) | ratio | GBDT fit (s) | ratio | NDCG@10 of the GBDT | max abs score diff "
        "to single | eval means identical to single | peak RSS per worker, evaluate (MB) | "
        "peak RSS per worker, GBDT (MB) | client peak RSS, evaluate / GBDT (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|",
    ]
    for s in setups:
        r = cont[s]
        same = all(r["eval_means"][m] == base["eval_means"][m] for m in METRICS)
        lines.append(
            f"| {names[s]} | {r['eval_s']:.2f} | {r['eval_s'] / base['eval_s']:.1f}x | {r['fit_s']:.1f} | "
            f"{r['fit_s'] / base['fit_s']:.2f}x | {r['ndcg']:.4f} | {maxdiff(r['pred'], base['pred'])} | "
            f"{'yes' if same else 'NO'} | {worker_mem(r, 'eval')} | {worker_mem(r, 'fit')} | "
            f"{r['client_eval_peak']:,.0f} / {r['client_fit_peak']:,.0f} |")
    rate = {s: info["rows"] / cont[s]["eval_s"] / 1e3 for s in setups}
    lines += [
        "",
        "Peak RSS is the kernel's high-water mark during the phase (VmHWM, reset at the start of the phase); "
        "in brackets, each worker's RSS when the phase started (the libraries it has imported).",
        "",
        f"Same rows, every feature quantised to {LEVELS} levels (at most {LEVELS} distinct values per feature, "
        "fewer than max_bin):",
        "",
        "| setup | GBDT fit (s) | NDCG@10 of the GBDT | max abs score diff to single |",
        "|---|---:|---:|---:|",
    ]
    for s in setups:
        r = quant[s]
        lines.append(f"| {names[s]} | {r['fit_s']:.1f} | {r['ndcg']:.4f} | "
                     f"{maxdiff(r['pred'], quant['single']['pred'])} |")
    d1 = maxdiff(cont["dask-1"]["pred"], base["pred"])
    d2 = maxdiff(cont["dask-2"]["pred"], base["pred"])
    q1 = maxdiff(quant["dask-1"]["pred"], quant["single"]["pred"])
    q2 = maxdiff(quant["dask-2"]["pred"], quant["single"]["pred"])
    c1, c2 = cont["dask-1"], cont["dask-2"]
    feature_mb = info["rows"] * info["features"] * 4 / 2**20

    def growth(s) -> str:
        r = cont[s]
        share = feature_mb / len(r["worker_fit_peak"])
        return " and ".join(f"{(p - st) / share:.1f}" for p, st in zip(r["worker_fit_peak"], r["worker_start_fit"]))
    lines += [
        "",
        "**Evaluation** results are identical: the means of 1 and 2 workers equal the single-machine means "
        "exactly (per-query values are computed on whole queries by the same function and the mean is taken "
        f"once, on the client). Throughput: single machine {rate['single']:,.0f}k rows/s from arrays in memory; "
        f"Dask, including reading the three columns from Parquet, {rate['dask-1']:,.0f}k rows/s with 1 worker "
        f"and {rate['dask-2']:,.0f}k rows/s with 2 (on these 2 shared cores). Not in the evaluate column: "
        "`rd.read_parquet`'s whole-query check, one pass over the qid column, "
        f"{c1['read_check_eval_s']:.1f} s / {c2['read_check_eval_s']:.1f} s. The evaluation frame is read with "
        "`rd.read_parquet(..., columns=['qid', 'score', 'label'])`: without `columns=` every feature column "
        "is read too (the whole-query regrouping step stops Dask from pushing a later column selection into "
        "the Parquet read).",
        "",
        "**GBDT** models are *not* identical across worker counts with continuous features: max abs score "
        f"difference to the single-machine model {d1} with 1 worker and {d2} with 2 workers (NDCG@10 "
        f"{base['ndcg']:.4f} / {c1['ndcg']:.4f} / {c2['ndcg']:.4f}). The gradients and Hessians are the "
        "single-machine ones (every query lives on one worker), but XGBoost's `hist` method first cuts each "
        "feature into at most 256 bins from a weighted quantile sketch; on Dask every worker sketches its own "
        "rows and XGBoost merges the sketches, so with 2 workers the bin boundaries (the candidate split "
        "thresholds) differ slightly from those of one sketch over all rows, and the trees differ. The second "
        "table removes that one cause: with at most 32 distinct values per feature every sketch keeps all of "
        "them, the bins are the same for any number of workers, and the score difference to the single-machine "
        f"model is {q1} with 1 worker and {q2} with 2. Rank r trains on partitions r, r + n, ... whichever worker "
        "Dask placed them on (rankwise starts XGBoost's ranks itself), so the 2-worker model is the same in every "
        "run (tested: tests/distributed/test_dask.py, the same model with the partitions on either worker or "
        "spread); through `xgboost.dask` it depended on Dask's task placement.",
        "",
        "**Memory**: the client process also runs the LocalCluster scheduler. The single-machine process holds "
        f"the whole data set in memory ({base['rss_start_fit']:,.0f} MB resident when the GBDT phase started, "
        "included in its peak); the Dask client holds no rows, only the per-query table (evaluation) or the "
        "booster (GBDT). During GBDT training each worker holds its share of the rows several times: "
        "the partitions it trains on (those another worker held are copied to it for the fit), its local float32 "
        "DMatrix built from them, and XGBoost's quantised histogram index: the GBDT peak "
        f"minus the start RSS was {growth('dask-1')} (1 worker) and {growth('dask-2')} (2 workers) times the "
        "worker's share of the float32 feature bytes.",
        "",
        "Ratios are wall time relative to the single-machine row (>1 = slower). The Dask rows include task "
        "scheduling, serialisation, reading Parquet (evaluation; the GBDT's frame is read inside `fit_gbdt` "
        "too) and, for GBDT, moving partitions to their ranks, building each rank's DMatrix and XGBoost's "
        "collective setup. **This is not a scaling "
        "test**: the machine has 2 cores shared by the client, the scheduler, the workers and other jobs (load "
        "average above), and the times of one setup vary by a factor of 2 or more between runs of this "
        "script, so read no speed-up or slow-down between the rows from them; the results (identical or not) "
        "and the memory are what this table shows. On a real cluster each worker has its own cores and "
        "memory; see docs/distributed.md for the estimate at 1B rows / 10M queries.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    name = "bench_distributed" + ("_quick" if args.quick else "") + ("_smoke" if args.n_queries else "")
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
