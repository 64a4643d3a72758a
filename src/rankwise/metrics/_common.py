"""The call path every public metric shares: validate, prepare, compute per query, reduce."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics._prepare import REDUCTIONS, check_choice, check_empty, check_k, prepare, reduce


def run_metric(values_fn, scores, labels, *, qid, where, ties, doc_ids, empty, reduction, **options):
    """``values_fn(prepared, **options) -> (values, empty_mask)``, then the empty rule and reduction."""
    check_choice(reduction, "reduction", REDUCTIONS)
    empty = check_empty(empty)
    if "k" in options:
        options["k"] = check_k(options["k"])
    prep = prepare(scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids)
    values, empty_mask = values_fn(prep, **options)
    return reduce(values, empty_mask, empty=empty, reduction=reduction)


def check_threshold(threshold) -> float:
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or not np.isfinite(threshold):
        raise InputError(f"threshold must be a finite number (labels >= threshold are relevant); got {threshold!r}")
    return float(threshold)
