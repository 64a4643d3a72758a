"""The structured hinge ranker: a linear model trained by SGD on a structured hinge surrogate.

The surrogates and their exact loss-augmented inference live in
:mod:`rankwise.losses.structured` (:func:`~rankwise.losses.structured.ndcg_hinge_argmax`,
:func:`~rankwise.losses.structured.multivariate_hinge_argmax`,
:func:`~rankwise.losses.structured.structured_hinge`); their names are also importable from here.

References
----------
S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning: From Theory to
Algorithms*, §17.4–17.5 and §14.5. Cambridge University Press, 2014.
"""
from __future__ import annotations

import numpy as np

from rankwise._validation import Interval, Options
from rankwise.errors import InputError
from rankwise.models.base import BaseRanker, warn_unscaled

__all__ = ["StructuredHingeRanker"]

# The surrogates moved to rankwise.losses.structured; these names stay importable from here
# (imported on first use: rankwise.losses imports torch, which `import rankwise.models` does not).
_MOVED = ("HingeArgmax", "ndcg_delta", "ndcg_hinge_argmax", "multivariate_delta", "multivariate_reference",
          "multivariate_hinge_argmax", "kendall_hinge_value_grad", "structured_hinge", "MEASURES", "CONSTRAINTS")


def __getattr__(name):
    if name in _MOVED:
        from rankwise.losses import structured

        return getattr(structured, name)
    raise AttributeError(f"module 'rankwise.models.structured' has no attribute {name!r}")


class StructuredHingeRanker(BaseRanker):
    """Linear ranker ``s_i = ⟨w, x_i⟩`` trained on a structured hinge by stochastic subgradient descent.

    .. math::

        \\min_w \\; \\frac{\\alpha}{2} \\lVert w \\rVert^2 + \\frac{1}{m} \\sum_{q=1}^m
        \\max_{v \\in V} \\Big[ \\Delta(v, y_q) + \\sum_i (v_i - \\rho_{q,i}) \\langle w, x_{q,i} \\rangle \\Big]

    Each step takes one query, finds ``v*`` exactly (:func:`~rankwise.losses.structured.ndcg_hinge_argmax`,
    :func:`~rankwise.losses.structured.multivariate_hinge_argmax`; the Kendall hinge needs none) and moves along
    ``−(αw + X_q^T (v* − ρ))`` with step ``learning_rate/√t``; the returned ``w`` is the
    average of the iterates (online-to-batch conversion). By default the features are
    standardised on the training rows first (``x ↦ (x − μ)/σ``) and the learned ``w`` is mapped
    back, so ``coef_`` and ``intercept_`` apply to raw features.

    Parameters
    ----------
    measure : str
        ``"ndcg@10"``, ``"ndcg"``, ``"precision@5"``, ``"recall@5"``, ``"f1"``, ``"accuracy"``,
        ``"kendall"`` (any cutoff).
    alpha : float
        ℓ2 regularisation strength :math:`\\alpha` (formerly ``C = 1/alpha``).
    solver : {"sgd"}
    max_iter : int
        Passes over the queries (shuffled each epoch; formerly ``n_epochs``).
    learning_rate : float
        Base step size η₀.
    gain : {"exp2", "linear"}
        Gain of the NDCG loss.
    constraint : {"eq", "ge", "le", "any"} or None
        The set ``V`` of the multivariate hinges (UML eq. 17.13): ``"ge"`` (``V_{≥k}``, at least
        ``k`` predicted relevant), ``"le"`` (``V_{≤k}``), ``"eq"`` (exactly the top ``k``) or
        ``"any"`` (all of {±1}^r, θ = 0). None (default) follows UML §17.5: ``"ge"`` for
        precision@k, ``"le"`` for recall@k, ``"any"`` for F1 and accuracy. Must be None for the
        NDCG and Kendall hinges.
    random_state : int, Generator or None
    standardize : bool
        Centre and scale the features on the training rows before the subgradient steps (the
        step size and ``alpha`` then mean the same on every data set). With
        ``standardize=False`` and feature scales more than 1e6 apart, ``fit`` warns.

    (``C`` and ``n_epochs`` are the former names of ``1/alpha`` and ``max_iter``; they still work,
    with a DeprecationWarning.)

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    n_features_in_ : int
    n_iter_ : int
    train_loss_ : list of float
        Mean surrogate over the queries at the end of each epoch (using the averaged ``w``).

    Notes
    -----
    Queries whose loss is constant (no relevant item for NDCG/precision/recall/F1, or a single
    item) contribute no gradient and are skipped. Every multivariate hinge except
    ``constraint="eq"`` uses θ = 0 (an item is predicted relevant when its score is > 0, within
    the limits ``V`` sets), so it depends on the score's offset; the model then fits an intercept
    ``intercept_`` (which does not change rankings).

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4–17.5 and
    §14.5 (SGD for convex Lipschitz losses). Cambridge University Press, 2014.
    """

    _deprecated_params = {"C": ("alpha", lambda c: 1.0 / c if isinstance(c, (int, float)) and c > 0 else c),
                          "n_epochs": "max_iter"}
    _parameter_constraints = {
        "alpha": [Interval("real", 0, closed="neither")],
        "solver": [Options("sgd")],
        "max_iter": [Interval("int", 1)],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "gain": [Options("exp2", "linear")],
        "random_state": ["random_state"],
        "standardize": ["boolean"],
    }

    def __init__(self, measure="ndcg@10", *, alpha=1.0, solver="sgd", max_iter=20, learning_rate=0.1,
                 gain="exp2", constraint=None, random_state=None, standardize=True, **deprecated):
        self.measure = measure
        self.alpha = alpha
        self.solver = solver
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.gain = gain
        self.constraint = constraint
        self.random_state = random_state
        self.standardize = standardize
        self._init_deprecated(deprecated)

    def _check_params(self):
        from rankwise.losses.structured import resolve_constraint, resolve_measure

        spec = resolve_measure(self.measure)
        self._validate_params()
        return spec, resolve_constraint(spec, self.constraint)

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None):
        """Fit ``w`` on rows ``X`` with labels ``y`` grouped by ``qid``; returns ``self``.

        ``sample_weight`` (one per row): a query's subgradient is scaled by the mean weight of its
        rows. With ``eval_set`` the validation NDCG@10 of the averaged iterate is recorded per
        epoch in ``history_`` (next to the training surrogate, ``history_["loss"]``). ``group``
        (query sizes) may replace ``qid``.
        """
        from rankwise.losses.structured import structured_hinge

        spec, constraint = self._check_params()
        data, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set, group=group)
        Xd = data.X.toarray() if hasattr(data.X, "toarray") else data.X
        Xd = np.asarray(Xd, dtype=np.float64)
        use_bias = spec.family == "multivariate" and constraint != "eq"
        mean, scale = np.zeros(Xd.shape[1]), np.ones(Xd.shape[1])
        if self.standardize:
            # Without an intercept the hinge depends on score differences only (Σ(v_i − ρ_i) = 0),
            # so centring would change nothing but the offset: scale only, keep intercept_ = 0.
            if use_bias:
                mean = Xd.mean(axis=0)
            scale = np.sqrt(((Xd - mean) ** 2).mean(axis=0))
            scale = np.where(scale > 1e-12, scale, 1.0)
            Xd = (Xd - mean) / scale
        else:
            warn_unscaled(Xd, type(self).__name__)
        if use_bias:
            Xd = np.hstack([Xd, np.ones((Xd.shape[0], 1))])
        if spec.family == "ndcg" and self.gain == "exp2" and np.any(data.y < 0):
            raise InputError("y must be non-negative for the NDCG hinge with gain='exp2'")
        off = data.offsets
        useful = []
        for q in range(data.n_queries):
            yq = data.y[off[q]:off[q + 1]]
            if len(yq) < 2 and spec.family != "multivariate":
                continue
            if spec.family in ("ndcg", "multivariate") and not np.any(yq > 0):
                continue
            useful.append(q)
        if not useful:
            raise InputError("no query can train the model: every query has fewer than 2 items or no "
                             "relevant item (label > 0)")
        qw = np.ones(data.n_queries)
        if data.sample_weight is not None:
            qw = np.add.reduceat(data.sample_weight, off[:-1]) / np.maximum(np.diff(off), 1)
        rng = np.random.default_rng(self.random_state)
        n_feat = Xd.shape[1]
        self.history_ = {"epoch": [], "loss": []} if val is None else {"epoch": [], "loss": [], "ndcg@10": []}
        w = np.zeros(n_feat)
        w_avg = np.zeros(n_feat)
        lam = float(self.alpha)
        t = 0
        self.train_loss_ = []

        def raw(w):  # coefficients and intercept on the raw features: <w, (x - mean)/scale> + b
            coef, b = (w[:-1], float(w[-1])) if use_bias else (w, 0.0)
            coef = coef / scale
            return coef, b - float(coef @ mean)

        for _ in range(int(self.max_iter)):
            for q in rng.permutation(useful):
                t += 1
                Xq = Xd[off[q]:off[q + 1]]
                _, gs = structured_hinge(Xq @ w, data.y[off[q]:off[q + 1]], measure=spec, gain=self.gain,
                                         constraint=constraint)
                grad = lam * w + qw[q] * (Xq.T @ gs)
                w = w - (self.learning_rate / np.sqrt(t)) * grad
                w_avg += (w - w_avg) / t
            self.train_loss_.append(float(np.mean([
                structured_hinge(Xd[off[q]:off[q + 1]] @ w_avg, data.y[off[q]:off[q + 1]],
                                 measure=spec, gain=self.gain, constraint=constraint)[0] for q in useful])))
            self.history_["epoch"].append(len(self.train_loss_))
            self.history_["loss"].append(self.train_loss_[-1])
            if val is not None:
                self.history_["ndcg@10"].append(self._validation_ndcg(val, *raw(w_avg)))
        self.coef_, self.intercept_ = raw(w_avg)
        self.n_iter_ = t
        self.n_features_in_ = data.X.shape[1]
        self._check_trained(data, f"after {t} subgradient step(s) from w = 0")
        return self

    @staticmethod
    def _validation_ndcg(val, coef, b) -> float:
        from rankwise.metrics import ndcg

        scores = np.asarray(val.X @ coef, dtype=np.float64).ravel() + b
        qid = np.repeat(np.arange(val.n_queries), np.diff(val.offsets))
        return float(ndcg(scores, val.y, qid=qid, k=10))

    def _get_state(self):
        return ({"n_features_in_": int(self.n_features_in_), "n_iter_": int(self.n_iter_),
                 "intercept_": float(self.intercept_), "train_loss_": [float(v) for v in self.train_loss_],
                 "history_": {k: [float(v) for v in vals] for k, vals in getattr(self, "history_", {}).items()}},
                {"coef_": np.asarray(self.coef_, dtype=np.float64)})

    def _set_state(self, state, arrays):
        self.coef_ = np.asarray(arrays["coef_"], dtype=np.float64)
        self.intercept_ = float(state["intercept_"])
        self.n_iter_ = int(state["n_iter_"])
        self.train_loss_ = list(state["train_loss_"])
        self.history_ = {k: list(v) for k, v in state.get("history_", {}).items()}
        self.n_features_in_ = int(state["n_features_in_"])

    def _predict_rows(self, Xv):
        """Scores ``⟨w, x_i⟩ + intercept`` (higher ranks first)."""
        return np.asarray(Xv @ self.coef_, dtype=np.float64).ravel() + self.intercept_
