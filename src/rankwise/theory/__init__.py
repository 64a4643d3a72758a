"""Theory you can run: GPPMs, inner risk, calibration, regret bounds, Lipschitz constants,
generalisation bounds and the list-length experiment.

Every function names the theorem it implements and its assumptions. Sources:
Calauzènes, Usunier & Gallinari, "Calibration and regret bounds for order-preserving surrogate
losses in learning to rank", Machine Learning 93, 2013; Chaudhuri & Tewari, "Generalization
error bounds for learning to rank: does the length of document lists matter?", ICML 2015.

Names are resolved lazily (torch is imported only by the inner risk and Lipschitz code).
"""
from __future__ import annotations

import importlib

_LAZY = {
    # gppm
    "GPPM": "gppm", "RankMeasure": "gppm", "get_measure": "gppm", "dcg": "gppm", "ndcg": "gppm",
    "precision": "gppm", "recall": "gppm", "auc": "gppm", "spearman": "gppm", "err": "gppm",
    "average_precision": "gppm",
    # inner
    "Distribution": "inner", "label_space": "inner", "expected_utility": "inner",
    "inner_performance": "inner", "best_performance": "inner", "make_inner_risk": "inner",
    "minimize_inner_risk": "inner", "minimize_inner_risk_in_cone": "inner",
    # calibration
    "check_calibration": "calibration", "check_order_preserving": "calibration",
    "CalibrationReport": "calibration", "Counterexample": "calibration",
    # regret
    "c_phi": "regret", "regret_bound": "regret", "regret_constant": "regret", "RegretBound": "regret",
    "bregman_modulus": "regret",
    # lipschitz
    "lipschitz": "lipschitz", "closed_form_lipschitz": "lipschitz", "LipschitzEstimate": "lipschitz",
    "declared_constant": "lipschitz",
    # generalization
    "generalization_bound": "generalization", "GeneralizationTerms": "generalization",
    "row_norm_bound": "generalization", "dudley_complexity": "generalization",
    # experiment
    "run_list_length_experiment": "list_length", "ListLengthResult": "list_length",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'rankwise.theory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rankwise.theory.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


# ``lipschitz`` is both a submodule and a function: bind the function eagerly (the module is
# light: numpy only), so importing the submodule later cannot shadow it.
from rankwise.theory.lipschitz import lipschitz  # noqa: E402
