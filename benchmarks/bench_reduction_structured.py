"""Reduction-to-classification and structured-hinge rankers on MQ2008, against LightGBM lambdarank.

Quality: mean NDCG@10 (exp2 gain, ties averaged, empty queries 0) on the test split of each fold
(five folds; --quick: Fold1 only), fit and predict times, ratio to the LightGBM peer run in the
same process. Speed: loss-augmented inference for lists of 10, 100, 1000 items: the NDCG@10
maximiser by DP against scipy's linear_sum_assignment (the generic exact solver), and the
multivariate maximiser (sort within Y_{a,b}) against brute-force enumeration where feasible.

Usage: python benchmarks/bench_reduction_structured.py [--quick] [--data DIR]
Writes benchmarks/results/bench_reduction_structured.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def load_fold(d: Path, fold: int):
    from sklearn.datasets import load_svmlight_file

    out = []
    for split in ("train", "test"):
        X, y, q = load_svmlight_file(str(d / f"Fold{fold}" / f"{split}.txt.gz"), query_id=True, n_features=46)
        out.append((X.toarray().astype(np.float32), y, q))
    return out


def models():
    from lightgbm import LGBMClassifier
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    from rankwise.models import PairwiseReductionRanker, StructuredHingeRanker

    return {
        "reduction LogisticRegression (aggregate)": lambda: PairwiseReductionRanker(
            LogisticRegression(max_iter=1000), weights="none", random_state=0),
        "reduction LogisticRegression, ω=ndcg (quicksort)": lambda: PairwiseReductionRanker(
            LogisticRegression(max_iter=1000), weights="ndcg", inference="quicksort", random_state=0),
        "reduction LinearSVC (aggregate)": lambda: PairwiseReductionRanker(
            LinearSVC(C=0.1), weights="kemeny", random_state=0),
        "reduction HistGradientBoosting (aggregate, 30 pairs/query)": lambda: PairwiseReductionRanker(
            HistGradientBoostingClassifier(max_iter=100, random_state=0), weights="kemeny", pairs=30,
            random_state=0),
        "reduction LGBMClassifier (aggregate, 30 pairs/query)": lambda: PairwiseReductionRanker(
            LGBMClassifier(n_estimators=100, verbose=-1, n_jobs=2, random_state=0), weights="ndcg", pairs=30,
            random_state=0),
        "StructuredHingeRanker ndcg@10": lambda: StructuredHingeRanker("ndcg@10", max_iter=10, random_state=0),
        "StructuredHingeRanker precision@5": lambda: StructuredHingeRanker("precision@5", max_iter=10, random_state=0),
    }


def quality(data_dir: Path, folds):
    import lightgbm as lgb

    from rankwise.metrics import ndcg

    rows = {}
    for fold in folds:
        (X, y, q), (Xt, yt, qt) = load_fold(data_dir, fold)
        # peer: LightGBM lambdarank
        t0 = time.perf_counter()
        order_sizes = [int(np.sum(q == g)) for g in dict.fromkeys(q.tolist())]
        peer = lgb.LGBMRanker(n_estimators=200, learning_rate=0.05, verbose=-1, n_jobs=2, random_state=0)
        peer.fit(X, y, group=order_sizes)
        t1 = time.perf_counter()
        sp = peer.predict(Xt)
        t2 = time.perf_counter()
        rows.setdefault("LightGBM LGBMRanker lambdarank (peer)", []).append(
            (ndcg(sp, yt, qid=qt, k=10), t1 - t0, t2 - t1))
        for name, make in models().items():
            m = make()
            t0 = time.perf_counter()
            m.fit(X, y, qid=q)
            t1 = time.perf_counter()
            s = m.predict(Xt, qid=qt) if hasattr(m, "n_pairs_") else m.predict(Xt)
            t2 = time.perf_counter()
            rows.setdefault(name, []).append((ndcg(s, yt, qid=qt, k=10), t1 - t0, t2 - t1))
            print(f"fold {fold} {name}: {rows[name][-1][0]:.4f} fit {t1 - t0:.2f}s", flush=True)
        const = ndcg(np.zeros(len(yt)), yt, qid=qt, k=10)
        rows.setdefault("constant score (ties averaged)", []).append((const, 0.0, 0.0))
    return rows


def _time(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def inference_table():
    from reference.structured_reference import multivariate_hinge_brute

    from rankwise.models.structured import multivariate_hinge_argmax, ndcg_hinge_argmax

    rng = np.random.default_rng(0)
    out = []
    for r in (10, 100, 1000):
        s = rng.normal(size=r)
        y = rng.integers(0, 3, size=r).astype(float)  # graded labels 0/1/2 as MQ2008
        rep = 20 if r <= 100 else 3
        t_dp = _time(lambda: ndcg_hinge_argmax(s, y, k=10, method="dp"), rep)
        t_as = _time(lambda: ndcg_hinge_argmax(s, y, k=10, method="assignment"), rep)
        a = ndcg_hinge_argmax(s, y, k=10, method="dp").value
        b = ndcg_hinge_argmax(s, y, k=10, method="assignment").value
        assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), (a, b)
        t_full = _time(lambda: ndcg_hinge_argmax(s, y, method="auto"), rep)
        t_mv = _time(lambda: multivariate_hinge_argmax(s, y, measure="precision", k=5), rep)
        t_f1 = _time(lambda: multivariate_hinge_argmax(s, y, measure="f1"), rep)
        if r == 10:
            res = multivariate_hinge_argmax(s, y, measure="precision", k=5)
            t_brute = _time(lambda: multivariate_hinge_brute(list(s), list(y), "precision", 5, "eq",
                                                             list(res.reference)), 2)
            brute = f"{t_brute * 1e3:.2f} ms (×{t_brute / t_mv:.0f})"
        else:
            brute = f"2^{r} vectors: infeasible"
        out.append((r, t_dp, t_as, t_full, t_mv, t_f1, brute))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="Fold1 only")
    ap.add_argument("--data", default=os.environ.get("RANKWISE_DATA", str(ROOT.parent / "shared" / "data")))
    args = ap.parse_args()
    d = Path(args.data) / "MQ2008"
    folds = [1] if args.quick else [1, 2, 3, 4, 5]
    lines = ["## Reduction to classification and structured hinge rankers (`bench_reduction_structured.py`)", ""]
    inf = inference_table()
    lines += [
        "Loss-augmented inference, one list, graded labels in {0,1,2}, best of repeated runs (1 process):",
        "",
        "| r | NDCG@10 argmax, DP | NDCG@10 argmax, linear_sum_assignment (peer) | DP speed-up | full NDCG argmax (auto) "
        "| precision@5 argmax (sort in Y_{a,b}) | F1 argmax | precision@5 brute force |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r, t_dp, t_as, t_full, t_mv, t_f1, brute in inf:
        lines.append(f"| {r} | {t_dp * 1e3:.3f} ms | {t_as * 1e3:.3f} ms | ×{t_as / t_dp:.1f} | {t_full * 1e3:.3f} ms "
                     f"| {t_mv * 1e3:.3f} ms | {t_f1 * 1e3:.3f} ms | {brute} |")
    lines.append("")
    if (d / "Fold1" / "train.txt.gz").exists():
        rows = quality(d, folds)
        peer = np.mean([v[0] for v in rows["LightGBM LGBMRanker lambdarank (peer)"]])
        lines += [f"MQ2008 test NDCG@10 (exp2 gain, ties averaged, empty queries 0), mean over folds {folds}; "
                  "times are per fold on 2 cores:", "",
                  "| model | NDCG@10 | ratio to LightGBM | fit s | predict s |", "|---|---:|---:|---:|---:|"]
        for name, vals in rows.items():
            arr = np.array(vals)
            lines.append(f"| {name} | {arr[:, 0].mean():.4f} ± {arr[:, 0].std():.4f} | {arr[:, 0].mean() / peer:.3f} "
                         f"| {arr[:, 1].mean():.2f} | {arr[:, 2].mean():.3f} |")
    else:
        lines.append(f"MQ2008 absent at {d}: quality table not run.")
    text = "\n".join(lines) + "\n"
    out = ROOT / "benchmarks" / "results" / "bench_reduction_structured.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
