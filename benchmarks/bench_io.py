"""Reading LETOR/SVMlight files: rankwise.data.read_svmlight vs sklearn.datasets.load_svmlight_file.

In one run, on (1) MQ2008 Fold1 train.txt.gz (9,630 rows x 46 features, gzip, CRLF, #docid
comments) and (2) a synthetic LETOR file of 500,000 rows x 136 features (make_synthetic,
MSLR-WEB30K-like, values written "%.6f" as the LETOR files are), measures:

* parse time: rankwise ``read_svmlight`` (labels, qids, doc ids, dense float32 X) vs scikit-learn
  ``load_svmlight_file(query_id=True, dtype=float32)`` (labels, qids, CSR float32 X; it ignores
  doc ids). Best of several repeats, after a warm-up call (imports and first-touch of the compiled kernels).
* cache reload: ``read_svmlight(cache=...)`` hitting the binary cache (.npy + JSON) vs parsing;
  the cache is written by a separate process first, so the reload's peak memory is its own.
* peak memory: each measurement runs in a fresh process; peak RSS of that process, and the
  increase over the process's RSS just before the call (imports, warm-up done).

Usage: python benchmarks/bench_io.py [--quick] [--rows N]   (--quick: 100k synthetic rows;
--rows: another size of the synthetic file, 500k by default)
Writes benchmarks/results/bench_io.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _status_mb(key: str) -> float:
    """VmRSS / VmHWM of this process (VmHWM, unlike ru_maxrss, is not inherited from the parent)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if key == "VmHWM" else float("nan")


def child(method: str, path: str, repeats: int, cache_dir: str) -> None:
    """Run one method in this (fresh) process; print a JSON line."""
    import numpy as np

    if method == "sklearn":
        from sklearn.datasets import load_svmlight_file

        def run():
            X, y, q = load_svmlight_file(path, query_id=True, dtype=np.float32, zero_based=False)
            return X.shape[0]
    else:
        from rankwise.data import read_svmlight

        # warm-up on a tiny file: imports and first touch of the compiled kernels
        with tempfile.TemporaryDirectory() as td:
            p = Path(td) / "w.txt"
            p.write_text("1 qid:1 1:0.5 #docid = a\n")
            t0 = time.perf_counter()
            read_svmlight(p)
            warm = time.perf_counter() - t0
        if method == "rankwise":
            def run():
                return len(read_svmlight(path))
        elif method == "rankwise_fill":  # parse once and write the cache (its own process)
            def run():
                return len(read_svmlight(path, cache=cache_dir))
        elif method == "rankwise_cache":  # the cache was filled by a previous process
            def run():
                return len(read_svmlight(path, cache=cache_dir))
        else:
            raise SystemExit(f"unknown method {method}")
    base = _status_mb("VmRSS")
    times = []
    rows = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = run()
        times.append(time.perf_counter() - t0)
    peak = _status_mb("VmHWM")
    out = {"method": method, "best_s": min(times), "times": times, "rows": rows, "peak_rss_mb": peak,
           "base_rss_mb": base}
    if method != "sklearn":
        out["warmup_s"] = warm
    print(json.dumps(out))


def run_child(method, path, repeats, cache_dir):
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, __file__, "--child", method, str(path), str(repeats), str(cache_dir)],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{method} on {path} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def make_synthetic_file(path: Path, n_rows: int) -> float:
    import numpy as np

    from rankwise.data import RankingDataset, make_synthetic, write_svmlight

    t0 = time.perf_counter()
    ds = make_synthetic(n_queries=int(n_rows / 100) + 200, seed=0)
    n_q = int(np.searchsorted(ds.query_offsets, n_rows, side="right")) - 1
    n = int(ds.query_offsets[n_q])
    sizes = np.diff(ds.query_offsets[: n_q + 1])
    last = n_rows - n  # a last, partial query so that the file has exactly n_rows rows
    if last:
        sizes = np.append(sizes, last)
    ds = RankingDataset(ds.X[:n_rows], ds.labels[:n_rows], np.concatenate(([0], np.cumsum(sizes))),
                        np.arange(1, len(sizes) + 1))
    write_svmlight(ds, path, decimals=6)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None, help="rows of the synthetic file (default 500,000)")
    ap.add_argument("--child", nargs=4, metavar=("METHOD", "PATH", "REPEATS", "CACHE"))
    args = ap.parse_args(argv)
    if args.child:
        m, p, r, c = args.child
        child(m, p, int(r), c)
        return 0
    sys.path.insert(0, str(HERE.parent / "src"))
    sys.path.insert(0, str(HERE.parent / "tests"))
    from conftest import shared_data_dir

    n_synth = args.rows if args.rows else (100_000 if args.quick else 500_000)
    cases = []
    d = shared_data_dir()
    if d is not None and (d / "MQ2008" / "Fold1" / "train.txt.gz").exists():
        cases.append(("MQ2008 Fold1 train.txt.gz (9,630 x 46, gzip)", d / "MQ2008" / "Fold1" / "train.txt.gz", 7))
    else:
        print("MQ2008 absent (set RANKWISE_DATA): skipping that case", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="rankwise-bench-io-"))
    synth = tmp / f"synthetic_{n_synth}.txt"
    gen_s = make_synthetic_file(synth, n_synth)
    size_mb = synth.stat().st_size / 2**20
    cases.append((f"synthetic LETOR {n_synth:,} x 136 ({size_mb:,.0f} MiB text)", synth, 2))
    print(f"generated {synth} ({size_mb:.0f} MiB) in {gen_s:.1f}s", flush=True)

    rows = []
    for label, path, reps in cases:
        # The machine is shared, so load drifts: alternate the two parsers (rankwise, sklearn,
        # rankwise, sklearn, ...) in fresh processes and keep each one's best time.
        big = reps <= 2
        order = ["rankwise", "sklearn", "rankwise"] if big else ["rankwise", "sklearn"] * 2
        runs = {"rankwise": [], "sklearn": []}
        for m in order:
            res = run_child(m, path, 1 if big else reps, tmp / "cache")
            runs[m].append(res)
            print(label, m, f"{res['best_s']:.3f}s", f"peak {res['peak_rss_mb']:.0f} MB", flush=True)
        r = {m: min(v, key=lambda x: x["best_s"]) for m, v in runs.items()}
        r["rankwise_fill"] = run_child("rankwise_fill", path, 1, tmp / "cache")
        r["rankwise_cache"] = run_child("rankwise_cache", path, reps, tmp / "cache")
        print(label, "cache reload", f"{r['rankwise_cache']['best_s']:.4f}s", flush=True)
        rows.append((label, r))
    shutil.rmtree(tmp, ignore_errors=True)

    cmd = "python benchmarks/bench_io.py" + (" --quick" if args.quick else "") + \
        (f" --rows {args.rows}" if args.rows else "")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = ["## Reading LETOR / SVMlight files (bench_io.py)", "",
             f"`{cmd}`: rankwise `read_svmlight` vs scikit-learn `load_svmlight_file(query_id=True, "
             f"dtype=float32)`, all figures from this one run, each measurement in a fresh process, the two "
             f"parsers alternated (load on the shared machine drifts; 1-minute load average {load:.1f} at the "
             f"end of the run); best of repeats after a warm-up "
             f"({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}). "
             "rankwise also extracts `#docid` comments and builds the grouped RankingDataset (dense X for "
             "these dense files); scikit-learn returns CSR and ignores the comments. "
             "Peak RSS is that of the measuring process (imports included); Δ is the increase over the RSS "
             "just before the timed calls.", "",
             "| file | sklearn parse (s) | rankwise parse (s) | ratio rankwise/sklearn | rankwise cache reload (s) "
             "| parse / reload | peak RSS sklearn (Δ) MB | peak RSS rankwise (Δ) MB | peak RSS reload (Δ) MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, r in rows:
        sk, rw, rc = r["sklearn"], r["rankwise"], r["rankwise_cache"]

        def mem(x):
            return f"{x['peak_rss_mb']:.0f} ({x['peak_rss_mb'] - x['base_rss_mb']:+.0f})"

        lines.append(f"| {label} | {sk['best_s']:.3f} | {rw['best_s']:.3f} | **{rw['best_s'] / sk['best_s']:.2f}** "
                     f"| {rc['best_s']:.4f} | **{rw['best_s'] / rc['best_s']:.0f}×** | {mem(sk)} | {mem(rw)} | {mem(rc)} |")
    warm = rows[-1][1]["rankwise"]["warmup_s"]
    lines += ["", "Goals, from the numbers above:", "",
              "| file | parse ratio rankwise/sklearn (goal ≤ 1.0) | cache reload vs parse (goal ≥ 20×) |",
              "|---|---|---|"]
    for label, r in rows:
        ratio = r["rankwise"]["best_s"] / r["sklearn"]["best_s"]
        speed = r["rankwise"]["best_s"] / r["rankwise_cache"]["best_s"]
        lines.append(f"| {label} | {ratio:.2f}: {'met' if ratio <= 1.0 else '**not met**'} "
                     f"| {speed:.0f}×: {'met' if speed >= 20 else '**not met**'} |")
    lines += ["", f"First call in a fresh process (kernels compiled at install): {warm:.2f} s, "
                  f"not included above. Synthetic file generated in {gen_s:.1f} s "
                  "(make_synthetic + the compiled fixed-point writer).", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_io.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
