"""Learning to rank from click logs.

The click log itself is data (:class:`rankwise.data.ClickLog`, :func:`rankwise.data.read_click_log`,
also reachable here); the click models of
Chuklin, Markov & de Rijke (*Click Models for Web Search*, 2015) fitted by EM/MLE with compiled
kernels and evaluated by held-out log-likelihood and perplexity; examination propensities from
randomised interventions and without them (regression-EM, intervention harvesting); inverse-
propensity-scored training of any rankwise model; Unbiased LambdaMART and the Dual Learning
Algorithm; and the simulation protocol of unbiased learning-to-rank research.

Names are resolved lazily (torch, lightgbm are imported only where used).
"""
from __future__ import annotations

import importlib

# the click log is data: these names live in rankwise.data.clicklog and are reachable here too
_DATA = ("ClickLog", "ClickCounts", "read_click_log")


_LAZY = {
        "ClickModel": "models", "GCTR": "models", "RCTR": "models", "DCTR": "models", "PBM": "models",
    "CM": "models", "UBM": "models", "DCM": "models", "CCM": "models", "DBN": "models", "SDBN": "models",
    "CLICK_MODELS": "models", "simulate_clicks": "models",
    "propensities_randtop": "propensity", "propensities_randpair": "propensity", "regression_em": "propensity",
    "regression_em_log": "propensity", "harvest_propensities": "propensity", "pbm_propensities": "propensity",
    "rank_table": "propensity", "RegressionEMResult": "propensity", "HarvestResult": "propensity",
    "PropensityEstimator": "propensity", "RandTop": "propensity", "RandPair": "propensity",
    "RegressionEM": "propensity", "InterventionHarvesting": "propensity", "PROPENSITY_ESTIMATORS": "propensity",
    "identifiability": "propensity", "propensity_given_relevance": "diagnostics",
    "ips_weights": "ips", "feature_rows": "ips", "click_dataset": "ips", "fit_debiased": "ips",
    "select_clip": "ips", "ClipSelection": "ips", "split_log_by_query": "ips", "ips_dcg": "ips",
    "direct_relevance": "ips",
    "UnbiasedLambdaMART": "joint", "DLA": "dla", "pages": "joint",
    "session_dataset": "sessions",
    "simulate_clicks_protocol": "simulation", "ClickSimulation": "simulation", "click_noise": "simulation",
    "read_bias_curve": "simulation", "read_click_matrix": "simulation",
    "PlackettLucePolicy": "policy", "PolicyMixture": "policy", "PolicyPropensity": "policy",
    "counterfactual_estimates": "evaluation", "CounterfactualEstimate": "evaluation", "expected_metric": "evaluation",
    "interleave": "interleaving", "Interleaving": "interleaving", "InterleavingResult": "interleaving",
    "team_draft": "interleaving", "probabilistic_interleave": "interleaving", "simulated_click_model": "interleaving",
}

__all__ = sorted([*_LAZY, *_DATA])


def __getattr__(name):
    if name in _DATA:
        from rankwise.data import clicklog

        return getattr(clicklog, name)
    if name in _LAZY:
        return getattr(importlib.import_module(f"rankwise.clicks.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rankwise.clicks' has no attribute {name!r}")


def __dir__():
    return __all__
