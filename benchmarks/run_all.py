"""Run every benchmark script and assemble BENCHMARKS.md from benchmarks/results/*.md.

Usage: python benchmarks/run_all.py [--only NAME ...] [--assemble-only]
Each bench_*.py writes its own Markdown section to benchmarks/results/<name>.md.
"""
from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
ORDER = ["bench_oneshot", "bench_io", "bench_metrics", "bench_trec", "bench_losses", "bench_training",
         "bench_training_quality", "bench_quality",
         "bench_models_speed", "bench_reduction_structured", "bench_recommendation", "bench_recommendation_full",
         "bench_clicks", "bench_clicks_propensity", "bench_clicks_rankers", "bench_clicks_dla", "bench_clicks_policy",
         "bench_clicks_counterfactual", "bench_clicks_fulllist", "bench_serving_parity", "bench_export", "bench_fuzz",
         "faults", "faults_cache", "faults_resume", "faults_memory", "faults_dask", "bench_gbdt_subsample"]
# scripts run a second time with these arguments (a second measurement, its own results file)
EXTRA_RUNS = {"bench_recommendation": [["--full-catalogue"]]}


def assemble() -> Path:
    sections = sorted(RESULTS.glob("*.md"), key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else 99, p.stem))
    head = [
        "# Benchmarks",
        "",
        "Latest results of the scripts in `benchmarks/` (each compares against its peer in the same run; "
        "machines here are noisy, so read the ratios, not the absolute times). Regenerate with "
        "`make bench` or `python benchmarks/<script>.py`; this file is assembled by `benchmarks/run_all.py`. "
        "The first section is the headline: each job as a user runs it, in a fresh process, with no compiled-code "
        "cache and warm; the sections after it time kernels in a warm process (the supplement).",
        "",
    ]
    body = [p.read_text().rstrip() + "\n" for p in sections]
    out = ROOT / "BENCHMARKS.md"
    out.write_text("\n".join(head) + "\n" + "\n".join(body))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--assemble-only", action="store_true")
    args = ap.parse_args(argv)
    failed = []
    if not args.assemble_only:
        scripts = sorted(HERE.glob("bench_*.py"))
        unknown = sorted(set(args.only or ()) - {s.stem for s in scripts})
        if unknown:
            print(f"run_all: unknown benchmark(s) {', '.join(unknown)}; valid: "
                  f"{', '.join(s.stem for s in scripts)}", file=sys.stderr)
            return 2
        for s in scripts:
            if args.only and s.stem not in args.only:
                continue
            for extra in [[]] + EXTRA_RUNS.get(s.stem, []):
                t0 = time.perf_counter()
                name = " ".join([s.name, *extra])
                print(f"== {name}", flush=True)
                rc = subprocess.call([sys.executable, str(s), *extra], cwd=ROOT)
                print(f"== {name}: exit {rc} after {time.perf_counter() - t0:.0f}s ({platform.node()})", flush=True)
                if rc:
                    failed.append(name)
    print(f"wrote {assemble()}")
    if failed:
        print(f"run_all: failed: {', '.join(failed)} (their sections keep the previous results)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
