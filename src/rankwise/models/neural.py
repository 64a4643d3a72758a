"""Neural rankers: a per-document MLP scorer and a listwise self-attention scorer (PyTorch)."""
from __future__ import annotations

import numpy as np

from rankwise._validation import Interval, Options
from rankwise.errors import InputError
from rankwise.models.base import warn_unscaled
from rankwise.models._torch import TORCH_CONSTRAINTS, Standardizer, _TorchRanker
from rankwise.train.checkpoint import arrays_to_module_state, module_state_to_arrays
from rankwise.train.history import History
from rankwise.train.loop import score_padded

_ARCHS = ("mlp", "attention")


def _build_scorer(n_inputs: int, hidden, architecture: str, dropout: float, n_heads: int, n_layers: int):
    import torch
    from torch import nn

    class MLPScorer(nn.Module):
        """f(x_i) = MLP(x_i): each document scored on its own features."""

        def __init__(self):
            super().__init__()
            layers, d = [], n_inputs
            for h in hidden:
                layers += [nn.Linear(d, h), nn.ReLU(), nn.Dropout(dropout)]
                d = h
            layers.append(nn.Linear(d, 1))
            self.net = nn.Sequential(*layers)

        def forward(self, x, where):
            return self.net(x).squeeze(-1)

    class AttentionScorer(nn.Module):
        """f(x_1..x_r)_i = w^T Enc(MLP(x_1), ..., MLP(x_r))_i: self-attention over the query's documents."""

        def __init__(self):
            super().__init__()
            d = int(hidden[0])
            self.embed = nn.Sequential(nn.Linear(n_inputs, d), nn.ReLU(), nn.Dropout(dropout))
            layer = nn.TransformerEncoderLayer(d_model=d, nhead=n_heads, dim_feedforward=2 * d, dropout=dropout,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=n_layers, enable_nested_tensor=False)
            head, prev = [], d
            for h in hidden[1:]:
                head += [nn.Linear(prev, h), nn.ReLU(), nn.Dropout(dropout)]
                prev = h
            head.append(nn.Linear(prev, 1))
            self.head = nn.Sequential(*head)

        def forward(self, x, where):
            h = self.embed(x)
            h = self.encoder(h, src_key_padding_mask=~where)
            # padded positions can hold NaN-free garbage; the loss and the scatter ignore them
            return torch.where(where, self.head(h).squeeze(-1), torch.zeros((), dtype=h.dtype))

    return MLPScorer() if architecture == "mlp" else AttentionScorer()


class NeuralRanker(_TorchRanker):
    """Neural ranker trained on any rankwise loss by minibatch Adam over whole queries.

    .. math::

        \\text{mlp:}\\ s_i = f_\\theta(x_i), \\qquad
        \\text{attention:}\\ s_i = w^\\top \\mathrm{Enc}_\\theta\\bigl(g(x_1), \\dots, g(x_r)\\bigr)_i

    The MLP scores each document alone; the attention scorer lets each document attend to the
    other documents of its query (a Transformer encoder without positional encoding, so the
    scores are permutation equivariant). Minibatches hold ``batch_queries`` whole queries of
    similar length (padding masked by ``where``).

    Parameters
    ----------
    loss : str or callable
        A name in ``rankwise.losses.REGISTRY`` or a function with the rankwise loss signature.
    loss_params : dict, optional
    hidden : tuple of int
        Hidden layer widths (attention: the first is the model width, the rest the head).
    architecture : {"mlp", "attention"}
    n_heads, n_layers : int
        Attention heads and encoder layers (attention only).
    max_iter : int
        Epochs over the queries.
    batch_queries : int
        Queries per minibatch.
    learning_rate : float
        AdamW step size.
    alpha : float
        ℓ2 strength, applied as AdamW's decoupled weight decay (Loshchilov & Hutter 2019).
    dropout : float
        Dropout probability of the hidden layers.

    (``epochs``, ``lr`` and ``weight_decay`` are the former names of ``max_iter``,
    ``learning_rate`` and ``alpha``; they still work, with a DeprecationWarning.)
    standardize : bool
        Centre and scale the features on the training rows.
    eval_metric, early_stopping_rounds, random_state, verbose, n_jobs
        As in :class:`~rankwise.models.LinearRanker`.

    Notes
    -----
    ``predict(X)`` of the MLP needs no ``qid``. The attention scorer scores a document in the
    context of the other documents of its query, so it needs ``predict(X, qid=qid)`` and refuses
    ``predict(X)`` with an :class:`~rankwise.errors.InputError` saying so. This is inherent to
    listwise scoring, not a missing feature; ``score(X, y, qid=qid)``, ``GridSearchCV`` (which
    routes ``qid``) and save/load work as for every model. Sparse ``X`` is accepted (densified
    per minibatch).

    References
    ----------
    P. Pobrotyn, T. Bartczak, M. Synowiec, R. Białobrzeski and J. Bojar. Context-aware learning to
    rank with self-attention. SIGIR eCom workshop, 2020.
    Z. Cao, T. Qin, T.-Y. Liu, M.-F. Tsai and H. Li. Learning to rank: from pairwise approach to
    listwise approach. ICML 2007.
    """

    _resume_free_params = ("max_iter", "verbose", "n_jobs")
    _deprecated_params = {"epochs": "max_iter", "lr": "learning_rate", "weight_decay": "alpha"}
    _parameter_constraints = {
        **TORCH_CONSTRAINTS,
        "architecture": [Options(*_ARCHS)],
        "n_heads": [Interval("int", 1)],
        "n_layers": [Interval("int", 1)],
        "max_iter": [Interval("int", 1)],
        "batch_queries": [Interval("int", 1)],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "alpha": [Interval("real", 0)],
        "dropout": [Interval("real", 0, 1, closed="left")],
    }

    def __init__(self, loss="listnet", *, loss_params=None, hidden=(64, 32), architecture="mlp", n_heads=2,
                 n_layers=1, max_iter=30, batch_queries=32, learning_rate=1e-3, alpha=0.0, dropout=0.1,
                 standardize=True, eval_metric="ndcg@10", early_stopping_rounds=None, random_state=None,
                 verbose="auto", n_jobs=None, **deprecated):
        self.loss = loss
        self.loss_params = loss_params
        self.hidden = hidden
        self.architecture = architecture
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.max_iter = max_iter
        self.batch_queries = batch_queries
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.dropout = dropout
        self.standardize = standardize
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self._init_deprecated(deprecated)

    @property
    def _listwise_predict(self):
        return self.architecture == "attention"

    def _check_params(self):
        self._validate_params()
        try:
            hidden = tuple(int(h) for h in self.hidden)
        except (TypeError, ValueError):
            raise InputError(f"hidden must be a tuple of positive layer widths; got {self.hidden!r}") from None
        if any(h < 1 for h in hidden) or (self.architecture == "attention" and not hidden):
            raise InputError(f"hidden must hold positive widths (attention needs at least one); got {self.hidden!r}")
        if self.architecture == "attention" and hidden[0] % int(self.n_heads):
            raise InputError(f"hidden[0]={hidden[0]} must be divisible by n_heads={self.n_heads}")
        self._hidden = hidden
        return hidden

    def _build_module(self, n_inputs):
        return _build_scorer(n_inputs, self._hidden, self.architecture, float(self.dropout), int(self.n_heads),
                             int(self.n_layers))

    def _module_from_state(self):
        return self.module_

    def _param_groups(self, module):
        """What the optimiser trains: ``module``'s parameters at ``learning_rate`` and ``alpha``, or a list of
        torch parameter groups (a subclass whose module holds parts with their own step size overrides this)."""
        return module.parameters()

    def _sync_from_module(self):
        pass

    def _transform(self, X):
        return Standardizer(self.scaler_mean_, self.scaler_scale_).transform(X)

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None, checkpoint=None, resume=None):
        """Fit on rows ``X`` with labels ``y`` grouped by ``qid`` (or a RankingDataset as ``X``).

        ``eval_set=(X_val, y_val, qid_val)`` is scored with ``eval_metric`` after each epoch;
        ``checkpoint=path`` writes the training state after every epoch and ``resume=path``
        continues from it (the result equals an uninterrupted run with the same ``random_state``).
        ``group`` (query sizes) may replace ``qid``.
        """
        self._check_params()
        train, val, metric = self._setup_common(X, y, qid, sample_weight, eval_set, group)
        with self._torch_threads():
            return self._fit_validated(train, val, metric, checkpoint, resume)

    def _fit_validated(self, train, val, metric, checkpoint, resume, hooks=None):
        import torch

        if resume is None:
            sc = Standardizer.fit(train.X, bool(self.standardize)) if hooks is None else \
                Standardizer(*hooks.scaler_stats(train.X, bool(self.standardize)))
            if not self.standardize:
                warn_unscaled(train.X, type(self).__name__)
            self.scaler_mean_, self.scaler_scale_ = sc.mean, sc.scale
        else:  # the scaler comes from the checkpoint
            from rankwise.models import persistence

            state, arrays = persistence.load_checkpoint(resume, self)[:2]
            self._check_resume_features(state, train.X.shape[1], resume)
            persistence.restore_state(self, state, arrays, resume)
        self.n_features_in_ = train.X.shape[1]
        Z = self._transform(train.X)
        val_in = None if val is None else (self._transform(val.X), val.y, val.offsets, None)
        wd = float(self.alpha)
        lr = float(self.learning_rate)
        factory = lambda m: torch.optim.AdamW(self._param_groups(m), lr=lr, weight_decay=wd)  # noqa: E731
        threads = torch.get_num_threads()
        try:
            self._fit_minibatch((Z, train.y, train.offsets, train.sample_weight), val_in, metric,
                                optimizer_factory=factory, penalty_factory=lambda m: None, epochs=int(self.max_iter),
                                batch_queries=int(self.batch_queries), checkpoint=checkpoint, resume=resume,
                                desc=f"{type(self).__name__}[{self.architecture}]", hooks=hooks)
        finally:
            torch.set_num_threads(threads)
        if hooks is None:
            self._check_trained(train, f"after {len(self.history_)} epoch(s)", moved=self.__dict__.pop("_moved", None))
        return self

    def _predict_rows(self, Xv):
        import torch

        Z = self._transform(Xv)
        with torch.no_grad(), self._torch_threads():
            out = np.empty(Z.shape[0])
            for start in range(0, Z.shape[0], 65536):
                zb = Z[start:start + 65536]
                xb = torch.from_numpy(np.ascontiguousarray(zb.toarray() if hasattr(zb, "toarray") else zb))
                out[start:start + 65536] = self.module_(xb, None).double().numpy()
        return out

    def predict(self, X, *, qid=None):
        """One score per row (``qid`` is required by the attention architecture only)."""
        Xv = self._check_predict_features(X)
        g = self._check_predict_qid(qid, Xv.shape[0])
        if self.architecture == "mlp":
            return self._predict_rows(Xv)
        if g is None:
            raise InputError("predict(X) got no qid, but NeuralRanker(architecture='attention') scores each "
                             "document in the context of the other documents of its query: call "
                             "predict(X, qid=qid) with one query id per row of X")
        Z = self._transform(Xv)
        Zg = Z if g.order is None else Z[g.order]
        s = score_padded(self.module_, Zg, g.offsets)
        if g.order is None:
            return s
        out = np.empty_like(s)
        out[g.order] = s
        return out

    def _predict_input(self, data):
        self._check_predict_features_only(data.X)
        if self.architecture == "mlp":
            return self._predict_rows(data.X)
        return score_padded(self.module_, self._transform(data.X), data.offsets)

    def _get_state(self):
        state = {"n_features_in_": int(self.n_features_in_),
                 "history": getattr(self, "history_", History()).to_dict()}
        for k in ("best_iteration_", "best_score_", "fit_time_"):
            if hasattr(self, k):
                state[k] = getattr(self, k)
        arrays = {"scaler_mean_": self.scaler_mean_, "scaler_scale_": self.scaler_scale_}
        arrays.update(module_state_to_arrays(self.module_))
        return state, arrays

    def _set_state(self, state, arrays):
        self._check_params()
        self.n_features_in_ = int(state["n_features_in_"])
        self.history_ = History(state.get("history", {}))
        for k in ("best_iteration_", "best_score_", "fit_time_"):
            if k in state:
                setattr(self, k, state[k])
        self.scaler_mean_ = np.asarray(arrays["scaler_mean_"])
        self.scaler_scale_ = np.asarray(arrays["scaler_scale_"])
        module = self._build_module(self.n_features_in_)
        module.load_state_dict(arrays_to_module_state(arrays))
        module.eval()
        self.module_ = module
