"""Faults of the parsed-data cache of ``read_svmlight`` (issue 29 item 4).

``python benchmarks/faults_cache.py [--before OLD_SRC] [--timing] [--rows 100000]`` runs every kind
of stale, swapped and corrupted cache entry of ``tests/data/_cache_faults.py`` (each in a child
process, restarted after a death) and prints kind / served / died / warned / rebuilt; with
``--before`` also against another source tree (e.g. ``git archive <commit> src | tar -x -C /tmp/old``,
then ``--before /tmp/old/src``). ``--timing`` measures parse vs cache reload on MQ2008 Fold1
``train.txt.gz`` ($RANKWISE_DATA) and on a synthetic LETOR file of ``--rows`` rows x 136, for this
tree (and the ``--before`` one), each in its own process, best of repeats.

Writes benchmarks/results/faults_cache.md.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC = ROOT / "src"
RESULTS = HERE / "results"
sys.path.insert(0, str(ROOT / "tests" / "data"))

import _cache_faults as F  # noqa: E402


def _yes(v) -> str:
    return "—" if v is None else ("**yes**" if v else "no")


def faults_table(runs: dict) -> list[str]:
    labels = list(runs)
    head = "| kind | " + " | ".join(f"{lab}: served / died / warned / rebuilt" for lab in labels) + " |"
    lines = [head, "|---|" + "---|" * len(labels)]
    for kind in F.KINDS:
        cells = []
        for lab in labels:
            r = runs[lab][kind]
            cells.append(f"{_yes(r['served'])} / {_yes(r['died'])} / {r['warnings']} / "
                         f"{'yes' if r['rebuilt'] else 'no'}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    totals = []
    for lab in labels:
        rs = runs[lab].values()
        totals.append(f"{sum(bool(r['served']) for r in rs)} / {sum(bool(r['died']) for r in rs)} / "
                      f"{sum(r['warnings'] == 1 for r in rs)} / {sum(bool(r['rebuilt']) for r in rs)}")
    lines.append(f"| **total ({len(F.KINDS)} kinds)** | " + " | ".join(totals) + " |")
    return lines


# ------------------------------------------------------------------------------ timing
def child_timing(path: str, repeats: int, cache_dir: str) -> None:
    from rankwise.data import read_svmlight

    read_svmlight(path)  # warm-up: the kernel module and scipy.sparse imported
    parse = _best(lambda: read_svmlight(path), repeats)
    read_svmlight(path, cache=cache_dir)  # fill
    reload = _best(lambda: read_svmlight(path, cache=cache_dir), repeats)
    digest = None
    try:
        from rankwise.data._digest import digest_algorithm, file_digest
        digest = {"algorithm": digest_algorithm(), "file": _best(lambda: file_digest(path), repeats)}
    except ImportError:
        pass
    print(json.dumps({"parse": parse, "reload": reload, "digest": digest}))


def _best(f, repeats: int) -> dict:
    """Best wall-clock and best CPU time (``process_time``: what other jobs on the machine do not inflate)."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"wall": min(wall), "cpu": min(cpu)}


def run_timing(src: Path, path: Path, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
        res = subprocess.run([sys.executable, __file__, "--child-timing", str(path), str(repeats), d],
                             capture_output=True, text=True, env=env, timeout=3600)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def make_synthetic(path: Path, n_rows: int) -> None:
    sys.path.insert(0, str(SRC))
    import numpy as np

    from rankwise.data import RankingDataset, make_synthetic as mk, write_svmlight

    ds = mk(n_queries=int(n_rows / 100) + 200, seed=0)
    n_q = int(np.searchsorted(ds.query_offsets, n_rows, side="right")) - 1
    off = ds.query_offsets[: n_q + 1]
    ds = RankingDataset(ds.X[: off[-1]], ds.labels[: off[-1]], off, np.arange(1, n_q + 1))
    write_svmlight(ds, path, decimals=6)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="another source tree (its src/) to run the same kinds against")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--child-timing", nargs=3)
    args = ap.parse_args(argv)
    if args.child_timing:
        child_timing(args.child_timing[0], int(args.child_timing[1]), args.child_timing[2])
        return 0
    trees = {"before": args.before, "now": SRC} if args.before else {"now": SRC}
    runs = {}
    for lab, src in trees.items():
        rs = F.run_kinds(F.KINDS, src=src)
        runs[lab] = {r["kind"]: r for r in rs}
        for r in rs:
            print(f"{lab:6s} {r['kind'][:52]:52s} served={r['served']!s:5s} died={r['died']!s:5s} "
                  f"warned={r['warnings']} rebuilt={r['rebuilt']}", flush=True)
    now = runs["now"].values()
    lines = ["## Faults: the parsed-data cache (faults_cache.py)", "",
             f"`python benchmarks/faults_cache.py{' --before OLD/src' if args.before else ''}"
             f"{' --timing' if args.timing else ''}`: each kind fills the cache of `read_svmlight` from a small "
             "realistic file (LETOR-style dense file with CRLF, NULL features, scientific notation and doc ids; "
             "or a LightGBM-style sparse file with a `.query` file), damages the entry or the file behind it, "
             "reads again and uses the result (densify, `X @ w`, NDCG). *served*: the data returned differ from a "
             "fresh parse; *died*: the process was killed (a segfault); *warned*: cache warnings of that read; "
             "*rebuilt*: the next read comes from the cache (parser switched off), equal to a fresh parse, "
             "without a warning. Each kind runs in a child process, restarted after a death."
             + (" *before*: the tree before this work (entries keyed by path, size and mtime)." if args.before
                else ""), ""]
    lines += faults_table(runs)
    lines += ["", f"Now: {sum(bool(r['served']) for r in now)} served, {sum(bool(r['died']) for r in now)} "
              f"process deaths, {sum(bool(r['rebuilt']) and r['warnings'] == 1 for r in now)} of {len(now)} "
              "rebuilt with exactly one warning."]
    if args.timing:
        data = Path(os.environ.get("RANKWISE_DATA", ROOT.parent / "shared" / "data"))
        files = []
        mq = data / "MQ2008" / "Fold1" / "train.txt.gz"
        if mq.exists():
            files.append(("MQ2008 Fold1 train.txt.gz (9,630 x 46, gzip)", mq, args.repeats))
        tmp = Path(tempfile.mkdtemp())
        syn = tmp / "synthetic.txt"
        make_synthetic(syn, args.rows)
        files.append((f"synthetic LETOR {args.rows:,} x 136 ({syn.stat().st_size / 2**20:.0f} MiB text)", syn,
                      max(2, args.repeats // 2)))
        lines += ["", "Parse vs cache reload (best of repeats, each tree in its own process; wall clock on a shared "
                  f"machine, load average {os.getloadavg()[0]:.1f} at the end):", "",
                  "| file | tree | parse wall (s) | reload wall (s) | parse / reload wall | parse CPU (s) | "
                  "reload CPU (s) | parse / reload CPU | file digest wall (s) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, path, reps in files:
            for lab, src in trees.items():
                t = run_timing(src, path, reps)
                dg = t["digest"]
                dg = "—" if dg is None else f"{dg['file']['wall']:.4f} ({dg['algorithm']})"
                pa, re_ = t["parse"], t["reload"]
                lines.append(f"| {label} | {lab} | {pa['wall']:.4f} | {re_['wall']:.4f} | "
                             f"**{pa['wall'] / re_['wall']:.0f}×** | {pa['cpu']:.4f} | {re_['cpu']:.4f} | "
                             f"**{pa['cpu'] / max(re_['cpu'], 1e-6):.0f}×** | "
                             f"{dg} |")
                print(lines[-1], flush=True)
        syn.unlink()
        tmp.rmdir()
    lines += ["", f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}."]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "faults_cache.md"
    out.write_text("\n".join(lines) + "\n")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
