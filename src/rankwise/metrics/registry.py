"""One registry resolving metric strings (``"ndcg@10"``, ``"map"``, ``"P@5"``) to metric objects.

Other modules (early stopping, the CLI, theory) call :func:`get_metric`; unknown names raise
an :class:`~rankwise.errors.InputError` listing the valid ones.
"""
from __future__ import annotations

from dataclasses import dataclass

from rankwise.errors import InputError
from rankwise.metrics import binary, cascade, correlation, graded
from rankwise.metrics._common import run_metric
from rankwise.metrics._prepare import check_k

COMMON = ("ties", "empty", "doc_ids")


@dataclass(frozen=True)
class _Entry:
    name: str
    values: object  # values_fn(prepared, **options) -> (values, empty_mask)
    takes_k: bool
    options: tuple  # metric-specific conventions it accepts
    higher_is_better: bool = True
    #: False: defined on the ranking alone, so unretrieved rows (``evaluate(retrieved=...)``) are
    #: dropped before it is computed; True: they count in its ideal / number of relevant items.
    retrieval_aware: bool = True


_ENTRIES = {
    e.name: e for e in (
        _Entry("ndcg", graded.ndcg_values, True, ("gain", "discount", "short_list")),
        _Entry("dcg", graded.dcg_values, True, ("gain", "discount")),
        _Entry("err", cascade.err_values, True, ("max_grade",)),
        _Entry("map", binary.ap_values, True, ("threshold", "ap_denominator")),
        _Entry("precision", binary.precision_values, True, ("threshold",)),
        _Entry("recall", binary.recall_values, True, ("threshold",)),
        _Entry("mrr", cascade.rr_values, True, ("threshold",)),
        _Entry("auc", binary.auc_values, False, ("threshold",), retrieval_aware=False),
        _Entry("kendall_tau", correlation.kendall_values, False, (), retrieval_aware=False),
        _Entry("spearman", correlation.spearman_values, False, (), retrieval_aware=False),
        _Entry("pairwise_accuracy", correlation.pairwise_accuracy_values, False, (), retrieval_aware=False),
        _Entry("pairwise_cost", correlation.pairwise_cost_values, False, ("omega",), higher_is_better=False,
               retrieval_aware=False),
    )
}

_ALIASES = {
    "ap": "map", "average_precision": "map", "p": "precision", "prec": "precision",
    "r": "recall", "rr": "mrr", "reciprocal_rank": "mrr", "recip_rank": "mrr",
    "kendall": "kendall_tau", "tau": "kendall_tau", "spearman_rho": "spearman", "rho": "spearman",
    "pairwise_acc": "pairwise_accuracy", "kemeny": "pairwise_cost",
}

#: every convention some metric accepts (evaluate() passes each metric the ones it takes)
CONVENTIONS = tuple(sorted({o for e in _ENTRIES.values() for o in e.options} | set(COMMON)))


def available_metrics() -> list[str]:
    """Canonical metric names (a cutoff is written ``name@k`` where the metric takes one)."""
    return sorted(_ENTRIES)


@dataclass(frozen=True)
class Metric:
    """A resolved metric: ``name``, cutoff ``k`` (None = whole list) and its conventions."""

    name: str
    k: int | None
    entry: _Entry

    @property
    def spec(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def higher_is_better(self) -> bool:
        return self.entry.higher_is_better

    def _options(self, conventions: dict, *, strict: bool) -> dict:
        opts = {}
        for key, val in conventions.items():
            if key in self.entry.options:
                opts[key] = val
            elif strict and key not in COMMON:
                raise InputError(f"{self.spec} takes no option {key!r}; it takes "
                                 f"{', '.join(self.entry.options + COMMON) or 'none'}")
        if self.entry.takes_k:
            opts["k"] = self.k
        return opts

    def values(self, prepared, conventions: dict | None = None, *, strict: bool = False):
        """Per-query ``(values, empty_mask)`` on already prepared input."""
        opts = self._options(conventions or {}, strict=strict)
        if "k" in opts:
            opts["k"] = check_k(opts["k"])
        if not self.entry.retrieval_aware:
            prepared = prepared.ranked_only()
        return self.entry.values(prepared, **opts)

    def __call__(self, scores, labels, *, qid=None, where=None, ties="average", empty=0.0,
                 reduction="mean", doc_ids=None, **conventions):
        opts = self._options(conventions, strict=True)
        return run_metric(self.entry.values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                          empty=empty, reduction=reduction, **opts)


def get_metric(spec) -> Metric:
    """Resolve ``"ndcg@10"``, ``"map"``, ``"P@5"``, ``"mrr@10"``... (case-insensitive).

    Raises
    ------
    InputError
        For an unknown name (the message lists the valid ones), a cutoff on a metric that takes
        none, or a cutoff that is not an integer >= 1.
    """
    if isinstance(spec, Metric):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"a metric must be given as a string such as 'ndcg@10'; got {spec!r}")
    text = spec.strip().lower()
    name, sep, cut = text.partition("@")
    name = name.replace("-", "_")
    name = _ALIASES.get(name, name)
    entry = _ENTRIES.get(name)
    if entry is None:
        raise InputError(f"unknown metric {spec!r}; valid names: {', '.join(available_metrics())} "
                         f"(aliases: {', '.join(sorted(_ALIASES))}); a cutoff is written like 'ndcg@10'")
    k = None
    if sep:
        if not entry.takes_k:
            raise InputError(f"metric {name!r} takes no cutoff; got {spec!r}")
        if not cut.isdigit() or int(cut) < 1:
            raise InputError(f"the cutoff in {spec!r} must be an integer >= 1, as in '{name}@10'")
        k = int(cut)
    return Metric(name, k, entry)
