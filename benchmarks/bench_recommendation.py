"""Recommendation on MovieLens 100k: baselines next to models, NDCG@10 on a per-user time-based split.

The user's path end to end: the ml-100k folder → ``load_movielens`` → ``recommendation_data``
(per-user time split, 20% latest ratings of each user held out; candidate lists = the user's
rated items + 100 sampled unrated items; features from the training period only, as of each
user's cutoff) → fit each ranker on the training lists → NDCG@10 (exp2 gain on the rating,
negatives 0; ties averaged) on the test lists. Every model gets the same lists and features and
its default settings, except where the table says otherwise; the peer is LightGBM's
``LGBMRanker`` (lambdarank, its defaults) on the same features, run in the same process. The
negative sample is drawn with each seed in ``--seeds``: the table gives the mean and standard
deviation over them (models seeded with the same value).

Usage: python benchmarks/bench_recommendation.py [--seeds 0 1 2] [--data DIR]
Writes benchmarks/results/bench_recommendation.md (the table docs/recommendation.md shows).
"""
from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

N_NEGATIVES = 100
TEST_FRACTION = 0.2
REDUCTION_PAIRS = 1000  # pairs='all': 24.5 million pair rows (2.7 GB of float32 pair features) per fit


class _LGBMPeer:
    """LightGBM's own LGBMRanker (lambdarank) with the group sizes it expects."""

    def __init__(self, seed):
        self.seed = seed

    def fit(self, ds):
        from lightgbm import LGBMRanker

        # threads: LightGBM's default (OpenMP's), as for GBDTRanker, which leaves n_jobs unset too
        self.model = LGBMRanker(random_state=self.seed, verbose=-1)
        labels = ds.labels.astype(int)  # lambdarank takes integer grades: ratings 1..5, negatives 0
        self.model.fit(ds.X, labels, group=ds.query_sizes)
        return self

    def predict(self, X, *, qid=None):
        return self.model.predict(X)


def models(seed):
    from rankwise.models import (GBDTRanker, ItemMeanRanker, LinearRanker, PairwiseReductionRanker,
                                 PopularityRanker)

    return {
        "PopularityRanker (baseline: training-period rating count)": lambda: PopularityRanker(),
        "ItemMeanRanker (baseline: training-period mean rating)": lambda: ItemMeanRanker(),
        "LinearRanker": lambda: LinearRanker(random_state=seed),
        "GBDTRanker": lambda: GBDTRanker(random_state=seed),
        f"PairwiseReductionRanker (pairs={REDUCTION_PAIRS} per user)": lambda: PairwiseReductionRanker(
            pairs=REDUCTION_PAIRS, random_state=seed),
        "LightGBM LGBMRanker lambdarank (peer)": lambda: _LGBMPeer(seed),
    }


def run(data_dir: Path, seeds):
    from rankwise.data.movielens import load_movielens
    from rankwise.data.recsys import recommendation_data
    from rankwise.metrics import ndcg

    t = time.perf_counter()
    ml = load_movielens(data_dir / "ml-100k")
    t_read = time.perf_counter() - t
    results: dict[str, list] = {}
    info = {}
    for seed in seeds:
        t = time.perf_counter()
        train, test = recommendation_data(ml.ratings, ml.items, test_fraction=TEST_FRACTION, n_negatives=N_NEGATIVES,
                                          random_state=seed)
        t_prep = time.perf_counter() - t
        info = {"read": t_read, "prep": t_prep, "train": train, "test": test}
        q = test.qid
        kw = dict(qid=q, k=10, gain="exp2", ties="average", empty=0.0)
        results.setdefault("random order (constant score)", []).append(
            (float(ndcg(np.zeros(len(test)), test.labels, **kw)), 0.0, 0.0))
        for name, make in models(seed).items():
            model = make()
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(train)
            t_fit = time.perf_counter() - t
            t = time.perf_counter()
            # qid where predict takes it (the reduction compares the rows of a list); a model
            # scoring rows one by one does not need it
            takes_qid = "qid" in inspect.signature(model.predict).parameters
            scores = model.predict(test.X, qid=test.qid) if takes_qid else model.predict(test.X)
            t_pred = time.perf_counter() - t
            value = float(ndcg(scores, test.labels, **kw))
            if hasattr(model, "score"):  # the estimator's own score (mean NDCG@10, same conventions) agrees
                assert abs(model.score(test) - value) < 1e-9, (name, model.score(test), value)
            results.setdefault(name, []).append((value, t_fit, t_pred))
            print(f"seed {seed} {name}: NDCG@10 {value:.4f} fit {t_fit:.1f}s predict {t_pred:.2f}s", flush=True)
    return results, info


def table(results, info, seeds) -> str:
    train, test = info["train"], info["test"]
    peer = "LightGBM LGBMRanker lambdarank (peer)"
    peer_mean = np.mean([r[0] for r in results[peer]])
    linear_fit = np.mean([r[1] for r in results["LinearRanker"]])
    lines = ["## Recommendation on MovieLens 100k (`bench_recommendation.py`)", "",
             f"ml-100k, per-user time split (each user's latest {TEST_FRACTION:.0%} of ratings held out; ratings "
             "sharing the cutoff second held out together), candidate lists = the user's rated items + "
             f"{N_NEGATIVES} unrated items sampled uniformly, {train.n_features} features from the training period "
             "as of each user's cutoff (`rankwise.data.recsys.recommendation_data`). "
             f"Training: {len(train):,} rows in {train.n_queries} lists; test: {len(test):,} rows in "
             f"{test.n_queries} lists. NDCG@10 (exp2 gain on the rating, sampled negatives 0, ties averaged) "
             f"on the test lists, mean ± sd over negative-sampling seeds {list(seeds)}; fit time relative to "
             f"LinearRanker's ({platform.machine()}, {os.cpu_count()} cores shared with other jobs, "
             f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, same run). Reading the "
             f"files took {info['read']:.1f} s and building both data sets {info['prep']:.1f} s.", "",
             "| model | NDCG@10 | ratio to LightGBM | fit time (× LinearRanker) |",
             "|---|---:|---:|---:|"]
    for name, rows in results.items():
        v = np.array([r[0] for r in rows])
        fit = np.mean([r[1] for r in rows])
        sd = f" ± {v.std(ddof=1):.4f}" if len(v) > 1 else ""
        lines.append(f"| {name} | {v.mean():.4f}{sd} | {v.mean() / peer_mean:.3f} | "
                     f"{fit / linear_fit:.2f} |")
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--data", default=os.environ.get("RANKWISE_DATA", str(ROOT.parent / "shared" / "data")))
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "ml-100k" / "u.data").exists():
        print(f"MovieLens 100k absent: expected {data / 'ml-100k'}/u.data (set RANKWISE_DATA)", file=sys.stderr)
        return 2
    results, info = run(data, args.seeds)
    text = table(results, info, args.seeds)
    out = ROOT / "benchmarks" / "results" / "bench_recommendation.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
