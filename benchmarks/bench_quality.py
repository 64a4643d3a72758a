"""Ranking quality of every rankwise model against LightGBM, XGBoost and ridge regression, same run, same protocol.

MQ2008 (LETOR 4.0), five folds: each model is trained on ``train``, its few hyperparameter
values and its early stopping are chosen on ``vali`` only (NDCG@10), and the chosen model is
scored once on ``test``: NDCG@1/3/5/10 and MAP with rankwise's conventions (exp2 gain, tied
scores averaged, queries without a relevant document count 0, MAP relevance = label >= 1).
The peers run through their own libraries' APIs with the same tree parameters, the same grid
and the same early stopping rule as ``GBDTRanker``. Goals (issue 5) are computed from the numbers:

(a) some ``GBDTRanker`` with a rankwise loss >= LightGBM ``lambdarank`` on mean NDCG@10;
(b) the best ``LinearRanker`` > the ridge baseline; (c) the best ``NeuralRanker`` > the best linear one;

each with a paired randomisation test on the per-query test NDCG@10 pooled over the folds
(every MQ2008 query is in exactly one test fold). A smaller table runs LightGBM's lambdarank
example (``rank.train``/``rank.test``, no vali file: 20 % of the training queries are held out,
by query, for selection and early stopping).

Everything runs single-threaded (torch, OpenMP, BLAS, LightGBM, XGBoost): the benchmark machines
are shared 2-core boxes, and a second OpenMP thread under load slowed LightGBM down by 30x here.

Usage: python benchmarks/bench_quality.py [--quick] [--folds 1 3] [--data DIR] [--no-sample]
Writes benchmarks/results/bench_quality.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_quality.md"
METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map")
CONV = {"gain": "exp2", "ties": "average", "empty": 0.0}  # rankwise's defaults, written out
SEED = 0


# -- data -------------------------------------------------------------------------------------------
@dataclass
class Split:
    X: object
    y: np.ndarray
    qid: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        # read_svmlight returns contiguous queries, so group sizes are run lengths of qid
        change = np.flatnonzero(np.r_[True, self.qid[1:] != self.qid[:-1], True])
        return np.diff(change)


def _split(ds, dense: bool = False) -> Split:
    X = ds.X.toarray() if dense and hasattr(ds.X, "toarray") else ds.X
    return Split(X, np.asarray(ds.labels, dtype=np.float64), np.asarray(ds.qid))


def load_mq2008(root: Path, fold: int):
    from rankwise.data import read_svmlight

    d = root / "MQ2008" / f"Fold{fold}"
    return tuple(_split(read_svmlight(d / f"{s}.txt.gz", n_features=46)) for s in ("train", "vali", "test"))


def load_lambdarank_sample(root: Path, holdout: float = 0.2):
    """rank.train split by query into train (80 %) and a held-out vali (20 %), and rank.test (dense arrays)."""
    from rankwise.data import read_svmlight

    d = root / "lightgbm_lambdarank"
    full = read_svmlight(d / "rank.train", n_features=300)
    test = read_svmlight(d / "rank.test", n_features=300)
    rng = np.random.default_rng(SEED)
    nq = full.n_queries
    held = np.zeros(nq, dtype=bool)
    held[rng.choice(nq, size=int(round(holdout * nq)), replace=False)] = True
    # dense (3,773 x 300 float32): every model gets the same input, and NeuralRanker's MLP predict
    # does not take CSR input (it trains on it)
    return (_split(full.take(np.flatnonzero(~held)), True), _split(full.take(np.flatnonzero(held)), True),
            _split(test, True))


# -- metrics ----------------------------------------------------------------------------------------
def ndcg10(scores, s: Split) -> float:
    from rankwise.metrics import ndcg

    return float(ndcg(scores, s.y, qid=s.qid, k=10, **CONV))


def evaluate_test(scores, s: Split):
    from rankwise.metrics import evaluate

    res = evaluate(scores, s.y, qid=s.qid, metrics=list(METRICS), **CONV)
    return res.mean, res.per_query["ndcg@10"].to_numpy(dtype=np.float64)


# -- peers: the other libraries' own training APIs -------------------------------------------------
class RidgePeer:
    """Pointwise baseline: scikit-learn Ridge regression of the label on the features."""

    def __init__(self, alpha):
        self.alpha = alpha

    def fit(self, X, y, *, qid, eval_set=None):
        from sklearn.linear_model import Ridge

        self.model_ = Ridge(alpha=self.alpha).fit(X, y)
        return self

    def predict(self, X, qid=None):
        return self.model_.predict(X)


class LightGBMPeer:
    """``lgb.train`` with a built-in ranking objective; early stopping on rankwise NDCG@10 of vali.

    Tree parameters equal those ``GBDTRanker`` passes to LightGBM, so only the objective differs.
    """

    def __init__(self, objective, *, num_leaves, learning_rate, n_estimators, patience):
        self.objective, self.num_leaves, self.learning_rate = objective, num_leaves, learning_rate
        self.n_estimators, self.patience = n_estimators, patience

    def fit(self, X, y, *, qid, eval_set):
        import lightgbm as lgb

        tr, va = Split(X, y, qid), Split(*eval_set)
        params = {"objective": self.objective, "learning_rate": self.learning_rate, "num_leaves": self.num_leaves,
                  "min_data_in_leaf": 20, "lambda_l2": 0.0, "seed": SEED, "deterministic": True,
                  "force_row_wise": True, "verbosity": -1, "metric": "None", "num_threads": 1}
        dtr = lgb.Dataset(X, y, group=tr.sizes)
        dva = lgb.Dataset(va.X, va.y, group=va.sizes, reference=dtr)
        self.booster_ = lgb.train(params, dtr, self.n_estimators, valid_sets=[dva], valid_names=["vali"],
                                  feval=lambda p, _: ("ndcg@10", ndcg10(p, va), True),
                                  callbacks=[lgb.early_stopping(self.patience, verbose=False)])
        return self

    def predict(self, X, qid=None):
        return self.booster_.predict(X, raw_score=True, num_iteration=self.booster_.best_iteration)


class XGBoostPeer:
    """``xgb.train`` with ``rank:ndcg``; early stopping on rankwise NDCG@10 of vali.

    Tree parameters equal those ``GBDTRanker(backend="xgboost")`` uses (max_depth 6, max_leaves).
    """

    def __init__(self, objective, *, num_leaves, learning_rate, n_estimators, patience):
        self.objective, self.num_leaves, self.learning_rate = objective, num_leaves, learning_rate
        self.n_estimators, self.patience = n_estimators, patience

    def fit(self, X, y, *, qid, eval_set):
        import xgboost as xgb

        tr, va = Split(X, y, qid), Split(*eval_set)
        dtr = xgb.DMatrix(X, label=y)
        dtr.set_group(tr.sizes)
        dva = xgb.DMatrix(va.X, label=va.y)
        dva.set_group(va.sizes)
        params = {"objective": self.objective, "eta": self.learning_rate, "max_depth": 6,
                  "max_leaves": self.num_leaves, "min_child_weight": 1.0, "lambda": 1e-6, "seed": SEED,
                  "tree_method": "hist", "disable_default_eval_metric": 1, "verbosity": 0, "nthread": 1}
        self.booster_ = xgb.train(params, dtr, self.n_estimators, evals=[(dva, "vali")],
                                  custom_metric=lambda p, _: ("ndcg@10", ndcg10(p, va)), maximize=True,
                                  early_stopping_rounds=self.patience, verbose_eval=False)
        return self

    def predict(self, X, qid=None):
        import xgboost as xgb

        return self.booster_.predict(xgb.DMatrix(X), output_margin=True,
                                     iteration_range=(0, self.booster_.best_iteration + 1))


class ConstantScore:
    """Every document gets the same score: ties averaged give the expected metric of a random order."""

    def fit(self, X, y, *, qid, eval_set=None):
        return self

    def predict(self, X, qid=None):
        return np.zeros(X.shape[0])


# -- the models and their grids --------------------------------------------------------------------
@dataclass
class Spec:
    name: str
    family: str  # linear | neural | gbdt | gbdt-native | reduction | structured | peer-* | ridge | constant
    configs: list  # [(label, factory)]
    uses_vali: bool = True  # fit(..., eval_set=vali) for early stopping
    qid_predict: bool = False  # predict(X, qid=qid)
    quick: bool = False  # part of --quick
    sample: bool = False  # part of the LightGBM-sample table
    notes: str = ""


GBDT = {"learning_rate": 0.05, "n_estimators": 500, "patience": 50, "num_leaves": (7, 31)}


def specs() -> list[Spec]:
    from lightgbm import LGBMClassifier
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker, PairwiseReductionRanker, StructuredHingeRanker

    out = [Spec("ridge regression (sklearn Ridge)", "ridge",
                [(f"alpha={a:g}", lambda a=a: RidgePeer(a)) for a in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)],
                uses_vali=False, quick=True, sample=True),
           Spec("constant score (all tied)", "constant", [("-", ConstantScore)], uses_vali=False, quick=True)]
    nl = GBDT["num_leaves"]
    tree = {"learning_rate": GBDT["learning_rate"], "n_estimators": GBDT["n_estimators"]}
    for obj, quick in (("lambdarank", True), ("rank_xendcg", False)):
        out.append(Spec(f"LightGBM `{obj}` (peer)", "peer-lgb-" + obj,
                        [(f"leaves={v}", lambda v=v, o=obj: LightGBMPeer(o, num_leaves=v, patience=GBDT["patience"],
                                                                          **tree)) for v in nl],
                        quick=quick, sample=True))
    out.append(Spec("XGBoost `rank:ndcg` (peer)", "peer-xgb",
                    [(f"leaves={v}", lambda v=v: XGBoostPeer("rank:ndcg", num_leaves=v, patience=GBDT["patience"],
                                                             **tree)) for v in nl], sample=True))

    def gbdt(loss, backend="lightgbm"):
        return [(f"leaves={v}", lambda v=v: GBDTRanker(loss, backend=backend, num_leaves=v,
                                                         early_stopping_rounds=GBDT["patience"], random_state=SEED,
                                                         n_jobs=1, verbose=False, **tree)) for v in nl]

    for loss, quick, sample in (("listnet", True, True), ("lambdaloss", True, True), ("ranknet", False, False),
                                ("pointwise_squared", False, False)):
        out.append(Spec(f"GBDTRanker {loss} (lightgbm)", "gbdt", gbdt(loss), quick=quick, sample=sample))
    out.append(Spec("GBDTRanker listnet (xgboost)", "gbdt", gbdt("listnet", "xgboost"), sample=True))
    out.append(Spec("GBDTRanker native:lambdarank (lightgbm; wrapper of the peer)", "gbdt-native",
                    gbdt("native:lambdarank")))

    def linear(loss, solver):
        kw = ({"solver": "lbfgs", "max_iter": 150, "early_stopping_rounds": 15} if solver == "lbfgs" else
              {"solver": "adam", "lr": 0.01, "batch_queries": 16, "max_iter": 40, "early_stopping_rounds": 5})
        return [(f"alpha={a:g}", lambda a=a: LinearRanker(loss, alpha=a, random_state=SEED, verbose=False, **kw))
                for a in (1e-4, 1e-2)]

    for loss, solver, quick, sample in (("pointwise_squared", "lbfgs", False, False),
                                        ("ranknet", "lbfgs", False, False),
                                        ("pairwise_hinge", "lbfgs", False, False), ("listnet", "lbfgs", True, True),
                                        ("listmle", "lbfgs", False, False), ("lambdaloss", "adam", True, True)):
        out.append(Spec(f"LinearRanker {loss} ({solver})", "linear", linear(loss, solver), quick=quick,
                        sample=sample))

    def neural(loss, arch):
        kw = ({"hidden": (64, 32), "batch_queries": 32, "max_iter": 40, "early_stopping_rounds": 8} if arch == "mlp" else
              {"hidden": (32, 32), "n_heads": 2, "n_layers": 1, "batch_queries": 32, "max_iter": 25,
               "early_stopping_rounds": 5})
        return [(f"learning_rate={lr:g}", lambda lr=lr: NeuralRanker(loss, architecture=arch, learning_rate=lr, dropout=0.1,
                                                           random_state=SEED, verbose=False, **kw))
                for lr in (1e-3, 3e-3)]

    for loss, arch, quick, sample in (("listnet", "mlp", True, True), ("lambdaloss", "mlp", False, False),
                                      ("ranknet", "mlp", False, False), ("listnet", "attention", True, False)):
        out.append(Spec(f"NeuralRanker {loss} ({arch})", "neural", neural(loss, arch),
                        qid_predict=arch == "attention", quick=quick, sample=sample))

    def red(make, **kw):
        return lambda: PairwiseReductionRanker(make(), random_state=SEED, **kw)

    out += [
        Spec("PairwiseReduction LogisticRegression (all pairs)", "reduction",
             [(f"C={c:g}", red(lambda c=c: LogisticRegression(C=c, max_iter=1000))) for c in (0.01, 1.0)],
             uses_vali=False, qid_predict=True, quick=True, sample=True),
        Spec("PairwiseReduction LinearSVC (all pairs, ω=kemeny)", "reduction",
             [(f"C={c:g}", red(lambda c=c: LinearSVC(C=c), weights="kemeny")) for c in (0.01, 0.1)],
             uses_vali=False, qid_predict=True),
        Spec("PairwiseReduction HistGradientBoosting (30 pairs/query)", "reduction",
             [(f"leaves={v}", red(lambda v=v: HistGradientBoostingClassifier(max_iter=100, max_leaf_nodes=v,
                                                                             early_stopping=False,
                                                                             random_state=SEED), pairs=30))
              for v in (7, 31)],
             uses_vali=False, qid_predict=True),
        Spec("PairwiseReduction LGBMClassifier (30 pairs/query, ω=ndcg)", "reduction",
             [(f"leaves={v}", red(lambda v=v: LGBMClassifier(n_estimators=100, num_leaves=v, n_jobs=1, verbose=-1,
                                                             random_state=SEED), pairs=30, weights="ndcg"))
              for v in (7, 31)],
             uses_vali=False, qid_predict=True),
    ]
    for measure, quick, sample in (("ndcg@10", True, True), ("precision@5", False, False)):
        out.append(Spec(f"StructuredHingeRanker {measure}", "structured",
                        [(f"alpha={a:g}", lambda a=a, m=measure: StructuredHingeRanker(m, alpha=a, max_iter=10,
                                                                                         random_state=SEED))
                         for a in (10.0, 1.0, 0.1)],
                        uses_vali=False, quick=quick, sample=sample))
    return out


# -- protocol ---------------------------------------------------------------------------------------
@dataclass
class Result:
    means: dict = field(default_factory=dict)  # metric -> test value
    per_query: np.ndarray | None = None  # test NDCG@10 per query
    qids: np.ndarray | None = None
    fit_s: float = np.nan  # fit of the chosen configuration (wall)
    fit_cpu: float = np.nan  # same, CPU time of this process
    predict_s: float = np.nan  # test predict of the chosen configuration
    search_s: float = 0.0  # every configuration: fit + vali predict (wall)
    search_cpu: float = 0.0
    chosen: str = ""
    error: str = ""


def _predict(model, spec: Spec, s: Split):
    return model.predict(s.X, qid=s.qid) if spec.qid_predict else model.predict(s.X)


LOADS: list = []  # 1-minute load average sampled before every model, reported with the times


def run_spec(spec: Spec, tr: Split, va: Split, te: Split) -> Result:
    """Fit every configuration on train, keep the best on vali NDCG@10, score it on test."""
    LOADS.append(os.getloadavg()[0])
    res = Result()
    best = None
    errors = []
    for label, make in spec.configs:
        try:
            model = make()
            t0, c0 = time.perf_counter(), time.process_time()
            if spec.uses_vali:
                model.fit(tr.X, tr.y, qid=tr.qid, eval_set=(va.X, va.y, va.qid))
            else:
                model.fit(tr.X, tr.y, qid=tr.qid)
            t1, c1 = time.perf_counter(), time.process_time()
            v = ndcg10(_predict(model, spec, va), va)
            res.search_s += time.perf_counter() - t0
            res.search_cpu += time.process_time() - c0
        except Exception as exc:  # a failing configuration is reported, not fatal
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
            traceback.print_exc()
            continue
        if best is None or v > best[0]:
            best = (v, label, model, t1 - t0, c1 - c0)
    if best is None:
        res.error = "; ".join(errors)[:300]
        return res
    _, res.chosen, model, res.fit_s, res.fit_cpu = best
    t0 = time.perf_counter()
    scores = _predict(model, spec, te)
    res.predict_s = time.perf_counter() - t0
    res.means, res.per_query = evaluate_test(scores, te)
    res.qids = np.unique(te.qid)
    if errors:
        res.error = "; ".join(errors)[:300]
    return res


def run_folds(root: Path, folds, selected: list[Spec]):
    results = {s.name: [] for s in selected}
    for fold in folds:
        tr, va, te = load_mq2008(root, fold)
        t_fold = time.perf_counter()
        for spec in selected:
            t0 = time.perf_counter()
            r = run_spec(spec, tr, va, te)
            r.qids = None if r.qids is None else np.array([f"{fold}:{q}" for q in r.qids])
            results[spec.name].append(r)
            print(f"fold {fold} | {spec.name} [{r.chosen}] NDCG@10 {r.means.get('ndcg@10', np.nan):.4f} "
                  f"fit {r.fit_s:.2f}s (cpu {r.fit_cpu:.2f}s) search {r.search_s:.1f}s (cpu {r.search_cpu:.1f}s) "
                  f"({time.perf_counter() - t0:.1f}s)"
                  + (f" ERROR {r.error}" if r.error else ""), flush=True)
        print(f"== fold {fold} done in {time.perf_counter() - t_fold:.0f}s", flush=True)
    return results


# -- report -----------------------------------------------------------------------------------------
def _agg(rs: list[Result], key: str):
    vals = np.array([r.means[key] for r in rs if key in r.means])
    if len(vals) == 0:
        return np.nan, np.nan
    return float(vals.mean()), float(vals.std(ddof=1)) if len(vals) > 1 else 0.0


def _chosen(rs: list[Result]) -> str:
    from collections import Counter

    c = Counter(r.chosen for r in rs if r.chosen)
    return ", ".join(f"{k} ×{v}" if len(rs) > 1 else k for k, v in c.most_common())


def table(selected: list[Spec], results: dict, n_folds: int) -> list[str]:
    pm = " ± std" if n_folds > 1 else ""
    lines = ["| model | NDCG@1 | NDCG@3 | NDCG@5 | NDCG@10 | MAP | fit s (CPU s) | predict ms | search s (CPU s) "
             "| chosen on vali |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    def key(spec):
        mu = _agg(results[spec.name], "ndcg@10")[0]
        return 1.0 if np.isnan(mu) else -mu

    order = sorted(selected, key=key)
    for spec in order:
        rs = results[spec.name]
        cells = []
        for m in METRICS:
            mu, sd = _agg(rs, m)
            cells.append("n/a" if np.isnan(mu) else (f"{mu:.4f} ± {sd:.4f}" if pm else f"{mu:.4f}"))
        fit = np.nanmean([r.fit_s for r in rs]) if any(np.isfinite(r.fit_s) for r in rs) else np.nan
        fit_cpu = np.nanmean([r.fit_cpu for r in rs]) if any(np.isfinite(r.fit_cpu) for r in rs) else np.nan
        search_cpu = float(np.mean([r.search_cpu for r in rs]))
        pred = np.nanmean([r.predict_s for r in rs]) if any(np.isfinite(r.predict_s) for r in rs) else np.nan
        search = float(np.mean([r.search_s for r in rs]))
        err = "; ".join(sorted({r.error for r in rs if r.error}))
        chosen = _chosen(rs) + (f" — **errors:** {err}" if err else "")
        lines.append(f"| {spec.name} | " + " | ".join(cells)
                     + f" | {fit:.2f} ({fit_cpu:.2f}) | {pred * 1e3:.1f} | {search:.1f} ({search_cpu:.1f}) "
                       f"| {chosen} |")
    return lines


def _pooled(rs: list[Result]):
    if any(r.per_query is None for r in rs):
        return None
    return np.concatenate([r.per_query for r in rs])


def goals(selected: list[Spec], results: dict) -> list[str]:
    from rankwise.report.significance import paired_randomization_test, win_tie_loss

    def best(family_pred):
        cands = [(s.name, _agg(results[s.name], "ndcg@10")[0]) for s in selected if family_pred(s.family)]
        cands = [c for c in cands if not np.isnan(c[1])]
        return max(cands, key=lambda c: c[1]) if cands else None

    def compare(label, a, b, strict):
        if a is None or b is None:
            return f"- {label}: **not evaluated** (a model of the comparison is missing from this run)."
        met = a[1] > b[1] if strict else a[1] >= b[1]
        pa, pb = _pooled(results[a[0]]), _pooled(results[b[0]])
        extra = ""
        if pa is not None and pb is not None and len(pa) == len(pb):
            p = paired_randomization_test(pa, pb, n_resamples=10_000, random_state=SEED)
            w, t, lo = win_tie_loss(pa, pb)
            extra = (f"; paired randomisation test on {len(pa)} test queries: p = {p:.3f}"
                     f" (per query: {w} wins, {t} ties, {lo} losses)")
        return (f"- {label}: **{'met' if met else 'not met'}** — {a[0]} {a[1]:.4f} vs {b[0]} {b[1]:.4f} "
                f"(Δ = {a[1] - b[1]:+.4f}{extra}).")

    lgb_peer = best(lambda f: f == "peer-lgb-lambdarank")
    return [compare("(a) some GBDTRanker with a rankwise loss ≥ LightGBM lambdarank (mean NDCG@10)",
                    best(lambda f: f == "gbdt"), lgb_peer, strict=False),
            compare("(b) best LinearRanker > ridge regression", best(lambda f: f == "linear"),
                    best(lambda f: f == "ridge"), strict=True),
            compare("(c) best NeuralRanker > best LinearRanker", best(lambda f: f == "neural"),
                    best(lambda f: f == "linear"), strict=True)]


def wrapper_note(selected: list[Spec], results: dict) -> list[str]:
    """Compare GBDTRanker(native:lambdarank) with the LightGBM peer it wraps: same trees, cost of the wrapper."""
    nat = [s for s in selected if s.family == "gbdt-native"]
    peer = [s for s in selected if s.family == "peer-lgb-lambdarank"]
    if not nat or not peer:
        return []
    a, b = results[nat[0].name], results[peer[0].name]
    if any(not r.means for r in a + b):
        return []
    same = all(abs(x.means["ndcg@10"] - y.means["ndcg@10"]) < 1e-12 for x, y in zip(a, b))
    ratio = np.nanmean([r.fit_cpu for r in a]) / np.nanmean([r.fit_cpu for r in b])
    return ["", f"Wrapper check: `GBDTRanker(loss=\"native:lambdarank\")` gives "
            f"{'the same' if same else 'different'} test NDCG@10 as LightGBM `lambdarank` in every fold"
            f"{' (same trees)' if same else ''}, at {ratio:.1f}× its fit CPU time: at the time of writing "
            "GBDTRanker's early stopping re-predicted the whole validation set with all trees after every round "
            "(cost quadratic in the number of rounds), where LightGBM updates cached validation scores."]


def run_sample(root: Path, selected: list[Spec]):
    tr, va, te = load_lambdarank_sample(root)
    out = {}
    for spec in selected:
        t0 = time.perf_counter()
        r = run_spec(spec, tr, va, te)
        out[spec.name] = [r]
        print(f"sample | {spec.name} [{r.chosen}] NDCG@10 {r.means.get('ndcg@10', np.nan):.4f} "
              f"({time.perf_counter() - t0:.1f}s)" + (f" ERROR {r.error}" if r.error else ""), flush=True)
    return out, (tr, va, te)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="Fold1 only and a subset of the models (smoke run)")
    ap.add_argument("--folds", type=int, nargs="+", default=None, help="MQ2008 folds to run (default 1..5)")
    ap.add_argument("--data", default=os.environ.get("RANKWISE_DATA", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--no-sample", action="store_true", help="skip the LightGBM lambdarank sample table")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    warnings.filterwarnings("ignore", category=UserWarning)  # one-document queries of the lambdarank sample
    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    root = Path(args.data)
    folds = args.folds or ([1] if args.quick else [1, 2, 3, 4, 5])
    all_specs = specs()
    selected = [s for s in all_specs if s.quick] if args.quick else all_specs
    t_start, c_start = time.perf_counter(), time.process_time()
    load0 = os.getloadavg()[0]
    lines = ["## Ranking quality: every model vs LightGBM, XGBoost and ridge (`bench_quality.py`)", ""]
    have_mq = (root / "MQ2008" / "Fold1" / "train.txt.gz").exists()
    if have_mq:
        results = run_folds(root, folds, selected)
        lines += [f"MQ2008, folds {', '.join(map(str, folds))}: trained on `train`; hyperparameters (the grid in "
                  "*chosen on vali*, with how many folds chose each value) and early stopping chosen on `vali` "
                  "NDCG@10 only; scored once on `test`. Metrics: rankwise `evaluate` with exp2 gain, tied scores "
                  "averaged, queries without a relevant document = 0 (LightGBM's own metric counts them as 1, so "
                  "numbers are lower than LETOR's), MAP relevance = label ≥ 1. "
                  + ("Mean ± std (ddof=1) over folds. " if len(folds) > 1 else "")
                  + "*fit s* / *predict ms*: wall time of the chosen configuration on one fold's train / test (mean over "
                  "folds), with the process's CPU time in parentheses (single-threaded, so CPU time is what the fit "
                  "costs on an idle core; wall time includes waiting for a core on this shared machine); *search s*: "
                  "all configurations (fits + vali scoring), mean per fold. Sorted by NDCG@10.", ""]
        lines += table(selected, results, len(folds))
        lines += ["", "Protocol details: GBDT rows (ours and the peers) share learning rate "
                  f"{GBDT['learning_rate']}, ≤ {GBDT['n_estimators']} rounds, early stopping after {GBDT['patience']} "
                  "rounds without a better vali NDCG@10, min 20 documents per leaf, no ℓ2, and the grid num_leaves "
                  f"∈ {GBDT['num_leaves']} (XGBoost: max_depth 6 and max_leaves from the grid); the peers run through "
                  "`lgb.train` / `xgb.train` with the same rankwise NDCG@10 as their early-stopping metric. "
                  "LinearRanker: L-BFGS (≤ 150 iterations, patience 15), except lambdaloss: Adam (lr 0.01, "
                  "16 queries per batch, ≤ 40 epochs, patience 5), because, when this benchmark was written, its "
                  "L-BFGS path evaluated the O(n²) loss on queries padded to the longest of each 256-query chunk (on "
                  "MQ2008 Fold1 about 7× the pair cells of the unpadded lists, over a second per function "
                  "evaluation). NeuralRanker: AdamW, dropout 0.1, 32 queries "
                  "per batch, MLP (64, 32) ≤ 40 epochs patience 8; attention width 32, 2 heads, 1 layer, head (32,), "
                  "≤ 25 epochs patience 5. Reductions, structured hinge and ridge have no early stopping (their "
                  "grid is still chosen on vali); StructuredHingeRanker: 10 SGD epochs. Ridge gets six α values, more "
                  "than any rankwise model gets.", "", "Goals (issue 5), computed from the table above:", ""]
        lines += goals(selected, results)
        lines += wrapper_note(selected, results)
    else:
        lines.append(f"MQ2008 absent under {root}: the MQ2008 table was not run.")
    lines.append("")
    sample_dir = root / "lightgbm_lambdarank"
    if not args.no_sample and (sample_dir / "rank.train").exists():
        sample_specs = [s for s in selected if s.sample]
        t0, c0 = time.perf_counter(), time.process_time()
        sres, (tr, va, te) = run_sample(root, sample_specs)
        lines += ["### LightGBM's lambdarank example (`rank.train` / `rank.test`)", "",
                  f"No vali file: {len(np.unique(va.qid))} of the {len(np.unique(tr.qid)) + len(np.unique(va.qid))} "
                  f"training queries (20 %, drawn by query with seed {SEED}) are held out for selection and early "
                  f"stopping; models train on the other {len(tr.y)} rows ({len(np.unique(tr.qid))} queries) and are "
                  f"scored on `rank.test` ({len(te.y)} rows, {len(np.unique(te.qid))} queries; 300 sparse features, "
                  "labels 0–4; given to every model as dense arrays). Same grids and metrics as above; one run, so "
                  "no ± (50 test queries: differences of a few points are noise). Took "
                  f"{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU.", ""]
        lines += table(sample_specs, sres, 1)
        lines.append("")
    elif not args.no_sample:
        lines += [f"LightGBM lambdarank sample absent under {sample_dir}: its table was not run.", ""]
    total = time.perf_counter() - t_start
    total_cpu = time.process_time() - c_start
    import lightgbm
    import sklearn
    import xgboost

    lines += [f"Run: `python benchmarks/bench_quality.py{' --quick' if args.quick else ''}"
              f"{' --folds ' + ' '.join(map(str, args.folds)) if args.folds else ''}` took {total / 60:.1f} min wall, "
              f"{total_cpu / 60:.1f} min CPU, on "
              f"{platform.node()} ({os.cpu_count()} cores, shared with other jobs: 1-minute load average between "
              f"{min(LOADS + [load0]):.1f} and {max(LOADS + [load0]):.1f} during the run, so wall times are noisy — "
              "the CPU times are the budget that holds on an idle 2-core machine). "
              f"Single-threaded throughout. Python {platform.python_version()}, torch {torch.__version__}, "
              f"LightGBM {lightgbm.__version__}, XGBoost {xgboost.__version__}, scikit-learn {sklearn.__version__}.",
              ""]
    text = "\n".join(lines)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"wrote {out} after {total:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
