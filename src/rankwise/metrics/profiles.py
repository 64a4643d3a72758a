"""Named profiles: the conventions that reproduce a peer tool's numbers.

Each profile was checked against the peer itself on the MQ2008 test folds (tests/metrics/
test_peers.py), with distinct scores and with scores rounded so that ties are everywhere —
except ``letor`` (a Perl script, not installed), checked against a reference written from the
script's code.
"""
from __future__ import annotations

from rankwise.errors import InputError

PROFILES: dict[str, dict] = {
    # trec_eval 10: gain = grade, 1/log2(i+1), ties by docno descending on scores compared as
    # doubles, relevant = grade >= 1 (-l 1), queries without relevant documents score 0.
    "trec_eval": {"gain": "linear", "discount": "log2", "ties": "docid", "empty": 0.0, "threshold": 1,
                  "ap_denominator": "relevant", "score_precision": "float64"},
    # trec_eval <= 9 and pytrec_eval: the same, with scores stored (and compared) as float32.
    "trec_eval9": {"gain": "linear", "discount": "log2", "ties": "docid", "empty": 0.0, "threshold": 1,
                   "ap_denominator": "relevant", "score_precision": "float32"},
    # LightGBM ndcg@k / map@k: label_gain 2^y - 1, stable sort (input order), empty query = 1,
    # map@k divided by min(R, k); relevant = label > 0.5, i.e. >= 1 for its integer labels.
    "lightgbm": {"gain": "exp2", "discount": "log2", "ties": "input", "empty": 1.0, "threshold": 1,
                 "ap_denominator": "min_k"},
    # XGBoost ndcg@k / map@k (2.x): as LightGBM; a metric without @k is cut at 32.
    # (ndcg@k- / map@k- in XGBoost: use empty=0.)
    "xgboost": {"gain": "exp2", "discount": "log2", "ties": "input", "empty": 1.0, "threshold": 1,
                "ap_denominator": "min_k", "default_k": 32},
    # sklearn.metrics.ndcg_score: y_true is the gain, ties averaged (McSherry & Najork), 0 if no gain.
    "sklearn": {"gain": "linear", "discount": "log2", "ties": "average", "empty": 0.0},
    # ranx: ndcg with linear gain (ndcg_burges = gain="exp2"), rel_lvl 1, 0 when no relevant document,
    # ties in the order numba's quicksort leaves them.
    "ranx": {"gain": "linear", "discount": "log2", "ties": "ranx", "empty": 0.0, "threshold": 1,
             "ap_denominator": "relevant"},
    # LETOR 4.0 Eval-Score-4.0.pl: gains {0:0, 1:1, 2:3} (= 2^y - 1), first two positions
    # undiscounted then 1/log2(i), Perl's stable sort on file order, NDCG@k = 0 when the list has
    # fewer than k documents, P@k divides by k, relevant = grade >= 1, 0 for no relevant.
    "letor": {"gain": "exp2", "discount": "jarvelin", "ties": "input", "empty": 0.0, "threshold": 1,
              "short_list": "zero", "ap_denominator": "relevant"},
}


def get_profile(name: str) -> dict:
    """A copy of the conventions of profile ``name``."""
    if name not in PROFILES:
        raise InputError(f"unknown profile {name!r}; valid profiles: {', '.join(sorted(PROFILES))}")
    return dict(PROFILES[name])
