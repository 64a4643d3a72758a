"""Top-k display with a stochastic logger and the policy-aware estimator (issue 26, items 4 and 6).

Protocol (the simulation protocol of ``simulate_clicks_protocol`` on MQ2008, per fold): a production
LinearRanker (ListNet) trained on 1% of the training queries; ``--sessions`` sessions (default 500,000)
drawing a training query uniformly; a top-10 page; PBM clicks with click noise ε⁺ = 1, ε⁻ = 0.1, under
three position-bias profiles: θ_k = (1/k)^η with η = 1 and η = 2, and the Baidu-ULTR curve
(``read_bias_curve`` of ``$RANKWISE_DATA/click_fixtures/baidu_ultr_propensities/global_all_pairs.csv``,
positions 1-10: real examination estimates, not a power law). Two loggers of the same production ranker:

- *Plackett–Luce*: every page sampled from the Plackett–Luce policy with logits score/T (``temperature=T``,
  default 1; on Fold 1 the production scores have a median within-query standard deviation of 0.67);
  *debiased* = the ranker on the policy-aware IPS labels (Oosterhuis & de Rijke, SIGIR 2020) with the true θ
  and the true policy (``fit_debiased(model, log, features, sim.policy_propensities())``: every candidate
  of a logged query, ρ_qd > 0 for all), unclipped; *DR* = their doubly robust form; *full* = the same
  ranker on the true labels of *all* training documents; *raw* = the same ranker on the raw click-through
  rates of the shown documents.
  Goals: debiased ≥ 0.95 × full, and debiased > raw with p < 0.05 (paired randomisation test over the test
  queries pooled over the folds, ``rankwise.report.significance``).
- *deterministic* (``temperature=None``): the production ranker's top 10 in every session; *debiased* =
  the ranker on the IPS labels with the true θ (the policy-aware labels of a temperature-0 policy are the
  same); *displayed* = the same ranker on the true labels of the documents the log shows (the best any
  estimator can do from this log: the others are never shown). Goal: debiased ≥ 0.95 × displayed.

Ranker: ``GBDTRanker(loss="op_pairwise", n_estimators=100, learning_rate=0.05)`` (a loss affine in the labels,
so its IPS risk is unbiased); with ``--neural`` also ``NeuralRanker(loss="op_pairwise", hidden=(64, 32),
max_iter=20)``. Test NDCG@10 on the true labels of the fold's test queries (rankwise conventions).
Public surface only.

Usage: python benchmarks/bench_clicks_policy.py [--folds 1 2 3 4 5] [--sessions N] [--temperature T] [--neural]
Writes benchmarks/results/bench_clicks_policy.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_clicks_policy.md"
sys.path.insert(0, str(HERE.parent / "src"))


def make_ranker(kind, seed):
    from rankwise.models import GBDTRanker, NeuralRanker

    if kind == "GBDT":
        return GBDTRanker(loss="op_pairwise", n_estimators=100, learning_rate=0.05, random_state=seed, n_jobs=1)
    return NeuralRanker(loss="op_pairwise", hidden=(64, 32), max_iter=20, learning_rate=1e-3, random_state=seed)


def ndcg10(model, ds):
    from rankwise.metrics import evaluate

    return evaluate(model.predict(ds.X), ds.labels, ds.qid, metrics=("ndcg@10",)).per_query["ndcg@10"].to_numpy()


def bias_profiles(ddir):
    from rankwise.clicks import read_bias_curve

    yield "η = 1", dict(eta=1.0)
    yield "η = 2", dict(eta=2.0)
    path = ddir / "click_fixtures" / "baidu_ultr_propensities" / "global_all_pairs.csv"
    if path.exists():
        yield "Baidu curve", dict(position_bias=read_bias_curve(path, max_rank=10))
    else:
        print(f"Baidu curve absent ({path}): skipped", flush=True)


def run(ddir, folds, n_sessions, temperature, kinds):
    from rankwise.clicks import click_dataset, direct_relevance, fit_debiased, simulate_clicks_protocol
    from rankwise.data import read_svmlight

    res = {}  # (profile, kind, logger, arm) -> list of per-query arrays
    info = {}
    for f in folds:
        train = read_svmlight(ddir / "MQ2008" / f"Fold{f}" / "train.txt.gz")
        test = read_svmlight(ddir / "MQ2008" / f"Fold{f}" / "test.txt.gz")
        full = {k: ndcg10(make_ranker(k, f).fit(train), test) for k in kinds}
        for pname, bias in bias_profiles(ddir):
            for logger, temp in (("Plackett–Luce", temperature), ("deterministic", None)):
                t0 = time.perf_counter()
                sim = simulate_clicks_protocol(train, n_sessions=n_sessions, top_k=10, temperature=temp,
                                               random_state=f, **bias)
                t_sim = time.perf_counter() - t0
                shown = np.unique(sim.log.docs.astype(np.int64))
                pp = sim.policy_propensities()
                info[pname, logger, f] = (t_sim, len(shown) / len(train.labels), float(pp.exposure.min()))
                # doubly robust: m cross-fitted on the policy-aware labels of this log (Plackett-Luce logger only)
                m = direct_relevance(sim.counts, sim.features, pp) if temp else None
                for k in kinds:
                    deb = fit_debiased(make_ranker(k, f), sim.counts, sim.features, pp)
                    raw = make_ranker(k, f).fit(click_dataset(sim.counts, sim.features))
                    arms = {"debiased": ndcg10(deb, test), "raw": ndcg10(raw, test), "full": full[k]}
                    if m is not None:
                        arms["DR"] = ndcg10(fit_debiased(make_ranker(k, f), sim.counts, sim.features, pp, direct=m),
                                            test)
                    if logger == "deterministic":
                        arms["displayed"] = ndcg10(make_ranker(k, f).fit(rows_of(train, shown)), test)
                    for arm, v in arms.items():
                        res.setdefault((pname, k, logger, arm), []).append(v)
                    got = ", ".join(f"{a} {v.mean():.4f}" for a, v in arms.items())
                    print(f"  Fold{f} {pname} {logger} {k}: {got} ({time.perf_counter() - t0:.0f} s)", flush=True)
                del sim
    return res, info


def rows_of(data, rows):
    """The sub-data set of the given rows (queries kept in order; a query without rows is dropped)."""
    from rankwise.data import RankingDataset

    rows = np.sort(np.asarray(rows))
    qid = np.repeat(np.asarray(data.query_ids), np.diff(data.query_offsets))
    return RankingDataset.from_arrays(data.X[rows], np.asarray(data.labels)[rows], qid[rows])


def report(res, info, folds, n_sessions, temperature, kinds, took):
    from rankwise.report.significance import paired_randomization_test

    lines = ["## Top-k display: Plackett–Luce logging and the policy-aware estimator\n",
             (__doc__.split("\n\n", 1)[1].split("Usage:")[0]).strip() + "\n",
             f"Settings of this run: MQ2008 folds {', '.join(map(str, folds))}; {n_sessions:,} sessions per fold, "
             f"logger and bias profile; temperature T = {temperature:g}; top-10 page. "
             f"Python {platform.python_version()}, {platform.machine()}, {took:.0f} s.\n",
             "### Plackett–Luce logger, policy-aware IPS\n",
             "| bias | model | full (all docs) | debiased | raw clicks | ratio debiased/full | p (debiased vs raw) "
             "| goals met | DR | ratio DR/full | p (DR vs raw) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    profiles = list(dict.fromkeys(p for p, _, _, _ in res))
    for p in profiles:
        for k in kinds:
            d, r, fu, dr = (np.concatenate(res[p, k, "Plackett–Luce", a]) for a in ("debiased", "raw", "full", "DR"))
            pv = paired_randomization_test(d, r, n_resamples=10_000, random_state=0)
            p_dr = paired_randomization_test(dr, r, n_resamples=10_000, random_state=0)
            ratio = d.mean() / fu.mean()
            ok = ratio >= 0.95 and pv < 0.05 and d.mean() > r.mean()
            lines.append(f"| {p} | {k} | {fu.mean():.4f} | {d.mean():.4f} | {r.mean():.4f} | {ratio:.3f} | {pv:.4f} | "
                         f"{'yes' if ok else 'no'} | {dr.mean():.4f} | {dr.mean() / fu.mean():.3f} | {p_dr:.4f} |")
    lines += ["", "*DR*: the doubly robust form of the policy-aware labels (``direct=``, Oosterhuis, TOIS 2023) with "
              "m = ``direct_relevance`` (a GBDT regression of the policy-aware labels on the features, cross-fitted "
              "over 5 folds of the queries). p-values: paired randomisation test, 10,000 sign flips (smallest "
              "possible p = 1/10,001).", "", "### Deterministic top-10 logger, IPS\n",
              "| bias | model | displayed docs' true labels | debiased | raw clicks | full (all docs) | "
              "ratio debiased/displayed | goal met |", "|---|---|---|---|---|---|---|---|"]
    for p in profiles:
        for k in kinds:
            d, r, dsp, fu = (np.concatenate(res[p, k, "deterministic", a])
                             for a in ("debiased", "raw", "displayed", "full"))
            ratio = d.mean() / dsp.mean()
            lines.append(f"| {p} | {k} | {dsp.mean():.4f} | {d.mean():.4f} | {r.mean():.4f} | {fu.mean():.4f} | "
                         f"{ratio:.3f} | {'yes' if ratio >= 0.95 else 'no'} |")
    lines += ["", "Per run: share of the training documents the log shows at least once, smallest policy-aware "
              "propensity ρ_qd of a candidate, simulation time.\n",
              "| bias | logger | fold | shown | min ρ | sim s |", "|---|---|---|---|---|---|"]
    for (p, lg, f), (t, share, rmin) in info.items():
        lines.append(f"| {p} | {lg} | {f} | {share:.3f} | {rmin:.2e} | {t:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--sessions", type=int, default=500_000)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--neural", action="store_true")
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args(argv)
    ddir = args.data or Path(os.environ.get("RANKWISE_DATA") or HERE.parent.parent / "shared" / "data")
    if not (ddir / "MQ2008" / "Fold1" / "train.txt.gz").exists():
        print(f"MQ2008 absent under {ddir}: set RANKWISE_DATA", file=sys.stderr)
        return 1
    kinds = ("GBDT", "neural") if args.neural else ("GBDT",)
    t0 = time.perf_counter()
    res, info = run(ddir, args.folds, args.sessions, args.temperature, kinds)
    text = report(res, info, args.folds, args.sessions, args.temperature, kinds, time.perf_counter() - t0)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
