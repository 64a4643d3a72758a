"""Fuzzing rankwise as an attacker or a careless pipeline would feed it (issue 17).

``python benchmarks/fuzz.py [--scale 1.0] [--seed 17]`` runs a cheap mutation loop (one core)
of at least 100,000 cases over every reader (LETOR/SVMlight, group files, TREC qrels and runs,
MovieLens 100k, event logs), the arrays API (``metrics.evaluate``, ``losses.grad_hess``, model
``fit``/``predict`` with adversarial arrays) and model loading (damaged files with stale digests
and forged files with recomputed digests around a mutated booster text), and counts per target:
process deaths, hangs, exceptions that are not ``RankwiseError``, silent accepts of invalid
input, NaN/inf outputs. The oracles are those of ``tests/fuzz/targets.py`` (the SVMlight oracle is
an independent reference reader; an accepted file must read the same).

Model files are loaded in a worker process (a pool of one) with a timeout, so a crash or a hang
is counted, not suffered. As the peer baseline, the same forged booster texts are also handed
to LightGBM / XGBoost directly (no rankwise checks), each in a forked child, for the first
``--raw`` mutations per backend.

Writes benchmarks/results/bench_fuzz.md (and the first reproducer of every finding under it).
"""
from __future__ import annotations

import argparse
import atexit
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests" / "fuzz"))
sys.path.insert(0, str(HERE.parent / "tests" / "models"))

import numpy as np  # noqa: E402

import targets as T  # noqa: E402

RESULTS = HERE / "results"
COLUMNS = ("death", "hang", "other_exception", "silent_accept", "nonfinite")
#: targets whose code this work owns (the others are reported for routing)
OWN = ("svmlight", "group file", "event logs", "pandas frames", "Parquet files", "model files, damaged",
       "model files, forged")

# ---------------------------------------------------------------------------- text mutations
ALPHABET = [b"\r", b"\n", b"\r\n", b"\x00", b"#", b":", b" ", b"\t", b"_", b"\xef\xbb\xbf", "١".encode(),
            "１".encode(), "²".encode(), b"9", b"0", b"1", b"-", b"+", b".", b"e", b"\xff", b"qid:", b"NULL",
            b"9223372036854775808", b"1000000000000000000000000000000", b"nan", b"inf", b"1e400", b"\x1b"]


def mutate(seed: bytes, rng: random.Random) -> bytes:
    b = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(b))
        op = rng.randrange(4)
        if op == 0:
            b[pos:pos] = rng.choice(ALPHABET)
        elif op == 1 and pos < len(b):
            b[pos:pos + 1] = rng.choice(ALPHABET)
        elif op == 2 and pos < len(b):
            del b[pos:pos + rng.randint(1, 8)]
        elif pos < len(b):  # a digit changed
            digits = [i for i, c in enumerate(b) if 48 <= c <= 57]
            if digits:
                b[rng.choice(digits)] = 48 + rng.randrange(10)
    if rng.random() < 0.03:
        b = b.replace(b"\n", b"\r")  # a whole file with classic-Mac line endings
    return bytes(b)


NUMBERS = ["0", "1", "2", "-1", "+3", "0.5", ".5", "1.", "1e3", "-0", "1023", "1024", "-1023.5", "1e30",
           "1000000000000000000000000000000", "nan", "inf", "1e400", "3.5e38", "١", "１", "1_0", "²", "", "NULL",
           "99999999999999999999"]
QIDS = ["1", "2", "7", "-3", "9223372036854775807", "9223372036854775808", "99999999999999999999", "1_0", "٣", "x"]


def letor_lines(rng: random.Random) -> bytes:
    end = rng.choice(["\n", "\n", "\r\n"])
    out = []
    for _ in range(rng.randint(1, 6)):
        toks = [rng.choice(NUMBERS[:12] if rng.random() < 0.7 else NUMBERS)]
        if rng.random() < 0.95:
            toks.append("qid:" + rng.choice(QIDS[:3] if rng.random() < 0.7 else QIDS))
        idx = sorted(rng.sample(range(1, 6), rng.randint(0, 4)))
        toks += [f"{i}:{rng.choice(NUMBERS[:8] if rng.random() < 0.8 else NUMBERS)}" for i in idx]
        if rng.random() < 0.1:
            toks.append(rng.choice(["0:1", "9223372036854775808:1", "3:1", "x:1", "1_0:2"]))
        line = rng.choice([" ", " ", "\t", "  "]).join(toks)
        line += rng.choice(["", " #docid = a", " #docid = b", " # c", " #docid = x\x00y", " #docid = \ufeffz"])
        out.append(line + (end if rng.random() < 0.95 else rng.choice(["\r", "\n", "\r\n"])))
    data = "".join(out).encode("utf-8")
    return (b"\xef\xbb\xbf" + data) if rng.random() < 0.03 else data


LETOR_SEED = (b"2 qid:10 1:0.5 2:1.25 3:-3e2 #docid = GX001\n0 qid:10 1:0.1 3:7 #docid = GX002\n"
              b"1 qid:11 2:NULL 3:0 #docid = GX003\n")
QRELS_SEED = b"301 0 FBIS3-10082 1\n301 0 FBIS3-10169 0\n302 0 LA010189-0001 2\n"
RUN_SEED = b"301 Q0 FBIS3-10082 1 12.5 tag\n301 Q0 FBIS3-10169 2 11.25 tag\n302 Q0 LA010189-0001 1 -3 tag\n"
GROUP_SEED = b"3\n2\n5\n"


# ---------------------------------------------------------------------------- arrays
EXTREME = [0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 4.0, 1e308, -1e308, 1e-308, 5e-324, 1e38, 65504.0, 1e5, float("nan"),
           float("inf"), -float("inf")]
DTYPES = ["float64", "float32", "float16", "int64", "object-str", "bool"]


def arrays(rng: random.Random):
    n = rng.randint(0, 14)
    scores = [rng.choice(EXTREME[:14] if rng.random() < 0.8 else EXTREME) for _ in range(n)]
    labels = [rng.choice([0.0, 1.0, 2.0, 3.0, 4.0] if rng.random() < 0.7 else EXTREME) for _ in range(n)]
    qid = sorted(rng.randrange(4) for _ in range(n))
    if n and rng.random() < 0.05:
        qid = qid[:-1]

    def cast(xs, dt):
        if dt == "object-str":
            return np.array([str(x) for x in xs], dtype=object)
        if dt == "bool":
            return np.array(xs, dtype=np.float64) != 0
        with np.errstate(all="ignore"):
            return np.array(xs, dtype=np.float64).astype(dt)

    pick = (lambda: rng.choice(DTYPES[:3])) if rng.random() < 0.85 else (lambda: rng.choice(DTYPES))
    return cast(scores, pick()), cast(labels, pick()), np.array(qid, dtype=np.int64)


LOSSES = ["listnet", "listmle", "ranknet", "lambdaloss", "approx_ndcg", "pairwise_hinge", "pairwise_squared",
          "pointwise_squared", "pointwise_logistic", "pointwise_smooth_hinge", "smooth_dcg", "kendall_hinge",
          "rankboost", "sigmoid_ce", "bregman", "op_pairwise", "pointwise_exponential", "smooth_dcg1"]


# ---------------------------------------------------------------------------- the loop
class Tally:
    def __init__(self):
        self.counts = defaultdict(Counter)
        self.examples = {}
        self.seconds = Counter()

    def add(self, target, result, reproducer):
        outcome, detail = result
        self.counts[target][outcome] += 1
        if outcome in T.BAD and (target, outcome) not in self.examples:
            self.examples[(target, outcome)] = (reproducer, detail)


def run_text(tally, name, fn, seed, n, rng, generate=None):
    t0 = time.perf_counter()
    for _ in range(n):
        data = generate(rng) if generate is not None and rng.random() < 0.5 else mutate(seed, rng)
        tally.add(name, fn(data), repr(data[:300]))
    tally.seconds[name] += time.perf_counter() - t0


def raw_baseline(files, n_raw, rng):
    """Forged booster texts handed to the library itself (no rankwise check), one forked child each."""
    from _crash_cases import raw_library_outcome

    from rankwise.models import persistence

    out = {}
    for backend in ("lightgbm", "xgboost"):
        path = files[backend]
        text = persistence._array(path, "booster", persistence.raw_entries(path)["booster"]).tobytes()
        c = Counter()
        for _ in range(n_raw):
            c[raw_library_outcome(backend, T.mutate_text(text, rng), T.PROBE, timeout=20.0)] += 1
        out[backend] = c
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case count (1.0: 100,000+ cases)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--raw", type=int, default=500, help="forged texts per backend given to the bare library")
    ap.add_argument("--out", default=str(RESULTS / "bench_fuzz.md"))
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    k = args.scale
    plan = {"svmlight": int(42000 * k), "group file": int(12000 * k), "TREC qrels": int(9000 * k),
            "TREC run": int(9000 * k), "MovieLens 100k": int(3000 * k), "event logs": int(1000 * k),
            "pandas frames": int(1000 * k), "Parquet files": int(1000 * k),
            "metrics.evaluate": int(16000 * k), "losses.grad_hess": int(6000 * k), "model fit/predict": int(500 * k),
            "model files, damaged": int(2000 * k), "model files, forged": int(3000 * k)}
    tally = Tally()
    t_start = time.perf_counter()
    folder = tempfile.mkdtemp(prefix="rankwise-fuzz-models-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    atexit.register(shutil.rmtree, folder, True)
    files = T.model_files(folder)  # fitted before any fork: the raw baseline forks from here
    raw = raw_baseline(files, int(args.raw * min(k, 1.0)) if k < 1 else args.raw, rng)
    print("raw library baseline:", {b: dict(c) for b, c in raw.items()}, flush=True)

    run_text(tally, "svmlight", T.svmlight, LETOR_SEED, plan["svmlight"], rng, letor_lines)
    print("svmlight done", flush=True)
    run_text(tally, "group file", T.group_file, GROUP_SEED, plan["group file"], rng)
    run_text(tally, "TREC qrels", T.trec_qrels, QRELS_SEED, plan["TREC qrels"], rng)
    run_text(tally, "TREC run", T.trec_run, RUN_SEED, plan["TREC run"], rng)
    print("text readers done", flush=True)

    t0 = time.perf_counter()
    seeds = {"u1.base": T.BASE, "u1.test": T.TEST, "u.item": T.ITEMS}
    for _ in range(plan["MovieLens 100k"]):
        which = rng.choice(list(seeds))
        if which != "u.item" and rng.random() < 0.5:
            fields = ["1", "2", "3", "0", "-1", "6", "99", "2000000", "999999999", "1000000000", "x", "", "1.5"]
            blob = seeds[which] + f"{rng.choice(fields)}\t{rng.choice(fields)}\t{rng.choice(fields)}\t1\n".encode()
        else:
            blob = mutate(seeds[which], rng)
        tally.add("MovieLens 100k", T.movielens({which: blob}), f"{which}: {blob[:200]!r}")
    tally.seconds["MovieLens 100k"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    pool = [1, 2, 3, "a", "b", None, float("nan"), 10**20, -1, 2.5]
    for _ in range(plan["event logs"]):
        n = rng.randint(1, 8)
        spec = ([rng.choice(pool) for _ in range(n)], [rng.choice(pool) for _ in range(n)],
                [rng.choice([0, 1, True, False, "success", "fail", "yes", None, float("nan"), 0.5, 2, "1"])
                 for _ in range(n)],
                [rng.choice([0.0, 1.5, float("nan"), float("inf"), 1e308, 1e39]) for _ in range(n)],
                rng.choice(["any", "last", "majority"]))
        tally.add("event logs", T.events(spec), repr(spec))
    tally.seconds["event logs"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    qpool = [1, 2, "a", None, float("nan"), 2.5, 10**20, True]
    vpool = [0.0, 1.0, 2.0, float("nan"), float("inf"), 1e308, -1.0, None, "x"]
    for _ in range(plan["pandas frames"]):
        n = rng.randint(1, 6)
        spec = ([rng.choice(qpool[:2] if rng.random() < 0.6 else qpool) for _ in range(n)],
                [rng.choice(vpool[:3] if rng.random() < 0.6 else vpool) for _ in range(n)],
                [rng.choice(vpool[:3] if rng.random() < 0.6 else vpool) for _ in range(n)])
        tally.add("pandas frames", T.frames(spec), repr(spec))
    tally.seconds["pandas frames"] += time.perf_counter() - t0
    run_text(tally, "Parquet files", T.parquet, T.parquet_seed(), plan["Parquet files"], rng)
    print("MovieLens / events done", flush=True)

    t0 = time.perf_counter()
    for _ in range(plan["metrics.evaluate"]):
        s, y, q = arrays(rng)
        metrics = rng.sample(T.METRICS, rng.randint(1, 3))
        profile = rng.choice(T.PROFILES)
        tally.add("metrics.evaluate", T.metrics_evaluate(s, y, q, metrics, profile),
                  f"evaluate({s!r}, {y!r}, {q!r}, metrics={metrics}, profile={profile!r})")
    tally.seconds["metrics.evaluate"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(plan["losses.grad_hess"]):
        s, y, q = arrays(rng)
        sizes = np.bincount(q) if len(q) else np.zeros(0, dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes[sizes > 0]))).astype(np.int64)
        loss = rng.choice(LOSSES)
        tally.add("losses.grad_hess", T.losses_grad_hess(loss, s, y, offsets),
                  f"grad_hess({loss!r}, {s!r}, {y!r}, {offsets!r})")
    tally.seconds["losses.grad_hess"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    vals = [0.0, 1.0, -2.0, 0.5, 1e30, -1e30, 1e-30, 3.4e38, float("nan"), float("inf")]
    for _ in range(plan["model fit/predict"]):
        kind = rng.choice(["linear", "gbdt", "neural"])
        n, d = rng.randint(2, 12), rng.randint(1, 3)
        X = np.array([rng.choice(vals[:7] if rng.random() < 0.8 else vals) for _ in range(n * d)]).reshape(n, d)
        y = np.array([rng.choice([0.0, 1.0, 2.0, 4.0] if rng.random() < 0.8 else [1e308, -1.0, float("nan")])
                      for _ in range(n)])
        qid = np.sort(np.array([rng.randrange(3) for _ in range(n)]))
        Xt = np.array([rng.choice(vals) for _ in range(2 * d)]).reshape(2, d)
        with np.errstate(all="ignore"):
            X = X.astype(np.float32) if rng.random() < 0.5 else X
        tally.add("model fit/predict", T.model_fit_predict(kind, X, y, qid, Xt),
                  f"{kind}: fit({X!r}, {y!r}, qid={qid!r}); predict({Xt!r})")
    tally.seconds["model fit/predict"] += time.perf_counter() - t0
    print("arrays API done", flush=True)

    import rankwise
    from rankwise.models import persistence

    loader = T.ChildLoader(timeout=30.0)
    loader(files["linear"])  # start the worker outside the timed loop
    t0 = time.perf_counter()
    expected = {name: rankwise.load(p).predict(T.PROBE) for name, p in files.items()}
    names = list(files)
    case = os.path.join(folder, "case.npz")
    for _ in range(plan["model files, damaged"]):
        name = rng.choice(names)
        data = T.mutate_zip_bytes(open(files[name], "rb").read(), rng)
        with open(case, "wb") as fh:
            fh.write(data)
        result = loader(case, expected[name])
        if result[0] in T.BAD:
            keep = os.path.join(folder, f"finding-damaged-{name}.npz")
            os.replace(case, keep)
        tally.add("model files, damaged", result, f"{name}: see {folder}")
    tally.seconds["model files, damaged"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    texts = {b: persistence._array(files[b], "booster", persistence.raw_entries(files[b])["booster"]).tobytes()
             for b in T.GBDT_SEEDS}  # with the seeds holding NaN splits, categorical splits and linear trees
    for _ in range(plan["model files, forged"]):
        b = rng.choice(T.GBDT_SEEDS)
        blob = T.mutate_text(texts[b], rng)
        e = dict(persistence.raw_entries(files[b]), booster=persistence._npy_bytes(np.frombuffer(blob, dtype=np.uint8)))
        persistence.forge(case, e)
        result = loader(case)
        tally.add("model files, forged", result, f"{b}: booster text {blob[:200]!r}...")
    tally.seconds["model files, forged"] += time.perf_counter() - t0
    loader.close()
    for d in (folder, *T._SCRATCH):
        shutil.rmtree(d, ignore_errors=True)
    total_s = time.perf_counter() - t_start
    write(args, tally, raw, total_s)
    bad = sum(tally.counts[t][c] for t in tally.counts for c in COLUMNS)
    print(f"{sum(sum(c.values()) for c in tally.counts.values())} cases, {bad} findings, {total_s:.0f} s")
    return 0


def write(args, tally, raw, total_s):
    import lightgbm
    import xgboost

    rows = []
    tot = Counter()
    for target, c in tally.counts.items():
        n = sum(c.values())
        tot.update(c)
        tot["cases"] += n
        rows.append(f"| {target} | {n:,} | " + " | ".join(f"{c[k]:,}" for k in COLUMNS)
                    + f" | {c['rankwise_error']:,} | {c['ok']:,} | {tally.seconds[target]:.0f} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "## Fuzzing: hostile files, arrays and model files (benchmarks/fuzz.py)",
        "",
        f"`python benchmarks/fuzz.py --seed {args.seed} --scale {args.scale:g}`: a cheap mutation loop on one core "
        f"(seed {args.seed}), every case judged by the oracles of `tests/fuzz/targets.py`; model files loaded in a "
        "worker process with a 30 s timeout. A *silent accept* is an input of a class issue 17 lists as invalid "
        "(or, for LETOR files, one the independent reference reader refuses or reads differently) that was "
        "accepted; for damaged model files, a file that loads with other predictions. "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, LightGBM "
        f"{lightgbm.__version__}, XGBoost {xgboost.__version__}; {total_s / 60:.1f} min in all, 1-minute load "
        f"average {load:.1f} at the end.",
        "",
        "| target | cases | process deaths | hangs | non-rankwise exceptions | silent accepts | NaN/inf outputs "
        "| refused (RankwiseError) | valid | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        f"| **all** | **{tot['cases']:,}** | " + " | ".join(f"**{tot[k]:,}**" for k in COLUMNS)
        + f" | {tot['rankwise_error']:,} | {tot['ok']:,} | {total_s:.0f} |",
        "",
        "The same kind of forged booster texts handed to the library directly (no rankwise check), each in a "
        "forked child (the peer baseline: what `load(untrusted=True)` and the booster-text validation protect "
        "against):",
        "",
        "| library | texts | killed the process | hung (> 20 s) | Python exception | loaded |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for backend, c in raw.items():
        killed = sum(v for k, v in c.items() if k not in ("ok", "error", "hang"))
        lines.append(f"| {backend} | {sum(c.values()):,} | {killed:,} | {c['hang']:,} | {c['error']:,} | {c['ok']:,} |")
    goal = "met" if tot["cases"] >= 100_000 and not any(tot[k] for k in COLUMNS) else "not met"
    lines += ["", f"Goal (issue 17: 0 deaths, 0 hangs, 0 non-rankwise exceptions, 0 silent accepts, 0 NaN/inf "
                  f"over ≥ 100,000 cases): **{goal}** ({tot['cases']:,} cases, "
                  f"{sum(tot[k] for k in COLUMNS):,} findings)."]
    own = [t for t in tally.counts if t in OWN]
    own_cases = sum(sum(tally.counts[t].values()) for t in own)
    own_bad = sum(tally.counts[t][c] for t in own for c in COLUMNS)
    other_cases = sum(sum(tally.counts[t].values()) for t in tally.counts if t not in OWN)
    other_bad = sum(tally.counts[t][c] for t in tally.counts if t not in OWN for c in COLUMNS)
    lines += ["", f"The readers and model loading hardened in issue 17's hostile-input work ({', '.join(own)}): "
                  f"{own_bad:,} findings in {own_cases:,} cases. The other targets (TREC readers, MovieLens, "
                  f"metrics, losses, models; code hardened elsewhere): {other_bad:,} findings in {other_cases:,} "
                  "cases" + (", listed below." if other_bad else ".")]
    if tally.examples:
        lines += ["", "First reproducer of each finding (target, class: input → what happened):", ""]
        for (target, outcome), (rep, detail) in sorted(tally.examples.items()):
            rep, detail = " ".join(rep.split()), " ".join(detail.split())  # one line per finding
            lines.append(f"- {target}, {outcome}: `{rep[:400]}` → {detail[:300]}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
