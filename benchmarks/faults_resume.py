"""Faults: resume after a kill — every trainer with checkpoints, killed at >= 30 points, resumed, compared.

For each trainer (tests/models/_resume_faults.py) and thread count (1, 2): the uninterrupted fit;
then every single kill point (killed right after the k-th complete checkpoint write, for every k),
random double kills (the resumed run killed again) up to ``--points`` simulated kill points, and
``--sigkill`` real SIGKILLs of a child process at random moments of its fit (mid-iteration,
mid-write, after the end). Each kill is followed by a resume from the latest checkpoint on disk
to the end; its scores are compared with the uninterrupted fit's. Prints a markdown table:
trainer / threads / kill points / resumes identical / max |Δscore|.

    PYTHONPATH=src python benchmarks/faults_resume.py [--points 30] [--sigkill 4] [--seed 0] [--threads 1 2]
"""
from __future__ import annotations

import argparse
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "src"))  # after PYTHONPATH: PYTHONPATH=... runs another rankwise
sys.path.insert(0, str(HERE.parent / "tests" / "models"))

import _resume_faults as h  # noqa: E402


def run_trainer(name: str, n_jobs: int, points: int, n_sigkill: int, rng: random.Random) -> dict:
    full, writes = h.uninterrupted(name, n_jobs)
    plans = [[k] for k in range(1, writes + 1)]
    while len(plans) < points:  # killed, resumed, killed again, resumed to the end
        k1 = rng.randint(1, max(writes - 1, 1))
        plans.append([k1, rng.randint(1, max(writes - k1, 1))])
    diffs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, plan in enumerate(plans):
            ck = Path(tmp) / f"sim{i}.npz"
            diffs.append(h.max_abs_diff(h.killed_and_resumed(name, plan, ck, n_jobs), full))
        t = time.perf_counter()
        h.uninterrupted(name, n_jobs)
        span = (time.perf_counter() - t) / 2  # one fit, with checkpoints
        no_ckpt = 0
        for i in range(n_sigkill):
            ck = Path(tmp) / f"kill{i}.npz"
            scores, had = h.sigkill_and_resume(name, ck, rng.uniform(0, 1.3 * span), n_jobs)
            no_ckpt += not had
            diffs.append(h.max_abs_diff(scores, full))
    return {"trainer": name, "threads": n_jobs, "writes": writes, "simulated": len(plans), "sigkill": n_sigkill,
            "sigkill_before_first_ckpt": no_ckpt, "identical": sum(d == 0.0 for d in diffs),
            "within_1e-12": sum(d <= 1e-12 for d in diffs), "max": max(diffs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=30, help="simulated kill points per trainer and thread count")
    ap.add_argument("--sigkill", type=int, default=4, help="real SIGKILLs per trainer and thread count")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="trainer names (default: all)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    rows = []
    t0 = time.perf_counter()
    for name in args.only or list(h.ALL):
        for n_jobs in args.threads:
            rows.append(run_trainer(name, n_jobs, args.points, args.sigkill, rng))
            r = rows[-1]
            print(f"# {name} n_jobs={n_jobs}: {r['identical']}/{r['simulated'] + r['sigkill']} identical, "
                  f"max {r['max']:.3g}", file=sys.stderr, flush=True)
    import numpy as np
    import rankwise
    import scipy

    print(f"rankwise {rankwise.__version__} ({Path(rankwise.__file__).parent}), scipy {scipy.__version__}, numpy {np.__version__}, "
          f"{platform.python_implementation()} {platform.python_version()}; seed {args.seed}; "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| trainer | threads | checkpoints per fit | kill points (simulated + SIGKILL) | resumes identical "
          "(bitwise) | within 1e-12 | max \\|Δscore\\| |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        n = r["simulated"] + r["sigkill"]
        print(f"| {r['trainer']} | {r['threads']} | {r['writes']} | {n} ({r['simulated']} + {r['sigkill']}) | "
              f"{r['identical']} / {n} | {r['within_1e-12']} / {n} | {r['max']:.3g} |")
    bad = [r for r in rows if r["trainer"] in h.TRAINERS and r["within_1e-12"] < r["simulated"] + r["sigkill"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
