"""TREC evaluation end to end: qrels + 17 run files -> every all_trec measure, against the peers.

A generated TREC-like collection (100 topics, 1,000 documents per topic per run, graded qrels
with about 1,300 judgments per topic, 17 runs written plain and gzipped) is evaluated with every
trec_eval ``all_trec`` measure. The runs are written as systems write them (``SCORE_FORMATS``, one
per run in turn): full-precision ``repr`` scores (what rankwise and most Python systems write),
scientific notation with 17 significant digits (``%.16e``, as C and Java systems print doubles),
four decimals (as several official TREC runs: many ties), and ``%.17g`` negative log-likelihoods
(Indri-like), fields separated by a tab in every fifth run; a third of the runs round their scores
to 3 decimals first (ties). Each tool evaluates them:

* rankwise from files: ``evaluate_runs(qrels_path, run_paths, "all_trec")`` (parse + evaluate);
* rankwise from dicts: ``evaluate_runs(qrels_dict, {name: run_dict}, "all_trec")``;
* pytrec_eval from files (``parse_qrel`` / ``parse_run``, then ``RelevanceEvaluator`` with every
  measure it supports, ``evaluate`` per run) and from dicts (the evaluator and ``evaluate``);
* ranx from files (``Qrels.from_file`` / ``Run.from_file``) and from dicts, on the measures it
  shares with trec_eval (map, mrr, r-precision, bpref, P/recall/ndcg at 5, 10, 100, 1000);
  ranx cannot compute the rest of all_trec;
* the trec_eval 10 binary (built from its C sources into a scratch folder; skipped with a
  message where no C compiler is found): ``trec_eval -m all_trec qrels run`` once per run file,
  the total of the 17 processes, against ``rankwise evaluate --qrels Q --format trec_eval RUN...``
  (one process, Python start-up and imports included).

In-process timings are the best of 3 after one warm-up call (wall seconds, and for rankwise and
pytrec_eval from plain files and from dicts the process's CPU seconds too, every thread); the CLI and the first-call
figures run in fresh processes: "cold" with new, empty bytecode and JIT caches
(``PYTHONPYCACHEPREFIX``, ``NUMBA_CACHE_DIR``), "warm" with the caches a run left. The kernels
of this path (reader, join, measures) are compiled when the package is built, so nothing is
compiled at run time.
Correctness is checked in the same run: the rankwise CLI's trec_eval output equals the binary's
on two runs, line for line (``relstring`` included), and rankwise's per-topic values equal
pytrec_eval's.

Usage: python benchmarks/bench_trec.py [--quick] [--cli-only]
Writes benchmarks/results/bench_trec.md (``--cli-only``: only the command line against the
binary, and the same-output check, added after the full run's rows, which are kept).
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SRC = ROOT / "src"
TREC_SRC = Path(os.environ.get("TREC_EVAL_SRC", ROOT.parent / "shared" / "tools" / "trec_eval-10.0-src"))
if not TREC_SRC.exists():
    TREC_SRC = Path("/work/shared/tools/trec_eval-10.0-src")
RANX_MEASURES = ["map", "mrr", "r-precision", "bpref"] + [f"{m}@{k}" for m in ("precision", "recall", "ndcg")
                                                           for k in (5, 10, 100, 1000)]


# ----------------------------------------------------------------------------- data

#: how the runs write their scores, one format per run in turn (see the module docstring)
SCORE_FORMATS = ("repr", "scientific %.16e", "fixed %.4f", "%.17g log-likelihood")


def format_scores(values: np.ndarray, kind: str) -> list[str]:
    if kind == "repr":
        return [repr(v) for v in values.tolist()]
    if kind.startswith("scientific"):
        return [f"{v:.16e}" for v in values.tolist()]
    if kind.startswith("fixed"):
        return [f"{v:.4f}" for v in values.tolist()]
    return [f"{v:.17g}" for v in (values - 12.0).tolist()]  # Indri-like: negative log-likelihoods


def long_digits(token: str) -> bool:
    """More than 15 significant digits as written (beyond any 15-digit fast path)."""
    mantissa = re.split("[eE]", token)[0]
    return len(re.sub("[^0-9]", "", mantissa).lstrip("0")) > 15


def generate(out: Path, n_topics=100, n_docs=1000, n_runs=17, seed=0) -> tuple[Path, list[Path], list[Path]]:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    qlines = []
    runs = [[] for _ in range(n_runs)]
    for t in range(n_topics):
        q = str(401 + t)
        cand = rng.choice(2_000_000, size=3000, replace=False)
        names = np.char.add(np.where(cand % 2 == 0, "FBIS3-", "LA0101-"), np.char.zfill(cand.astype(str), 7))
        quality = rng.normal(size=3000)
        rel = np.where(quality > 1.2, 2, np.where(quality > 0.5, 1, 0))
        judged = np.sort(rng.choice(3000, size=int(rng.integers(1100, 1500)), replace=False))
        qlines.append("\n".join(f"{q} 0 {d} {r}" for d, r in zip(names[judged], rel[judged])) + "\n")
        for r in range(n_runs):
            s = quality * rng.uniform(0.3, 1.5) + rng.normal(size=3000)
            top = np.argsort(-s, kind="stable")[:n_docs]
            sc = np.round(s[top], 3) if r % 3 == 0 else s[top]  # some runs with many ties
            sep = "\t" if r % 5 == 4 else " "
            runs[r].append("\n".join(sep.join((q, "Q0", d, str(k), v, f"run{r:02d}")) for k, (d, v) in enumerate(
                zip(names[top], format_scores(sc, SCORE_FORMATS[r % len(SCORE_FORMATS)])), start=1)) + "\n")
    qrels = out / "qrels.txt"
    qrels.write_text("".join(qlines))
    plain, gz = [], []
    for r in range(n_runs):
        text = "".join(runs[r])
        p = out / f"run{r:02d}.txt"
        p.write_text(text)
        g = out / f"run{r:02d}.txt.gz"
        g.write_bytes(gzip.compress(text.encode(), compresslevel=6))
        plain.append(p)
        gz.append(g)
    return qrels, plain, gz


def least_time(fn, repeat=3, clock=time.perf_counter):
    """The least ``clock`` time of ``repeat`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def best_of(fn, repeat=3):
    """Wall seconds, best of ``repeat`` after a warm-up."""
    fn()  # warm-up (JIT, caches)
    return least_time(fn, repeat)


def best_cpu(fn, repeat=3):
    """CPU seconds of the process (every thread: user + system), best of ``repeat`` after a warm-up."""
    fn()
    return least_time(fn, repeat, time.process_time)


def fresh_process(code: str, env=None) -> float:
    e = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    e.update(env or {})
    if "PYTHONPYCACHEPREFIX" in e:  # the cold run writes the bytecode cache that the warm run reads
        e.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=e, capture_output=True)
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- tools

def rankwise_files(qrels, runs):
    from rankwise.metrics import evaluate_runs
    return evaluate_runs(qrels, runs, "all_trec")


def rankwise_dicts(qrels_d, runs_d):
    from rankwise.metrics import evaluate_runs
    return evaluate_runs(qrels_d, runs_d, "all_trec")


def dict_breakdown(qrels_d, runs_d, repeat=3):
    """Where the dict path's time goes: CPU seconds of one thread (best of ``repeat``), the
    runs evaluated together, topic by topic, as ``evaluate_runs`` does with one worker."""
    from rankwise.data.trec import Run
    from rankwise.metrics import evaluate_runs
    from rankwise.metrics import trec as MT

    def cpu(fn):
        return least_time(fn, repeat, time.thread_time)

    pq = MT.PreparedQrels(qrels_d)
    args, shape = _kernel_args(pq)
    preps = [MT._dict_prep(pq, r, False) for r in runs_d.values()]
    objs = {n: Run.from_dict(r, name=n) for n, r in runs_d.items()}
    saved = os.environ.get("RANKWISE_NUM_THREADS")
    os.environ["RANKWISE_NUM_THREADS"] = "1"  # evaluate_runs: one worker (rankwise._validation.kernel_threads)
    try:
        out = {
            "qrels prepared (PreparedQrels)": cpu(lambda: MT.PreparedQrels(qrels_d)),
            "runs' query ids mapped to the qrels topics (_dict_prep)": cpu(
                lambda: [MT._dict_prep(pq, r, False) for r in runs_d.values()]),
            "the compiled dict pass (eval_dict_runs: each topic's dicts walked, joined, ranked, 98 measures)": cpu(
                lambda: MT._dict_passes(pq, preps, args, shape, None, 1)),
            "evaluate_runs(dicts), one thread, end to end": cpu(lambda: evaluate_runs(qrels_d, runs_d, "all_trec")),
            "for comparison, the general path: run dicts -> Run (Run.from_dict)": cpu(
                lambda: [Run.from_dict(r) for r in runs_d.values()]),
            "for comparison, the general path: Runs' compiled pass (eval_run)": cpu(lambda: _eval_run_only(pq, objs)),
        }
    finally:
        if saved is None:
            os.environ.pop("RANKWISE_NUM_THREADS", None)
        else:
            os.environ["RANKWISE_NUM_THREADS"] = saved
    return out


def _kernel_args(pq):
    """The trec_eval pass's arguments after the run's own, as ``evaluate_runs`` passes them for
    ``all_trec`` with the default options, and ``(icuts, fcuts, rs_len)``."""
    from rankwise.metrics.registry import get_metric
    from rankwise.metrics.trec import _UTILITY, _Plan, expand_groups

    plan = _Plan([get_metric(m) for m in expand_groups("all_trec")])
    q = pq.qrels
    args = (q.offsets, *pq.table, q.docs.buf, q.docs.s, *pq.levels, *pq.ideal, np.iinfo(np.int64).max, False, 1,
            plan.icuts, plan.icut_off, plan.fcuts, plan.fcut_off, 0.9, 1.0, _UTILITY, 0.0, False, 10)
    return args, (plan.icuts, plan.fcuts, 10)


def _eval_run_only(pq, objs):
    """The compiled pass of the general path (``eval_run`` on each Run, as ``evaluate_runs`` calls it)."""
    from rankwise.metrics import _trec_kernel as TK
    from rankwise.metrics.trec import _topics

    args, _ = _kernel_args(pq)
    for run in objs.values():
        topics, run_of = _topics(pq, run, pq.topic_map(run), False)
        d = run.docs
        TK.eval_run(run.offsets, d.buf, d.s, d.e, d.h, run.scores, topics, run_of, *args)


def pytrec_measures():
    import pytrec_eval
    return set(pytrec_eval.supported_measures) - {"relstring", "runid"}


def pytrec_files(qrels, runs):
    import pytrec_eval

    def opener(p):
        return gzip.open(p, "rt") if str(p).endswith(".gz") else open(p)
    with open(qrels) as fh:
        q = pytrec_eval.parse_qrel(fh)
    ev = pytrec_eval.RelevanceEvaluator(q, pytrec_measures())
    out = {}
    for p in runs:
        with opener(p) as fh:
            out[p.name] = ev.evaluate(pytrec_eval.parse_run(fh))
    return out


def pytrec_dicts(qrels_d, runs_d):
    import pytrec_eval
    ev = pytrec_eval.RelevanceEvaluator(qrels_d, pytrec_measures())
    return {n: ev.evaluate(r) for n, r in runs_d.items()}


def ranx_files(qrels, runs):
    from ranx import Qrels, Run, evaluate
    q = Qrels.from_file(str(qrels), kind="trec")
    return {p.name: evaluate(q, Run.from_file(str(p), kind="trec"), RANX_MEASURES) for p in runs}


def ranx_dicts(qrels_d, runs_d):
    from ranx import Qrels, Run, evaluate
    q = Qrels(qrels_d)
    return {n: evaluate(q, Run(r), RANX_MEASURES) for n, r in runs_d.items()}


def build_trec_eval(scratch: Path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not TREC_SRC.exists():
        return None, "no C compiler found" if cc is None else f"trec_eval sources not found at {TREC_SRC}"
    src = scratch / "trec_eval_src"
    shutil.copytree(TREC_SRC, src)
    r = subprocess.run(["make", "-s", f"CC={cc}"], cwd=src, capture_output=True, text=True)
    if r.returncode != 0 or not (src / "trec_eval").exists():
        return None, f"building trec_eval failed: {r.stderr.strip()[:200]}"
    return src / "trec_eval", None


def cli_vs_binary(scratch: Path, qrels: Path, plain: list[Path], repeat: int = 3) -> dict:
    """``rankwise evaluate --qrels Q --format trec_eval RUN x17`` (one process) against the
    trec_eval binary once per run (17 processes), alternated ``repeat`` times (best of each);
    then the same-output check, ``-q -m all_trec``, on one run of each score format, through
    ``rankwise evaluate --format trec_eval`` and through ``rankwise trec_eval``."""
    binary, why = build_trec_eval(scratch)
    env = dict(os.environ, PYTHONPATH=str(SRC))
    cli_cmd = [sys.executable, "-m", "rankwise", "evaluate", "--qrels", str(qrels), "--format", "trec_eval",
               *map(str, plain)]
    cli_times, bin_times, cli_cpu, bin_cpu = [], [], [], []

    def children_cpu():
        t = os.times()
        return t.children_user + t.children_system

    for _ in range(repeat):
        t0, c0 = time.perf_counter(), children_cpu()
        out = subprocess.run(cli_cmd, env=env, capture_output=True, text=True)
        cli_times.append(time.perf_counter() - t0)
        cli_cpu.append(children_cpu() - c0)
        if out.returncode:
            raise SystemExit(out.stderr)
        if binary is not None:
            t0, c0 = time.perf_counter(), children_cpu()
            for p in plain:
                subprocess.run([str(binary), "-m", "all_trec", str(qrels), str(p)], check=True, capture_output=True)
            bin_times.append(time.perf_counter() - t0)
            bin_cpu.append(children_cpu() - c0)
    res = {"cli": min(cli_times), "bin": min(bin_times) if bin_times else None, "why": why,
           "cli_cpu": min(cli_cpu), "bin_cpu": min(bin_cpu) if bin_cpu else None,
           "long": sum(any(long_digits(line.split()[4]) for line in p.read_text().splitlines()) for p in plain)}
    if binary is not None:
        checked = plain[:len(SCORE_FORMATS)]
        for key, cmd in (("evaluate", ["evaluate", "--qrels", str(qrels), "-q", "--format", "trec_eval"]),
                         ("trec_eval", ["trec_eval", "-q", "-m", "all_trec", str(qrels)])):
            same = [0, 0, 0, len(checked)]  # identical lines, binary's lines, rankwise's lines, runs compared
            for p in checked:
                ref_out = subprocess.run([str(binary), "-q", "-m", "all_trec", str(qrels), str(p)],
                                         capture_output=True, text=True).stdout.splitlines()
                mine = subprocess.run([sys.executable, "-m", "rankwise", *cmd, str(p)], env=env, capture_output=True,
                                      text=True).stdout.splitlines()
                same[0] += sum(x == y for x, y in zip(ref_out, mine))
                same[1] += len(ref_out)
                same[2] += len(mine)
            res[key] = same
    return res


def cli_section(cvb: dict, n_runs: int) -> list[str]:
    """The Markdown of ``cli_vs_binary``'s figures."""
    lines = [
        f"| command line, {n_runs} runs ({cvb['long']} of them with scores of more than 15 significant digits) "
        "| seconds (wall) | CPU seconds (user + system) |",
        "|---|---:|---:|",
        f"| `rankwise evaluate --qrels Q --format trec_eval RUN x{n_runs}` (one process, caches warm) "
        f"| {cvb['cli']:.2f} | {cvb['cli_cpu']:.2f} |",
    ]
    if cvb["bin"] is None:
        return lines + ["", f"trec_eval binary comparison skipped: {cvb['why']}."]
    cli, binary = cvb["cli"], cvb["bin"]
    lines.append(f"| `trec_eval -m all_trec Q RUN`, {n_runs} processes (trec_eval 10 binary) | {binary:.2f} "
                 f"| {cvb['bin_cpu']:.2f} |")
    lines += ["", f"Goal CLI <= trec_eval binary: {cli:.2f} s vs {binary:.2f} s, the binary takes {binary / cli:.2f}x "
                  f"as long ({'met' if cli <= binary else 'NOT met'}; best of 3, the two alternated in one run); "
                  f"CPU time {cvb['cli_cpu']:.2f} s vs {cvb['bin_cpu']:.2f} s "
                  f"({cvb['bin_cpu'] / cvb['cli_cpu']:.2f}x)."]
    for key, how in (("evaluate", "`rankwise evaluate --qrels Q -q --format trec_eval RUN`"),
                     ("trec_eval", "`rankwise trec_eval -q -m all_trec Q RUN`")):
        same = cvb[key]
        lines.append(f"Same output, {how}: {same[0]} of {same[1]} `trec_eval -q -m all_trec` lines of {same[3]} runs "
                     f"(one per score format) identical, position by position ({same[2]} lines; `relstring` "
                     "included).")
    return lines


def cli_only(n_topics: int, n_runs: int) -> int:
    """Only the command line against the binary, its rows added to results/bench_trec.md (a
    second measurement beside the full run's; an earlier ``--cli-only`` block is replaced)."""
    scratch = Path(tempfile.mkdtemp(prefix="bench_trec_"))
    try:
        qrels, plain, _ = generate(scratch / "data", n_topics=n_topics, n_runs=n_runs)
        cvb = cli_vs_binary(scratch, qrels, plain)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    new = cli_section(cvb, n_runs)
    new.insert(0, f"Command line rows measured on {time.strftime('%Y-%m-%d')} with `--cli-only` (runs with "
                  f"full-precision scores, `SCORE_FORMATS`; load average {os.getloadavg()[0]:.1f} at the end):")
    new.insert(1, "")
    path = RESULTS / "bench_trec.md"
    old = path.read_text().splitlines() if path.exists() else []
    # after the full run's rows (kept), in place of an earlier --cli-only block
    end = next((i for i, line in enumerate(old) if line.startswith("Largest per-topic difference")), None)
    start = next((i for i, line in enumerate(old) if line.startswith("Command line rows measured")), end)
    if start is None or end is None:
        old, start, end = ["## TREC runs end to end (bench_trec.py)", ""], 2, 2
        new.append("")
    RESULTS.mkdir(exist_ok=True)
    path.write_text("\n".join(old[:start] + new + [""] + old[end:]) + "\n")
    print("\n".join(new))
    return 0


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller collection (20 topics, 5 runs)")
    ap.add_argument("--cli-only", action="store_true", help="only the command line against the trec_eval binary")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(SRC))
    n_topics, n_runs = (20, 5) if args.quick else (100, 17)
    if args.cli_only:
        return cli_only(n_topics, n_runs)
    scratch = Path(tempfile.mkdtemp(prefix="bench_trec_"))
    try:
        t0 = time.perf_counter()
        qrels, plain, gz = generate(scratch / "data", n_topics=n_topics, n_runs=n_runs)
        print(f"generated {n_runs} runs x {n_topics} topics in {time.perf_counter() - t0:.1f}s", flush=True)
        import pytrec_eval

        qrels_d = pytrec_eval.parse_qrel(open(qrels))
        runs_d = {p.name: pytrec_eval.parse_run(open(p)) for p in plain}
        n_judg = sum(len(v) for v in qrels_d.values()) / len(qrels_d)

        rows = {}
        rows["rankwise, files (plain)"] = best_of(lambda: rankwise_files(qrels, plain))
        rows["rankwise, files (.gz)"] = best_of(lambda: rankwise_files(qrels, gz))
        rows["rankwise, dicts"] = best_of(lambda: rankwise_dicts(qrels_d, runs_d))
        print("rankwise done", flush=True)
        rows["pytrec_eval, files (plain)"] = best_of(lambda: pytrec_files(qrels, plain))
        rows["pytrec_eval, files (.gz)"] = best_of(lambda: pytrec_files(qrels, gz))
        rows["pytrec_eval, dicts"] = best_of(lambda: pytrec_dicts(qrels_d, runs_d))
        print("pytrec_eval done", flush=True)
        rows["ranx, files (plain), 16 measures"] = best_of(lambda: ranx_files(qrels, plain), repeat=1)
        rows["ranx, dicts, 16 measures"] = best_of(lambda: ranx_dicts(qrels_d, runs_d), repeat=1)
        print("ranx done", flush=True)
        cpu_rows = {  # the same jobs in CPU seconds (every thread), alternated, a figure less bent by other load
            "rankwise, files (plain)": best_cpu(lambda: rankwise_files(qrels, plain)),
            "pytrec_eval, files (plain)": best_cpu(lambda: pytrec_files(qrels, plain)),
            "rankwise, dicts": best_cpu(lambda: rankwise_dicts(qrels_d, runs_d)),
            "pytrec_eval, dicts": best_cpu(lambda: pytrec_dicts(qrels_d, runs_d)),
        }
        breakdown = dict_breakdown(qrels_d, runs_d)
        pytrec_cpu = min(timeit.repeat(lambda: pytrec_dicts(qrels_d, runs_d), number=1, repeat=3,
                                       timer=time.thread_time))

        # correctness in the same run: per-topic values equal pytrec_eval's (trec_eval9 profile)
        from rankwise.metrics import evaluate_runs
        ours = evaluate_runs(qrels_d, {"r": runs_d[plain[0].name]}, "all_trec", profile="trec_eval9")["r"].per_query
        ref = pytrec_dicts(qrels_d, {"r": runs_d[plain[0].name]})["r"]
        worst = 0.0
        for name in sorted(pytrec_measures()):
            for q in ref:
                if name not in ours.columns:
                    continue
                want = np.exp(ref[q][name]) if name.startswith("gm_") else ref[q][name]
                worst = max(worst, abs(float(ours.loc[q, name]) - want))

        cvb = cli_vs_binary(scratch, qrels, plain)
        # cold and warm first calls in fresh processes
        code = (f"from rankwise.metrics import evaluate_runs; import glob; "
                f"evaluate_runs({str(qrels)!r}, sorted(glob.glob({str(scratch / 'data' / 'run*.txt')!r})), 'all_trec')")
        caches = {"PYTHONPYCACHEPREFIX": str(scratch / "pyc"), "NUMBA_CACHE_DIR": str(scratch / "numba")}
        cold_first = fresh_process(code, env=caches)  # new, empty caches
        warm_first = fresh_process(code, env=caches)  # the caches the cold run left
        import_time = fresh_process("import rankwise.metrics")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    pf, pd_ = rows["pytrec_eval, files (plain)"], rows["pytrec_eval, dicts"]
    from rankwise._validation import kernel_threads
    from rankwise.metrics import GROUPS

    n_values = len(GROUPS["all_trec"])
    lines = [
        "## TREC runs end to end (bench_trec.py)",
        "",
        f"{n_runs} runs x {n_topics} topics x 1,000 documents, qrels with {n_judg:.0f} graded judgments per topic; "
        f"every trec_eval `all_trec` measure (rankwise: {n_values} values and `relstring` per topic; pytrec_eval: {len(pytrec_measures())} measures, {len(next(iter(ref.values())))} values). "
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared; load average {os.getloadavg()[0]:.1f} at the "
        f"end of the run), Python {platform.python_version()}. "
        "In-process times: best of 3 after a warm-up.",
        "",
        f"Measured on {time.strftime('%Y-%m-%d')}. The runs are written as systems write them, full precision: "
        f"{', '.join(SCORE_FORMATS)} scores in turn ({cvb['long']} of the {n_runs} runs carry scores of more than 15 "
        "significant digits), every fifth run tab-separated, a third with scores rounded to 3 decimals (ties).",
        "",
        "| tool / path | seconds | rankwise speed-up |",
        "|---|---:|---:|",
    ]
    for name, t in rows.items():
        if name.startswith("rankwise"):
            lines.append(f"| {name} | {t:.3f} | — |")
    ratios = {
        "pytrec_eval, files (plain)": rows["rankwise, files (plain)"],
        "pytrec_eval, files (.gz)": rows["rankwise, files (.gz)"],
        "pytrec_eval, dicts": rows["rankwise, dicts"],
        "ranx, files (plain), 16 measures": rows["rankwise, files (plain)"],
        "ranx, dicts, 16 measures": rows["rankwise, dicts"],
    }
    for name, ours in ratios.items():
        lines.append(f"| {name} | {rows[name]:.3f} | {rows[name] / ours:.1f}x |")
    lines += [
        "",
        f"Goal rankwise >= 5x pytrec_eval: from files {pf / rows['rankwise, files (plain)']:.1f}x "
        f"({'met' if pf / rows['rankwise, files (plain)'] >= 5 else 'NOT met'}), from dicts "
        f"{pd_ / rows['rankwise, dicts']:.1f}x ({'met' if pd_ / rows['rankwise, dicts'] >= 5 else 'NOT met'}).",
        f"In CPU seconds of the process (every thread, best of 3): rankwise {cpu_rows['rankwise, files (plain)']:.3f} "
        f"against pytrec_eval {cpu_rows['pytrec_eval, files (plain)']:.3f} from files "
        f"({cpu_rows['pytrec_eval, files (plain)'] / cpu_rows['rankwise, files (plain)']:.1f}x), "
        f"{cpu_rows['rankwise, dicts']:.3f} against {cpu_rows['pytrec_eval, dicts']:.3f} from dicts "
        f"({cpu_rows['pytrec_eval, dicts'] / cpu_rows['rankwise, dicts']:.1f}x).",
        "",
        "Where the dict path's time goes (CPU seconds of one thread, best of 3, the 17 runs together, "
        "topic by topic; the in-process figures above are wall times with the topics shared between "
        f"{min(n_runs, kernel_threads(None))} threads):",
        "",
        "| part | CPU s |",
        "|---|---:|",
        *[f"| {k} | {v:.3f} |" for k, v in breakdown.items()],
        f"| pytrec_eval, dicts (for comparison) | {pytrec_cpu:.3f} |",
        "",
        *cli_section(cvb, n_runs),
    ]
    lines += [
        "",
        f"Largest per-topic difference from pytrec_eval (profile `trec_eval9`, every measure pytrec_eval has): "
        f"{worst:.1e}.",
        f"Fresh process, `evaluate_runs` on the {n_runs} plain files: {cold_first:.2f} s cold (no bytecode or JIT "
        f"cache), {warm_first:.2f} s warm. `import rankwise.metrics`: {import_time:.2f} s "
        "(process start included).",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_trec.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
