"""Counterfactual evaluation of a new ranker from click logs, and interleaving (issue 26, item 5).

Part 1 — off-policy estimates of a new ranker's DCG@10 (``rankwise.clicks.counterfactual_estimates``) on
``--logs`` simulated logs per logging policy, each of ``--sessions`` sessions. Data: MQ2008 Fold1 train
(``$RANKWISE_DATA/MQ2008``; MSLR-like ``make_synthetic`` when absent). Users: PBM with θ_k = 1/k (η = 1) and
attractiveness α = click noise of the grade (ε⁺ = 1, ε⁻ = 0.1, ``click_noise``). The new ranker: a
``LinearRanker`` (ListNet) on the true labels of 20% of the queries; the production ranker (of the stochastic
loggers): the same on 5%. The **true value** is the estimand, the new ranker's expected DCG@10 with gains α
over the queries drawn uniformly (``expected_metric``): the DCG@10 of its whole ranking of every query's
candidates with the simulator's true click probability at rank 1 as gains. Loggers:

- *deterministic, whole list*: ``simulate_clicks_protocol(top_k=None)`` (each log with its own production
  ranker on 1% of the queries, the protocol's default); every candidate shown, ρ = θ_rank;
- *deterministic, top 10*: the same with ``top_k=10``: documents below rank 10 are never shown (ρ = 0), the
  case the estimators' assumptions exclude (item-selection bias), shown for contrast;
- *Plackett–Luce T, top 10*: ``rankwise.clicks.policy.PlackettLucePolicy`` on the production ranker's scores
  at temperature T, top 10 shown, ρ = its exact exposure Σ_k P(rank k) θ_k;
- *uniform random, top 10*: the same policy with equal scores (a uniformly random ranking).

Per estimator: mean over logs, bias (mean − truth), standard deviation over logs, RMSE, mean reported
standard error, and the share of logs whose 95% interval covers the truth (normal, and percentile bootstrap
of the sessions with ``--bootstrap`` resamples). DR's direct model: ``direct_relevance`` (cross-fitted
LightGBM) fitted once on an independent pilot log of the uniform logger, the same for every log.

Part 2 — interleaving. Rankers with scores = true grade + Gaussian noise of standard deviations
``--noise``; every pair interleaved (team-draft; probabilistic with τ = 3) on ``--il-sessions`` impressions
of uniformly drawn queries, pages of 10, clicks from PBM (θ_k = 1/k, α as above) and SDBN (α as above,
satisfaction (2^y − 1)/(2^ymax − 1)) users (``simulated_click_model``); the preference (more queries won,
sign test) is compared with the pair's true NDCG@10 (rankwise conventions).

Usage: python benchmarks/bench_clicks_counterfactual.py [--logs 100] [--sessions 20000] [--data DIR]
Writes benchmarks/results/bench_clicks_counterfactual.md.
"""
from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_clicks_counterfactual.md"
sys.path.insert(0, str(HERE.parent / "src"))


from bench_clicks import data_dir  # noqa: E402  (the data folder: argument, $RANKWISE_DATA, ../shared/data)


def load(ddir):
    from rankwise.data import RankingDataset, make_synthetic, read_svmlight

    path = None if ddir is None else ddir / "MQ2008" / "Fold1" / "train.txt.gz"
    if path is not None and path.exists():
        d, name = read_svmlight(path), "MQ2008 Fold1 train"
    else:
        d, name = make_synthetic(400, n_features=46, n_grades=3, list_length=(5, 40), seed=0), "make_synthetic (400 q)"
    feats = RankingDataset(d.X, d.labels, d.query_offsets, d.query_ids,
                           doc_ids=np.arange(len(d.labels)).astype(str), feature_names=d.feature_names)
    return feats, name


def policy_log(policy, feats, alpha, theta, n_sessions, rng):
    """Sessions of a logging policy (pages by ``policy.sample``), PBM clicks, as a ClickLog."""
    from rankwise.clicks import ClickLog

    q = rng.integers(0, feats.n_queries, n_sessions)
    off, rows = policy.sample(q, random_state=rng)
    rank = np.arange(len(rows)) - np.repeat(off[:-1], np.diff(off))
    clicked = (rng.random(len(rows)) < theta[rank] * alpha[rows]).astype(np.uint8)
    uq, qc = np.unique(q, return_inverse=True)  # the log's queries: those some session drew
    return ClickLog(off, qc, np.asarray(feats.query_ids)[uq], rows, np.asarray(feats.doc_ids), clicked), rows


def counterfactual(feats, args, lines):
    from rankwise.clicks import click_noise, counterfactual_estimates, direct_relevance, expected_metric
    from rankwise.clicks import simulate_clicks_protocol
    from rankwise.clicks.policy import PlackettLucePolicy
    from rankwise.models import LinearRanker

    rng = np.random.default_rng(0)
    y = np.asarray(feats.labels, dtype=np.float64)
    alpha = click_noise(y, max_grade=y.max())
    nq = feats.n_queries
    prod = LinearRanker(loss="listnet", random_state=0).fit(feats.take(np.sort(rng.choice(nq, max(2, nq // 20),
                                                                                            replace=False))))
    new = LinearRanker(loss="listnet", random_state=1).fit(feats.take(np.sort(rng.choice(nq, nq // 5, replace=False))))
    s_new = np.asarray(new.predict(feats.X), dtype=np.float64)
    longest = int(np.diff(feats.query_offsets).max())
    theta = 1.0 / np.arange(1, longest + 1)
    truth = expected_metric(feats, s_new, alpha, k=10)
    from rankwise.clicks.evaluation import rank_weights

    lam_top = rank_weights(feats, s_new, k=10) > 0
    good = np.clip(alpha + np.random.default_rng(5).normal(0, 0.05, len(alpha)), 0, 1)
    uniform = PlackettLucePolicy(np.zeros(len(y)), feats.query_offsets, temperature=1.0, top_k=10)
    t0 = time.perf_counter()
    pilot, _ = policy_log(uniform, feats, alpha, theta, args.sessions, np.random.default_rng(10_000))
    direct = direct_relevance(pilot, feats, theta, random_state=0)
    t_direct = time.perf_counter() - t0
    loggers = [("deterministic, whole list", None), ("deterministic, top 10", 10)]
    s_prod = np.asarray(prod.predict(feats.X), dtype=np.float64)
    for T in args.temperatures:
        loggers.append((f"Plackett–Luce T={T:g}, top 10", PlackettLucePolicy(s_prod, feats.query_offsets,
                                                                             temperature=T, top_k=10)))
    loggers.append(("uniform random, top 10", uniform))
    lines += [f"True DCG@10 of the new ranker (gains α, queries uniform): **{truth:.4f}**. Direct model: "
              f"`direct_relevance` on a pilot log of {args.sessions:,} uniform-logger sessions ({t_direct:.1f} s), "
              f"RMSE against α {np.sqrt(np.mean((direct - alpha) ** 2)):.3f}.", "",
              "| logger | estimator | mean | bias | sd over logs | RMSE | mean stderr | coverage normal | "
              "coverage bootstrap | min ρ on new top 10 |", "|---|---|---|---|---|---|---|---|---|---|"]
    summary = {}
    for name, policy in loggers:
        t0 = time.perf_counter()
        est = {m: [] for m in ("ips", "snips", "dr", "dr, good m̂")}
        cov_n = {m: 0 for m in est}
        cov_b = {m: 0 for m in est}
        se = {m: [] for m in est}
        deterministic = policy is None or isinstance(policy, int)
        if not deterministic:
            rho_all = policy.exposure(theta[:10])
        shown_top = []
        for i in range(args.logs):
            lrng = np.random.default_rng(1000 + i)
            if deterministic:
                sim = simulate_clicks_protocol(feats, n_sessions=args.sessions, top_k=policy, random_state=1000 + i)
                log, exposure = sim.log, None
                seen = np.zeros(len(y), dtype=bool)
                seen[np.asarray(log.docs[log.doc]).astype(np.int64)] = True
                shown_top.append(seen[lam_top].mean())
            else:
                log, rows = policy_log(policy, feats, alpha, theta, args.sessions, lrng)
                exposure = rho_all[rows]
            kw = dict(propensity=theta, exposure=exposure, k=10)
            res = counterfactual_estimates(log, feats, s_new, direct=direct, **kw)
            res["dr, good m̂"] = counterfactual_estimates(log, feats, s_new, direct=good, methods=("dr",), **kw)["dr"]
            boot = None
            if args.bootstrap:
                boot = counterfactual_estimates(log, feats, s_new, interval="bootstrap", n_bootstrap=args.bootstrap,
                                                random_state=i, direct=direct, **kw)
                boot["dr, good m̂"] = counterfactual_estimates(log, feats, s_new, interval="bootstrap", direct=good,
                                                              n_bootstrap=args.bootstrap, random_state=i,
                                                              methods=("dr",), **kw)["dr"]
            for m, e in res.items():
                est[m].append(e.estimate)
                se[m].append(e.stderr)
                cov_n[m] += e.covers(truth)
                if boot is not None:
                    cov_b[m] += boot[m].covers(truth)
        if policy is None:  # whole list: ρ = θ at the logged rank, at least θ of the longest list
            min_rho = f"≥ {theta[-1]:.2g}"
        elif deterministic:
            min_rho = f"0 ({1 - np.mean(shown_top):.0%} of them never shown)"
        else:
            min_rho = f"{rho_all[lam_top].min():.2g}"
        for m in est:
            v = np.array(est[m])
            summary[(name, m)] = (cov_n[m] / args.logs, cov_b[m] / args.logs if args.bootstrap else None)
            label = {"snips": "SNIPS", "dr, good m̂": "DR, good m̂"}.get(m, m.upper())
            lines.append(f"| {name} | {label} | {v.mean():.4f} | {v.mean() - truth:+.4f} | "
                         f"{v.std(ddof=1):.4f} | {np.sqrt(np.mean((v - truth) ** 2)):.4f} | {np.mean(se[m]):.4f} | "
                         f"{cov_n[m] / args.logs:.2f} | "
                         f"{(f'{cov_b[m] / args.logs:.2f}' if args.bootstrap else '—')} | {min_rho} |")
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    lines.append("")
    goal = [k for k in summary if k[1] in ("snips", "dr") and k[0] != "deterministic, top 10"]
    miss = [k for k in goal if not 0.90 <= summary[k][0] <= 0.99]
    miss_b = [k for k in goal if args.bootstrap and not 0.90 <= summary[k][1] <= 0.99]
    lines.append("Goal (issue 26): DR and SNIPS cover the truth at their nominal 95% in 90–99% of logs, for the loggers "
                 "under which the estimators' condition holds (ρ > 0 on the new ranker's top 10; not the "
                 "deterministic top-10 page, shown as the case the theory excludes). Normal intervals: "
                 + ("**met** for every such logger" if not miss else "**not met** for " + ", ".join(
                     f"{m.upper()} under {n} ({summary[(n, m)][0]:.2f})" for n, m in miss))
                 + (". Bootstrap intervals: " + ("met for every such logger." if not miss_b else "not met for " + ", ".join(
                     f"{m.upper()} under {n} ({summary[(n, m)][1]:.2f})" for n, m in miss_b) + ".")
                    if args.bootstrap else "."))
    lines.append("")
    lines.append("DR's direct model above is `direct_relevance` on a small pilot log (far from α); *DR, good m̂* uses "
                 "α + N(0, 0.05²) clipped to [0, 1] to show the variance DR removes when the direct model is close. "
                 "With a deterministic logger that shows every candidate SNIPS and DR are IPS itself (w_s = 1, the "
                 "direct part cancels: module docstring).")
    lines.append("")
    return summary


def interleaving(feats, args, lines):
    from rankwise.clicks import click_noise, interleave, simulated_click_model
    from rankwise.metrics import ndcg

    y = np.asarray(feats.labels, dtype=np.float64)
    qid = np.repeat(np.arange(feats.n_queries), np.diff(feats.query_offsets))
    rng = np.random.default_rng(7)
    scores = [y + rng.normal(0, s, len(y)) for s in args.noise]
    true = [ndcg(s, y, qid=qid, k=10) for s in scores]
    alpha = click_noise(y, max_grade=y.max())
    sat = (2.0 ** y - 1) / (2.0 ** y.max() - 1)
    theta = 1.0 / np.arange(1, 11)
    rows_out = {}
    t0 = time.perf_counter()
    for (i, j) in itertools.combinations(range(len(scores)), 2):
        for method in ("team_draft", "probabilistic"):
            it = interleave(feats, scores[i], scores[j], n_sessions=args.il_sessions, method=method, k=10,
                            random_state=100 * i + j)
            rows = it.log.docs[it.log.doc].astype(np.int64)
            for user in ("PBM", "SDBN"):
                model = simulated_click_model(user, it.log, alpha[rows], examination=theta, satisfaction=sat[rows])
                r = it.credit(model.sample(it.log, random_state=100 * i + j + 1))
                rows_out.setdefault((method, user), []).append((true[i] - true[j], r))
    t_il = time.perf_counter() - t0
    lines += [f"{len(scores)} rankers (score = grade + N(0, σ²), σ ∈ {{{', '.join(f'{s:g}' for s in args.noise)}}}; "
              f"true NDCG@10 {', '.join(f'{t:.3f}' for t in true)}), {len(scores) * (len(scores) - 1) // 2} pairs, "
              f"{args.il_sessions:,} impressions per pair and method ({t_il:.0f} s in all).", "",
              "| method | user | agreement with true NDCG@10 (all pairs) | pairs with ΔNDCG ≥ 0.02: agreement | "
              "correct and p < 0.05 | wrong and p < 0.05 | mean per-impression outcome |",
              "|---|---|---|---|---|---|---|"]
    for (method, user), res in rows_out.items():
        d = np.array([x for x, _ in res])
        pref = np.array([{"A": 1, "B": -1, None: 0}[r.preferred] for _, r in res])
        p = np.array([r.p_value for _, r in res])
        agree = pref == np.sign(d)
        big = np.abs(d) >= 0.02
        lines.append(f"| {method} | {user} | {agree.mean():.2f} ({agree.sum()}/{len(d)}) | "
                     f"{agree[big].mean():.2f} ({agree[big].sum()}/{big.sum()}) | {np.mean(agree & (p < 0.05)):.2f} | "
                     f"{np.mean(~agree & (p < 0.05)):.2f} | "
                     f"{np.mean([np.abs(r.outcomes).mean() for _, r in res]):.3f} (mean abs) |")
    lines.append("")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--bootstrap", type=int, default=300, help="bootstrap resamples per log (0: none)")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.5, 0.1])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 1.0, 1.2, 1.6, 2.0, 3.0, 5.0])
    ap.add_argument("--il-sessions", type=int, default=3000)
    ap.add_argument("--data", default=None)
    args = ap.parse_args(argv)
    feats, name = load(data_dir(args.data))
    t0 = time.perf_counter()
    lines = ["## Clicks: counterfactual evaluation of a new ranker, and interleaving", "",
             f"{platform.python_version()}, {platform.machine()}, 1 thread; data {name} ({feats.n_queries} queries, "
             f"{len(feats.labels):,} documents); settings: {args.logs} logs × {args.sessions:,} sessions per logger, "
             f"{args.bootstrap} bootstrap resamples; `python benchmarks/bench_clicks_counterfactual.py "
             + " ".join(argv if argv is not None else sys.argv[1:]) + "`.", "",
             "### Off-policy estimates of the new ranker's DCG@10 (95% intervals)", ""]
    counterfactual(feats, args, lines)
    lines += ["### Interleaving: does the preference match the ranker with the higher true NDCG@10?", ""]
    interleaving(feats, args, lines)
    lines.append(f"Total {time.perf_counter() - t0:.0f} s.")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
