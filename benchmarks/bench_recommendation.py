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

``--full-catalogue`` runs the other measurement instead: the same training lists, and the test lists
twice — with the 100 sampled negatives, and with every item the user never rated (the full
catalogue less the user's training items, Krichene & Rendle, KDD 2020) — for the baselines,
LinearRanker, GBDTRanker and NeuralRanker (defaults), and the lead of each over popularity under
both. Writes benchmarks/results/bench_recommendation_full.md (the table docs/recommendation.md
shows in its section on full-catalogue evaluation).
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


def _fit_timed(model, train) -> float:
    """Fit (warnings silenced) and return the seconds it took."""
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(train)
    return time.perf_counter() - t


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
            t_fit = _fit_timed(model, train)
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


def full_catalogue_models(seed):
    from rankwise.models import GBDTRanker, ItemMeanRanker, LinearRanker, NeuralRanker, PopularityRanker

    return {"PopularityRanker": lambda: PopularityRanker(), "ItemMeanRanker": lambda: ItemMeanRanker(),
            "LinearRanker": lambda: LinearRanker(random_state=seed),
            "GBDTRanker": lambda: GBDTRanker(random_state=seed),
            "NeuralRanker": lambda: NeuralRanker(random_state=seed)}


def run_full_catalogue(data_dir: Path, seeds):
    """NDCG@10 of each model on the sampled test lists and on the full-catalogue test lists."""
    from rankwise.data.movielens import load_movielens
    from rankwise.data.recsys import recommendation_data
    from rankwise.metrics import ndcg

    ml = load_movielens(data_dir / "ml-100k")
    results: dict[str, list] = {}
    info = {}
    for seed in seeds:
        t = time.perf_counter()
        train, sampled = recommendation_data(ml.ratings, ml.items, test_fraction=TEST_FRACTION,
                                             n_negatives=N_NEGATIVES, random_state=seed)
        _, full = recommendation_data(ml.ratings, ml.items, test_fraction=TEST_FRACTION, n_negatives=N_NEGATIVES,
                                      test_negatives="all", random_state=seed)
        info = {"prep": time.perf_counter() - t, "train": train, "sampled": sampled, "full": full}
        kw = dict(k=10, gain="exp2", ties="average", empty=0.0)
        for name, make in full_catalogue_models(seed).items():
            model = make()
            t_fit = _fit_timed(model, train)
            values = [float(ndcg(model.predict(d.X, qid=d.qid), d.labels, qid=d.qid, **kw)) for d in (sampled, full)]
            results.setdefault(name, []).append((*values, t_fit))
            print(f"seed {seed} {name}: NDCG@10 sampled {values[0]:.4f} full catalogue {values[1]:.4f} "
                  f"fit {t_fit:.1f}s", flush=True)
    return results, info


def table_full_catalogue(results, info, seeds) -> str:
    train, sampled, full = info["train"], info["sampled"], info["full"]
    pop = np.array([[r[0], r[1]] for r in results["PopularityRanker"]])
    lines = ["## Recommendation: sampled negatives against the full catalogue (`bench_recommendation.py "
             "--full-catalogue`)", "",
             f"ml-100k, the per-user time split and training lists of the table above ({len(train):,} rows, "
             f"{train.n_features} features, {N_NEGATIVES} sampled negatives per training list); each model "
             f"with its defaults, fitted once per seed and scored on two test-list sets of the same "
             f"{sampled.n_queries} users: the user's test items + {N_NEGATIVES} sampled unrated items "
             f"({len(sampled):,} rows), and the user's test items + **every** item the user never rated — the "
             f"full catalogue less the user's training items ({len(full):,} rows; Krichene & Rendle, KDD 2020). "
             f"NDCG@10 (exp2 gain on the rating, ties averaged), mean over seeds {list(seeds)}; the lead is the "
             f"difference to PopularityRanker's NDCG@10 under the same evaluation. Building the data sets took "
             f"{info['prep']:.1f} s.", "",
             "| model | NDCG@10, 100 sampled negatives | lead over popularity | NDCG@10, full catalogue "
             "| lead over popularity |",
             "|---|---:|---:|---:|---:|"]
    for name, rows in results.items():
        v = np.array([[r[0], r[1]] for r in rows])
        lead = v.mean(axis=0) - pop.mean(axis=0)
        lines.append(f"| {name} | {v[:, 0].mean():.4f} | {lead[0]:+.4f} | {v[:, 1].mean():.4f} | {lead[1]:+.4f} |")
    lines.append("")
    return "\n".join(lines)


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
    ap.add_argument("--full-catalogue", action="store_true",
                    help="sampled against full-catalogue evaluation (bench_recommendation_full.md)")
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "ml-100k" / "u.data").exists():
        print(f"MovieLens 100k absent: expected {data / 'ml-100k'}/u.data (set RANKWISE_DATA)", file=sys.stderr)
        return 2
    if args.full_catalogue:
        results, info = run_full_catalogue(data, args.seeds)
        text = table_full_catalogue(results, info, args.seeds)
        (ROOT / "benchmarks" / "results" / "bench_recommendation_full.md").write_text(text)
        print(text)
        return 0
    results, info = run(data, args.seeds)
    text = table(results, info, args.seeds)
    out = ROOT / "benchmarks" / "results" / "bench_recommendation.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
