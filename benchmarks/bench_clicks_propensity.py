"""Propensity estimation (issue 26, item 2): how close each estimator gets to the true θ_k/θ_1 at ranks 2-10.

Runs: the training parts of MQ2008 Fold1..5 (``$RANKWISE_DATA/MQ2008``) and the MSLR-like synthetic set
(``make_synthetic(900, n_features=136, list_length=(20, 60), seed=0)``, its first 600 queries), η ∈ {1, 2}:
12 runs. Every run starts from ``simulate_clicks_protocol`` (production LinearRanker on 1% of the queries, its
top-10 page per query, PBM clicks θ_k = (1/k)^η times the click noise ρ(y) with ε⁺ = 1, ε⁻ = 0.1); the
protocol's ``propensity`` and ``relevance`` are the truth. The relative error of rank k is
|θ̂_k/θ̂_1 ÷ (θ_k/θ_1) − 1|; a run's error is its largest over ranks 2-10.

(a) Randomised interventions. *RandTop-10*: every session of a query with a full page of 10 shows the page in
a uniformly random order (queries with fewer than 10 documents take no part: their pages would bias the deep
ranks). The sessions are drawn aggregated -- per query, the (document, rank) impressions of a sum of random
permutations, then Binomial(impressions, θ_k ρ) clicks, the distribution of the session log's counts -- into a
:class:`~rankwise.data.ClickCounts`, fitted by ``RandTop(10)``; the sweep of session counts finds the
smallest one within 2% in every run. *RandPair*: sessions pick k uniformly in 2..10 and show the documents at
ranks 1 and k swapped with probability 1/2 (a session shows ranks 1..k). The estimator needs each session's k
only through the clicks at rank 1 and at k per k, so the sessions are drawn aggregated too: per (query, k,
swapped) Multinomial(n, uniform) sessions, then Binomial(impressions, θ_r ρ) clicks per (query, document, rank
r, k) -- the distribution of a session log's ``counts(by="pair_rank")`` -- into a
:class:`~rankwise.data.ClickCounts` with ``row_data["pair_rank"]``, fitted by ``RandPair()`` (equal to the
fit on the session log: tests/clicks/test_randpair_counts.py); the sweep finds the smallest session count
within 2% in every run.

(b) Two logging rankers. Two ``simulate_clicks_protocol`` calls on the same data with different seeds (their
production rankers are trained on different 1% query samples), half the sessions each, aggregated
(``aggregate=True``) and merged into one :class:`~rankwise.data.ClickCounts` (the (query, doc, rank) counts of
both summed): ``RegressionEM()`` (defaults: 30 iterations, the rankwise GBDT M-step) and
``InterventionHarvesting()``. Goal: within 10% at ranks 2-10 in at least 11 of 12 runs.

(c) One deterministic logger: the first of those two logs alone (the same number of sessions); the error with
the identifiability diagnostic (``identifiability``: share of (query, doc) pairs seen at two or more ranks).
Intervention harvesting has nothing to harvest there (it says so).

(d) One Plackett–Luce logger. ``simulate_clicks_protocol(..., temperature=1.0, top_k=10)``: the seed-0
production ranker's scores divided by the temperature are the logits of a Plackett–Luce policy and every
session samples its top-10 page from it (a session log, aggregated with ``counts``); ``RegressionEM()`` and
``InterventionHarvesting()`` on those counts. Under the PBM the clicks of a (query, doc) at rank k are
Bernoulli(θ_k γ_qd) whichever policy put it there (the policy depends on the scores, not on the clicks), so
the (query, doc, rank) counts are all either estimator needs: no per-row exposure enters their likelihood.
Goal: within 10% at ranks 2-10 in at least 11 of 12 runs.

(e) One deterministic logger, the ranker it gives: on (c)'s log, the same ranker is fitted twice with
``fit_debiased`` -- once with (c)'s RegressionEM propensities, once with the true θ -- with identical settings
(no clipping in either: ``clip=None``; the displayed documents only), for ``GBDTRanker(loss="op_pairwise",
n_estimators=100, learning_rate=0.05, random_state=0, n_jobs=1)`` and ``NeuralRanker(loss="op_pairwise",
hidden=(64, 32), max_iter=20, learning_rate=1e-3, random_state=0)`` (bench_clicks.py's ``make_rankers``), and
evaluated by NDCG@10 on the true labels of the test queries (MQ2008 ``Fold{f}/test.txt.gz``; the synthetic set's
last 300 queries). Goal: NDCG@10 with the estimated propensities ≥ 0.98 of that with the true ones, per run.
Beside the goal's single fits, a fit-noise probe, the same in every run: each ranker is refitted ``E_REFITS - 1``
more times on θ × (1 + u_j), u_j ~ U(-1e-4, 1e-4) per rank ≥ 2 (seed ``E_JITTER_SEED``; the same u_j for the
estimated and the true θ), a change of θ far below any estimation error. The table gives the ratio of the means
of the ``E_REFITS`` fits of each side and the standard deviation of the true-θ fits: how far one fit moves on
its own (a GBDTRanker with ``subsample=1`` ignores its seed, so a seed cannot show it). The deep bias is the
mean of θ̂_k/θ_k - 1 over ranks 6-10 (below 0: the deep ranks' examination under-estimated).

(f) One deterministic logger, two probes of (e)'s GBDT miss, the same in every run. *The logger's view*:
``RegressionEM()`` on (c)'s log with the logging ranker's score (``sim.production.predict``) as one more feature
column -- the relevance regression sees what put each document at its rank, the GBDT form of the
logging-policy-aware representation of Luo et al. (SIGIR 2024); its error beside (c)'s. *Longer fit-noise
probe*: (e)'s rule with ``F_REFITS`` fits per side for the GBDT (the first ``E_REFITS`` are (e)'s fits), the ratio
of the means with a bootstrap 95% interval (fits resampled per side, ``F_BOOTSTRAP`` draws): whether the
expected ratio, not one fit, is below 0.98.

Usage: python benchmarks/bench_clicks_propensity.py [--quick] [--folds 1 2 3 4 5] [--data DIR] [--only e|f]
Writes benchmarks/results/bench_clicks_propensity.md (``--only e`` or ``--only f``: computes that section alone
and replaces it in the existing file, the other sections' figures left as they are). Public surface only
(rankwise.clicks, rankwise.data).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_clicks_propensity.md"
sys.path.insert(0, str(HERE.parent / "src"))

ETAS = (1.0, 2.0)
E_KINDS = ("GBDT", "neural")
RANDTOP_SESSIONS = (2_000_000, 8_000_000, 32_000_000)
RANDPAIR_SESSIONS = (10_000_000, 25_000_000, 50_000_000, 100_000_000, 200_000_000, 400_000_000)
PL_SESSIONS = 1_000_000
PL_TEMPERATURE = 1.0
HARVEST_SESSIONS = 1_000_000
DEPTH = 10
#: section (e)'s fit-noise probe: every ranker is also refitted on θ × (1 + u), u ~ U(-E_JITTER, E_JITTER) per
#: rank (rank 1 kept), E_REFITS fits in all (the first the unjittered one of the goal)
E_REFITS = 5
E_JITTER = 1e-4
E_JITTER_SEED = 0
#: section (f): the GBDT's fits per side in the longer fit-noise probe, and the bootstrap draws of its interval
F_REFITS = 20
F_BOOTSTRAP = 5000


from bench_clicks import data_dir, read_sections, write_sections  # noqa: E402  (data_dir: argument, $RANKWISE_DATA, ../shared/data)


def datasets(ddir, folds):
    """(name, train, test) of every data set; the test part is read only when section (e) asks for it."""
    from rankwise.data import make_synthetic, read_svmlight

    mq = None if ddir is None else ddir / "MQ2008"
    if mq is not None and (mq / "Fold1" / "train.txt.gz").exists():
        for f in folds:
            yield (f"MQ2008 Fold{f}", read_svmlight(mq / f"Fold{f}" / "train.txt.gz"),
                   lambda f=f: read_svmlight(mq / f"Fold{f}" / "test.txt.gz"))
    syn = make_synthetic(900, n_features=136, list_length=(20, 60), seed=0)
    yield "MSLR-like synthetic", syn.take(np.arange(600)), lambda: syn.take(np.arange(600, 900))


def rel_errors(p, true):
    k = min(len(p), len(true), DEPTH)
    return np.abs(np.asarray(p[:k]) / (true[:k] / true[0]) - 1.0)[1:]


def pages_of(sim):
    """The production pages of an aggregated simulation: per query code, its documents (train rows) by rank."""
    c = sim.counts
    order = np.lexsort((c.rank, c.query))
    q, doc_rows = c.query[order], c.docs[c.doc[order]].astype(np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(q)) + 1, len(q)]
    return {int(q[a]): doc_rows[a:b] for a, b in zip(starts[:-1], starts[1:])}


def randtop_counts(sim, n_sessions, rng, chunk=1_000_000):
    """RandTop-10 sessions on the full pages, aggregated: (query, doc, rank) impressions and clicks."""
    from rankwise.data import ClickCounts

    pages = [p for p in pages_of(sim).values() if len(p) == DEPTH]
    P = np.array(pages)  # (queries, 10) train rows
    nq = len(P)
    imp = np.zeros(nq * DEPTH * DEPTH)
    left = int(n_sessions)
    while left:
        b = min(chunk, left)
        left -= b
        q = rng.integers(0, nq, b)
        perm = np.argsort(rng.random((b, DEPTH)), axis=1)  # perm[s, k]: the page slot shown at rank k + 1
        key = (q[:, None] * DEPTH + perm) * DEPTH + np.arange(DEPTH)
        imp += np.bincount(key.ravel(), minlength=len(imp))
    imp = imp.reshape(nq, DEPTH, DEPTH)  # [query, slot, rank]
    qq, slot, rank = np.nonzero(imp)
    n = imp[qq, slot, rank]
    clicks = rng.binomial(n.astype(np.int64), sim.propensity[rank] * sim.relevance[P[qq, slot]])
    sessions = imp[:, :, 0].sum(axis=1)  # each session shows one document at rank 1
    kept = sessions > 0
    code = np.cumsum(kept) - 1
    rows = kept[qq]
    return ClickCounts(np.arange(nq)[kept].astype(str), sessions[kept].astype(np.int64), code[qq[rows]],
                       np.arange(P.size).astype(str), (qq * DEPTH + slot)[rows], rank[rows] + 1, clicks[rows],
                       n[rows]), nq


def randpair_counts(sim, n_sessions, rng):
    """RandPair sessions (pivot rank 1, k uniform in 2..10, the documents at 1 and k swapped with probability 1/2)
    on the full pages, each showing ranks 1..k, aggregated: the sessions of every (query, k, swap) are
    Multinomial(n_sessions, uniform), and the clicks of the document at rank r under intervention k are
    Binomial(its impressions, θ_r ρ) -- the distribution of the session log's ``counts(by="pair_rank")``."""
    from rankwise.data import ClickCounts

    P = np.array([p for p in pages_of(sim).values() if len(p) == DEPTH])
    nq = len(P)
    n = rng.multinomial(int(n_sessions), np.full(nq * (DEPTH - 1) * 2, 1.0 / (nq * (DEPTH - 1) * 2)))
    n = n.reshape(nq, DEPTH - 1, 2)  # [query, k - 2, swapped]
    imp = np.zeros((nq, DEPTH - 1, DEPTH, DEPTH))  # [query, k - 2, page slot, rank]
    for k in range(2, DEPTH + 1):
        for sw in (0, 1):
            slot = np.arange(k)
            if sw:
                slot[[0, k - 1]] = slot[[k - 1, 0]]
            imp[:, k - 2, slot, np.arange(k)] += n[:, k - 2, sw][:, None]
    qq, kk, slot, rank = np.nonzero(imp)
    m = imp[qq, kk, slot, rank]
    clicks = rng.binomial(m.astype(np.int64), sim.propensity[rank] * sim.relevance[P[qq, slot]])
    sessions = n.sum(axis=(1, 2))
    kept = sessions > 0
    code = np.cumsum(kept) - 1
    rows = kept[qq]
    return ClickCounts(np.arange(nq)[kept].astype(str), sessions[kept], code[qq[rows]], np.arange(P.size).astype(str),
                       (qq * DEPTH + slot)[rows], rank[rows] + 1, clicks[rows], m[rows],
                       row_data={"pair_rank": kk[rows] + 2})


def merged_counts(a, b):
    """The (query, doc, rank) counts of two aggregated logs of the same data, summed (two logging rankers)."""
    import pandas as pd

    from rankwise.data import ClickCounts

    def frame(c):
        return pd.DataFrame({"query": c.queries[c.query], "doc": c.docs[c.doc], "rank": c.rank,
                             "clicks": c.clicks, "impressions": c.impressions})
    rows = pd.concat([frame(a), frame(b)]).groupby(["query", "doc", "rank"], sort=True, as_index=False).sum()
    sess = pd.concat([pd.Series(a.sessions, index=a.queries), pd.Series(b.sessions, index=b.queries)])
    sess = sess.groupby(level=0).sum()
    queries = sess.index.to_numpy()
    docs, doc_code = np.unique(rows["doc"].to_numpy(), return_inverse=True)
    return ClickCounts(queries, sess.to_numpy(), pd.Index(queries).get_indexer(rows["query"]), docs, doc_code,
                       rows["rank"].to_numpy(), rows["clicks"].to_numpy(), rows["impressions"].to_numpy())


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="Fold1 and the synthetic set, smaller logs")
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--data", default=None)
    ap.add_argument("--only", choices=("e", "f"), default=None,
                    help="compute section (e) or (f) alone and replace it in the existing results file")
    ap.add_argument("--kinds", nargs="+", choices=E_KINDS, default=list(E_KINDS), help="section (e)'s rankers")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from rankwise.clicks import InterventionHarvesting, RandPair, RandTop, RegressionEM, identifiability
    from rankwise.clicks import simulate_clicks_protocol
    from rankwise.errors import InputError

    folds = [1] if args.quick else args.folds
    rt_sessions = (500_000, 2_000_000) if args.quick else RANDTOP_SESSIONS
    rp_sessions = (20_000_000, 200_000_000) if args.quick else RANDPAIR_SESSIONS
    h_sessions = 300_000 if args.quick else HARVEST_SESSIONS
    pl_sessions = 300_000 if args.quick else PL_SESSIONS
    if args.only:
        return main_section(args, folds, h_sessions)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    rt_rows, rp_rows, two_rows, one_rows, pl_rows, e_rows, f_rows = [], [], [], [], [], [], []
    for name, train, test_of in datasets(data_dir(args.data), folds):
        test = test_of()
        for eta in ETAS:
            seed = 0
            t0 = time.perf_counter()
            sim = simulate_clicks_protocol(train, n_sessions=h_sessions // 2, eta=eta, top_k=DEPTH,
                                           random_state=seed, aggregate=True)
            true = sim.propensity
            rng = np.random.default_rng(1000 + int(eta))
            # (a) RandTop-10 and RandPair at every session count
            errs = []
            for n_s in rt_sessions:
                counts, nq_full = randtop_counts(sim, n_s, rng)
                errs.append(rel_errors(RandTop(DEPTH).fit(counts).propensity_, true))
            rt_rows.append((name, eta, nq_full, errs))
            e_rp = [rel_errors(RandPair().fit(randpair_counts(sim, n_s, rng)).propensity_, true)
                    for n_s in rp_sessions]
            rp_rows.append((name, eta, nq_full, e_rp))
            # (b) two loggers, (c) one logger
            sim2 = simulate_clicks_protocol(train, n_sessions=h_sessions // 2, eta=eta, top_k=DEPTH,
                                            random_state=seed + 1, aggregate=True)
            two = merged_counts(sim.counts, sim2.counts)
            one = simulate_clicks_protocol(train, n_sessions=h_sessions, eta=eta, top_k=DEPTH, random_state=seed,
                                           aggregate=True).counts
            two_rows.append(em_and_harvest(name, eta, two, sim.features, true))
            em1 = RegressionEM(n_jobs=1).fit(one, features=sim.features)
            try:
                h1 = rel_errors(InterventionHarvesting().fit(one).propensity_, true)
            except InputError:
                h1 = None
            one_rows.append((name, eta, identifiability(one), rel_errors(em1.propensity_, true), h1))
            # (e) the same log: one ranker with the estimated, one with the true propensities
            e_rows.append(e_row(name, eta, one, sim.features, em1, true, test, args.kinds))
            f_rows.append(f_row(name, eta, one, sim, em1, test))
            # (d) one Plackett-Luce logger (the seed-0 production ranker's scores / temperature)
            pl = simulate_clicks_protocol(train, n_sessions=pl_sessions, eta=eta, top_k=DEPTH, random_state=seed,
                                          temperature=PL_TEMPERATURE)
            pl_rows.append(em_and_harvest(name, eta, pl.counts, pl.features, true))
            del pl
            print(f"{name} eta={eta:g}: randtop {[f'{e.max():.4f}' for e in errs]} randpair "
                  f"{[f'{e.max():.4f}' for e in e_rp]} | two loggers EM {two_rows[-1][3].max():.3f} "
                  f"harvest {two_rows[-1][4].max():.3f} | one logger EM {one_rows[-1][3].max():.3f} | "
                  f"PL ident {pl_rows[-1][2]:.3f} EM {pl_rows[-1][3].max():.3f} harvest {pl_rows[-1][4].max():.3f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    total = (time.perf_counter() - t_start, time.process_time() - cpu_start)
    write(args, rt_rows, rp_rows, two_rows, one_rows, pl_rows,
          dict(rt=rt_sessions, rp=rp_sessions, h=h_sessions, pl=pl_sessions), total, e_rows, f_rows)


def main_section(args, folds, h_sessions):
    """Section (e) or (f) alone: (c)'s log and RegressionEM fit again (the same settings and seeds); the section
    replaces the one in the existing results file, the others left as they are."""
    from rankwise.clicks import RegressionEM, simulate_clicks_protocol

    t_start, cpu_start = time.perf_counter(), time.process_time()
    rows = []
    for name, train, test_of in datasets(data_dir(args.data), folds):
        test = test_of()
        for eta in ETAS:
            sim = simulate_clicks_protocol(train, n_sessions=h_sessions, eta=eta, top_k=DEPTH, random_state=0,
                                           aggregate=True)
            em1 = RegressionEM(n_jobs=1).fit(sim.counts, features=sim.features)
            rows.append(e_row(name, eta, sim.counts, sim.features, em1, sim.propensity, test, args.kinds)
                        if args.only == "e" else f_row(name, eta, sim.counts, sim, em1, test))
    total = (time.perf_counter() - t_start, time.process_time() - cpu_start)
    lines = (e_lines(rows, h_sessions, args.kinds, total, alone=True) if args.only == "e"
             else f_lines(rows, h_sessions, total))
    head, sections = read_sections(OUT, "## ")
    mark = f"## ({args.only})"  # the section's old heading (its text may have changed) gives way to the new one
    new = {lines[0].strip(): "\n".join(lines[1:])}
    merged = {}
    for key, body in sections.items():
        merged.update(new if key.startswith(mark) else {key: body})
    merged.update(new)  # not in the file yet: last
    write_sections(OUT, [head + "\n"], merged, list(merged))


def jitter_factors(n_fits, n_ranks):
    """The fit-noise probe's factors of θ: ones, then 1 + u_j with u_j ~ U(-E_JITTER, E_JITTER) per rank ≥ 2
    (seed E_JITTER_SEED, so the first E_REFITS are (e)'s in every section)."""
    rng = np.random.default_rng(E_JITTER_SEED)
    factors = [np.ones(n_ranks)]
    for _ in range(n_fits - 1):
        f = 1.0 + rng.uniform(-E_JITTER, E_JITTER, n_ranks)
        f[0] = 1.0
        factors.append(f)
    return factors


def e_row(name, eta, counts, features, em, true, test, kinds):
    """Section (e)'s row: per ranker kind, per-query test NDCG@10 with the estimated and with the true θ (the
    goal's single fits), and the mean NDCG@10 of E_REFITS fits of each on θ × (1 + u_j) (the fit-noise probe)."""
    from rankwise.clicks import identifiability

    t0 = time.perf_counter()
    factors = jitter_factors(E_REFITS, len(true))
    ndcg, refits = {}, {}
    for kind in kinds:
        est = [ips_ndcg10(kind, counts, features, em.propensity_ * f, test) for f in factors]
        tru = [ips_ndcg10(kind, counts, features, true * f, test) for f in factors]
        ndcg[kind] = (est[0], tru[0])
        refits[kind] = (np.array([a.mean() for a in est]), np.array([b.mean() for b in tru]))
    k = min(len(em.propensity_), len(true), DEPTH)
    signed = em.propensity_[:k] / (true[:k] / true[0]) - 1.0
    row = (name, eta, identifiability(counts), rel_errors(em.propensity_, true), ndcg, refits, signed)
    print(f"(e) {name} eta={eta:g}: EM error {row[3].max():.4f}, θ̂/θ - 1 at ranks 2-{k}: "
          + " ".join(f"{x:+.3f}" for x in signed[1:]) + " | "
          + " | ".join(f"{kn} {a.mean():.4f}/{b.mean():.4f} = {a.mean() / b.mean():.4f} (mean of {E_REFITS}: "
                       f"{refits[kn][0].mean() / refits[kn][1].mean():.4f}, "
                       f"true-θ fits sd {refits[kn][1].std(ddof=1):.4f})"
                       for kn, (a, b) in ndcg.items())
          + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def f_row(name, eta, counts, sim, em, test):
    """Section (f)'s row: regression-EM's error with the logging ranker's score as one more feature, and the
    GBDT's mean test NDCG@10 over F_REFITS fits per side (estimated and true θ, (e)'s jitter rule)."""
    from rankwise.clicks import RegressionEM
    from rankwise.data import RankingDataset

    t0 = time.perf_counter()
    true, feats = sim.propensity, sim.features
    with_score = RankingDataset.from_arrays(np.column_stack([feats.X, sim.production.predict(feats.X)]), feats.labels,
                                            feats.qid, doc_ids=feats.doc_ids)
    em_score = RegressionEM(n_jobs=1).fit(counts, features=with_score)
    factors = jitter_factors(F_REFITS, len(true))
    est = np.array([ips_ndcg10("GBDT", counts, feats, em.propensity_ * f, test).mean() for f in factors])
    tru = np.array([ips_ndcg10("GBDT", counts, feats, true * f, test).mean() for f in factors])
    rng = np.random.default_rng(1)
    draws = [est[rng.integers(0, len(est), len(est))].mean() / tru[rng.integers(0, len(tru), len(tru))].mean()
             for _ in range(F_BOOTSTRAP)]
    row = (name, eta, rel_errors(em.propensity_, true), rel_errors(em_score.propensity_, true), est, tru,
           np.percentile(draws, [2.5, 97.5]))
    print(f"(f) {name} eta={eta:g}: EM error {row[2].max():.4f}, with the logger's score {row[3].max():.4f} | GBDT "
          f"ratio of {F_REFITS} fits {est.mean() / tru.mean():.4f} [{row[6][0]:.4f}, {row[6][1]:.4f}] "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def f_lines(rows, h_sessions, total=None):
    """Section (f) of the results file."""
    n_runs = len(rows)
    cost = "" if total is None else (f" (`python benchmarks/bench_clicks_propensity.py --only f`: {total[1] / 60:.1f} "
                                     f"min of CPU, {total[0] / 60:.1f} min of wall time, OMP_NUM_THREADS=1, n_jobs=1)")
    lines = ["## (f) One deterministic logger: the logger's view, and a longer fit-noise probe\n",
             f"(c)'s log ({h_sessions:,} sessions) and its `RegressionEM()` fit{cost}. *With the logger's score*: "
             "`RegressionEM()` on the same counts, its features the training features plus the logging ranker's "
             "score as one more column (the relevance regression sees what put each document at its rank: the "
             "GBDT form of the logging-policy-aware representation of Luo et al., SIGIR 2024). *Ratio of "
             f"{F_REFITS} fits*: (e)'s fit-noise probe for the GBDT with {F_REFITS} fits per side (its first "
             f"{E_REFITS} are (e)'s), the mean test NDCG@10 with the estimated θ over that with the true θ, and a "
             f"bootstrap 95% interval ({F_BOOTSTRAP:,} draws, the fits of each side resampled):\n",
             f"| run | η | regression-EM error | with the logger's score | GBDT ratio of {F_REFITS} fits | 95% interval |",
             "|---|---|---|---|---|---|"]
    for name, eta, err, err_score, est, tru, ci in rows:
        lines.append(f"| {name} | {eta:g} | {pct(err.max())} | {pct(err_score.max())} | "
                     f"{est.mean() / tru.mean():.4f} | {ci[0]:.4f}–{ci[1]:.4f} |")
    better = sum(r[3].max() < r[2].max() for r in rows)
    ratios = [r[4].mean() / r[5].mean() for r in rows]
    below = [f"{r[0]} η={r[1]:g}" for r, x in zip(rows, ratios) if r[6][1] < 0.98]
    lines += ["", f"The logger's score as a feature lowered regression-EM's error in {better}/{n_runs} runs. "
              f"GBDT ratio of {F_REFITS} fits ≥ 0.98 in {sum(x >= 0.98 for x in ratios)}/{n_runs} runs (lowest "
              f"{min(ratios):.4f}); the whole 95% interval below 0.98 in "
              + (", ".join(below) if below else "no run") + ".\n"]
    return lines


def e_ranker(kind, seed=0):
    """bench_clicks.py's ``make_rankers`` (not quick)."""
    from rankwise.models import GBDTRanker, NeuralRanker

    if kind == "GBDT":
        return GBDTRanker(loss="op_pairwise", n_estimators=100, learning_rate=0.05, random_state=seed, n_jobs=1)
    return NeuralRanker(loss="op_pairwise", hidden=(64, 32), max_iter=20, learning_rate=1e-3, random_state=seed)


def ips_ndcg10(kind, counts, features, theta, test):
    """Per-query test NDCG@10 of the ``kind`` ranker (:func:`e_ranker`) fitted by IPS on the log with propensities
    ``theta``, unclipped (``fit_debiased(..., clip=None)``), as sections (e) and (f) fit it."""
    from rankwise.clicks import fit_debiased

    return e_ndcg10(fit_debiased(e_ranker(kind), counts, features, theta, clip=None), test)


def e_ndcg10(model, ds):
    from rankwise.metrics import evaluate

    return evaluate(model.predict(ds.X), ds.labels, ds.qid, metrics=("ndcg@10",)).per_query["ndcg@10"].to_numpy()


def e_lines(rows, h_sessions, kinds, total=None, alone=False):
    """Section (e) of the results file."""
    n_runs = len(rows)
    cost = "" if total is None else (f" (`python benchmarks/bench_clicks_propensity.py --only e`: {total[1] / 60:.1f} "
                                     f"min of CPU, {total[0] / 60:.1f} min of wall time, OMP_NUM_THREADS=1, n_jobs=1; "
                                     "the log and RegressionEM refitted with (c)'s settings and seeds)")
    lines = ["## (e) One deterministic logger: IPS with the estimated vs the true propensities "
             "(goal: NDCG@10 ratio ≥ 0.98 per run)\n",
             f"(c)'s log ({h_sessions:,} sessions of the seed-0 production ranker, top-10 pages) and its "
             "RegressionEM propensities; the same ranker fitted twice by `fit_debiased(ranker, counts, features, θ, "
             "clip=None)` -- θ = RegressionEM's `propensity_`, then the true θ -- identical settings otherwise "
             "(no clipping in either; displayed documents only); mean NDCG@10 on the true labels of the test "
             f"queries{cost}. *Deep bias*: the mean of θ̂_k/θ_k − 1 over ranks 6-10 (below 0: the estimate "
             f"under-estimates the deep ranks' examination). *Fit-noise probe* (the same rule in every run, fixed "
             f"before it): each ranker is also refitted {E_REFITS - 1} times on θ × (1 + u_j), u_j ~ U(−{E_JITTER:g}, "
             f"{E_JITTER:g}) per rank ≥ 2 (the same u_j for the estimated and the true θ) -- a change of θ far below "
             f"any estimation error; *ratio of {E_REFITS} fits* is the mean NDCG@10 of the {E_REFITS} fits with the "
             f"estimated θ over that of the {E_REFITS} with the true θ, *sd* the standard deviation of the "
             f"{E_REFITS} true-θ fits' NDCG@10:\n"]
    head = "| run | η | identifiability | regression-EM error | deep bias | "
    head += " | ".join(f"{k} est. θ | {k} true θ | {k} ratio | {k} ratio of {E_REFITS} fits | {k} sd"
                       for k in kinds) + " |"
    lines += [head, "|---|---|---|---|---|" + "---|---|---|---|---|" * len(kinds)]
    for name, eta, ident, err, ndcg, refits, signed in rows:
        lines.append(f"| {name} | {eta:g} | {ident:.3f} | {pct(err.max())} | {100 * signed[5:].mean():+.1f}% | "
                     + " | ".join(f"{a.mean():.4f} | {b.mean():.4f} | {a.mean() / b.mean():.4f} | "
                                  f"{refits[k][0].mean() / refits[k][1].mean():.4f} | {refits[k][1].std(ddof=1):.4f}"
                                  for k, (a, b) in ((k, ndcg[k]) for k in kinds)) + " |")
    pooled = {k: (np.concatenate([r[4][k][0] for r in rows]), np.concatenate([r[4][k][1] for r in rows]))
              for k in kinds}
    lines.append(f"| pooled ({n_runs} runs, all test queries) | | | | | " + " | ".join(
        f"{a.mean():.4f} | {b.mean():.4f} | {a.mean() / b.mean():.4f} | | " for a, b in (pooled[k] for k in kinds))
        + " |")
    lines.append("")
    from rankwise.report.significance import paired_randomization_test

    for k in kinds:
        ratio = [r[4][k][0].mean() / r[4][k][1].mean() for r in rows]
        mean_ratio = [r[5][k][0].mean() / r[5][k][1].mean() for r in rows]
        below = [f"{r[0]} η={r[1]:g}: p = {paired_randomization_test(*r[4][k]):.3f}" for r, x in zip(rows, ratio)
                 if x < 0.98]
        n_ok = sum(x >= 0.98 for x in ratio)
        sds = [r[5][k][1].std(ddof=1) for r in rows]
        lines.append(f"{k}: ratio ≥ 0.98 in {n_ok}/{n_runs} runs ({'met' if n_ok == n_runs else 'not met'} "
                     f"per run; lowest ratio {min(ratio):.4f}; pooled {pooled[k][0].mean() / pooled[k][1].mean():.4f})"
                     + ("; paired randomisation test of estimated vs true θ per test query where below 0.98: "
                        + ", ".join(below) if below else "")
                     + f". Ratio of {E_REFITS} fits ≥ 0.98 in {sum(x >= 0.98 for x in mean_ratio)}/{n_runs} runs "
                     f"(lowest {min(mean_ratio):.4f}); sd of the true-θ fits {min(sds):.4f}-{max(sds):.4f}.\n")
    lines.append("The regression-EM errors are (c)'s (the same log and fit). Both rankers of a run see the same "
                 "log, features and seed; only the propensities differ.\n")
    return lines


def em_and_harvest(name, eta, counts, features, true):
    """A table row: ``RegressionEM()`` and ``InterventionHarvesting()`` on one aggregated log."""
    from rankwise.clicks import InterventionHarvesting, RegressionEM, identifiability

    t1 = time.perf_counter()
    em = RegressionEM(n_jobs=1).fit(counts, features=features)
    t_em = time.perf_counter() - t1
    h = InterventionHarvesting().fit(counts)
    return (name, eta, identifiability(counts), rel_errors(em.propensity_, true), rel_errors(h.propensity_, true),
            t_em)


def pct(x):
    return f"{100 * x:.2f}%"


def sweep_table(label, rows, sessions):
    """The table of an intervention estimator at every session count, and its verdict line."""
    n_runs = len(rows)
    lines = ["| run | η | queries | " + " | ".join(f"{n:,} sessions" for n in sessions) + " |",
             "|---|---|---|" + "---|" * len(sessions)]
    for name, eta, nq, errs in rows:
        lines.append(f"| {name} | {eta:g} | {nq} | " + " | ".join(pct(e.max()) for e in errs) + " |")
    ok = [sum(errs[i].max() <= 0.02 for *_, errs in rows) for i in range(len(sessions))]
    first = next((n for n, k in zip(sessions, ok) if k == n_runs), None)
    verdict = f"met at {first:,} randomised sessions" if first else "not met at any session count tried"
    lines += ["", f"{label} within 2% in every run: {verdict} (runs within 2% per count: "
              + ", ".join(f"{n:,}: {k}/{n_runs}" for n, k in zip(sessions, ok)) + ").\n"]
    return lines


def em_table(rows):
    """The table of regression-EM and intervention harvesting on one kind of log, and its verdict line."""
    n_runs = len(rows)
    lines = ["| run | η | identifiability | regression-EM error | harvesting error | regression-EM fit (s, wall) |",
             "|---|---|---|---|---|---|"]
    for name, eta, ident, e_em, e_h, t in rows:
        lines.append(f"| {name} | {eta:g} | {ident:.3f} | {pct(e_em.max())} | {pct(e_h.max())} | {t:.1f} |")
    ok_em = sum(r[3].max() <= 0.10 for r in rows)
    ok_h = sum(r[4].max() <= 0.10 for r in rows)
    goal = max(n_runs - 1, 1)
    lines += ["", f"Within 10%: regression-EM {ok_em}/{n_runs} ({'met' if ok_em >= goal else 'not met'}), "
              f"intervention harvesting {ok_h}/{n_runs} ({'met' if ok_h >= goal else 'not met'}).\n"]
    return lines


def write(args, rt_rows, rp_rows, two_rows, one_rows, pl_rows, n, total, e_rows=(), f_rows=()):
    n_runs = len(rt_rows)
    lines = ["# Propensity estimation: RandTop, RandPair, regression-EM, intervention harvesting\n",
             f"`python benchmarks/bench_clicks_propensity.py{' --quick' if args.quick else ''}` "
             f"({n_runs} runs, {total[1] / 60:.1f} min of CPU, {total[0] / 60:.1f} min of wall time on a shared "
             f"{platform.machine()} machine, OMP_NUM_THREADS=1, n_jobs=1). "
             "Protocol and settings: the script's docstring. Error of a run: the largest relative error of "
             "θ̂_k/θ̂_1 over ranks 2-10 against the protocol's true θ_k/θ_1 = k^-η.\n",
             "## (a) Randomised interventions (goal: within 2% at ranks 2-10 in every run)\n",
             "RandTop-10 (`RandTop(10).fit(counts)`), randomised sessions on the queries with a full page of 10 "
             "(their number in the table), aggregated:\n"]
    lines += sweep_table("RandTop-10", rt_rows, n["rt"])
    lines += ["RandPair (`RandPair().fit(counts)`: pivot rank 1, k uniform in 2..10, swapped with probability 1/2), "
              "randomised sessions on the same queries, aggregated per (query, document, rank, k) "
              "(`ClickCounts.row_data[\"pair_rank\"]`; the estimate equals the session log's):\n"]
    lines += sweep_table("RandPair", rp_rows, n["rp"])
    lines += ["## (b) Two logging rankers (goal: within 10% at ranks 2-10 in at least 11 of 12 runs)\n",
              f"{n['h']:,} sessions, half from each of two production rankers (`simulate_clicks_protocol` seeds "
              "0 and 1: trained on different 1% query samples), aggregated and merged. `RegressionEM()` (defaults, "
              "n_jobs=1) and `InterventionHarvesting()`:\n"]
    lines += em_table(two_rows)
    lines += ["## (c) One deterministic logger: error and identifiability\n",
              f"{n['h']:,} sessions of the seed-0 production ranker alone:\n",
              "| run | η | identifiability | regression-EM error | harvesting |", "|---|---|---|---|---|"]
    for name, eta, ident, e_em, e_h in one_rows:
        lines.append(f"| {name} | {eta:g} | {ident:.3f} | {pct(e_em.max())} | "
                     f"{'nothing to harvest' if e_h is None else pct(e_h.max())} |")
    lines.append("")
    lines.append("With one deterministic logger no (query, document) pair moves (identifiability 0): position bias "
                 "is identified only through what the relevance model cannot express (Chen et al., ICML 2024), "
                 "and the errors above are what that leaves.\n")
    lines += ["## (d) One Plackett–Luce logger (goal: within 10% at ranks 2-10 in at least 11 of 12 runs)\n",
              f"{n['pl']:,} sessions of `simulate_clicks_protocol(..., temperature={PL_TEMPERATURE:g}, top_k=10)` (the "
              "seed-0 production ranker's scores / temperature as Plackett–Luce logits, a sampled top-10 page per "
              "session), the session log's `counts`. `RegressionEM()` (defaults, n_jobs=1) and "
              "`InterventionHarvesting()` on the same counts:\n"]
    lines += em_table(pl_rows)
    if e_rows:
        lines += e_lines(e_rows, n["h"], args.kinds)
    if f_rows:
        lines += f_lines(f_rows, n["h"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
