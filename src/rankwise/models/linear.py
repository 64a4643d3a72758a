"""Linear rankers: the permutation-invariant linear scoring class, fitted by ERM, OGD or Adam."""
from __future__ import annotations

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from sklearn.exceptions import ConvergenceWarning

from rankwise._validation import Interval, Options, torch_single_thread, warn_user
from rankwise.errors import InputError, TrainingDivergedError
from rankwise.models.base import warn_unscaled
from rankwise.models._torch import TORCH_CONSTRAINTS, Standardizer, _TorchRanker, fit_seed
from rankwise.train.batching import gather_padded, query_batches
from rankwise.train.early_stopping import EarlyStopping
from rankwise.train.history import History

from rankwise.train.optim import make_averaged_ogd, minimize_erm
from rankwise.train.progress import Progress

_SOLVERS = ("auto", "lbfgs", "ogd", "adam")
_FEATURE_MAPS = (None, "poly2", "rff")


def _scipy_version() -> str:
    import scipy

    return scipy.__version__


def _linear_module(n_inputs: int, fit_intercept: bool):
    import torch

    class LinearScorer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(n_inputs, 1, bias=fit_intercept)
            torch.nn.init.zeros_(self.linear.weight)
            if fit_intercept:
                torch.nn.init.zeros_(self.linear.bias)

        def forward(self, x, where):
            return self.linear(x).squeeze(-1)

    return LinearScorer()


class LinearRanker(_TorchRanker):
    """Linear ranker trained on any rankwise loss.

    Scores a list of documents with the permutation-invariant linear class

    .. math::

        h_w(x_1, \\dots, x_r) = (\\langle w, \\phi(x_1) \\rangle, \\dots, \\langle w, \\phi(x_r) \\rangle)

    where :math:`\\phi` is the identity or a feature map, and fits :math:`w` by

    - ``solver="lbfgs"``: regularised ERM, :math:`\\min_w \\frac1m \\sum_q \\ell(h_w(X_q), y_q)
      + \\frac{\\alpha}{2}\\|w\\|_2^2 + \\lambda_1 \\|w\\|_1` by L-BFGS (the ℓ1 term exactly, by
      splitting :math:`w = u - v`, :math:`u, v \\ge 0`);
    - ``solver="ogd"``: projected online gradient descent over queries, step
      :math:`\\eta/\\sqrt t`, returning the average of the iterates (online-to-batch conversion);
    - ``solver="adam"``: minibatch Adam over queries;
    - ``solver="auto"`` (default): ``"lbfgs"`` where the loss's value is an objective whose
      derivative is its gradient (``LossSpec.line_search_safe``: listnet, ranknet, the pointwise
      and Bregman templates, ...), ``"adam"`` for the losses whose weights come from the current
      ranking and are held constant in the step (``lambdarank``, ``lambdaloss``, ``delta_ndcg``
      pair weights, a ``truncation_level``, ``norm=True``). From L-BFGS's all-zero start every score ties, and
      such a loss's value there differs from its value at scores 1e-8 apart (lambdarank: 3.18
      against 7.67 on an MSLR excerpt, issue 28): the line search sees a cliff and L-BFGS stops where it
      began, at ``w = 0``. Adam uses the gradient as the step direction, which is what these losses
      define (as boosting does). The choice is kept in ``solver_``; a callable loss gets ``"lbfgs"``.

    Parameters
    ----------
    loss : str or callable
        A name in ``rankwise.losses.REGISTRY`` or a function with the rankwise loss signature.
    loss_params : dict, optional
        Hyperparameters passed to the loss (e.g. ``{"sigma": 1.0}``).
    alpha : float
        ℓ2 penalty :math:`\\alpha` (the intercept is not penalised).
    l1 : float
        ℓ1 penalty :math:`\\lambda_1` (exact for lbfgs; a subgradient term for ogd/adam).
    solver : {"auto", "lbfgs", "ogd", "adam"}
        ``"lbfgs"`` with a loss that is not line-search safe warns (and may stop at its start,
        which :meth:`fit` reports with a :class:`~rankwise.errors.UntrainedModelWarning`).
    feature_map : {None, "poly2", "rff"}
        ``"poly2"``: all degree-≤2 monomials; ``"rff"``: random Fourier features
        :math:`\\sqrt{2/D}\\cos(Wx + b)` of the RBF kernel :math:`e^{-\\gamma\\|x - x'\\|^2}`.
    n_components, gamma : int, float
        Number of random features and kernel width for ``"rff"`` (gamma defaults to 1/n_features).
    standardize : bool
        Centre and scale features on the training rows before the map.
    fit_intercept : bool
        Learn an unpenalised offset (matters for pointwise losses only).
    max_iter : int
        L-BFGS iterations (lbfgs) or epochs over the queries (ogd, adam).
    learning_rate : float, optional
        Step size :math:`\\eta` (ogd, default 0.1) or Adam learning rate (default 0.01); unused by
        lbfgs. (Called ``lr`` before; the old name still works, with a DeprecationWarning.)
    radius : float, optional
        Projection radius :math:`W` of OGD (None: no projection).
    batch_queries : int
        Queries per minibatch (adam; ogd uses 1, one query per online step, when None).
    eval_metric : str
        Validation metric string, e.g. ``"ndcg@10"``.
    early_stopping_rounds : int, optional
        Stop after this many iterations/epochs without improvement of ``eval_metric`` on the eval set.
    random_state : int, optional
    verbose : "auto" or bool
        Progress bar ("auto": only on a terminal).
    n_jobs : int, optional
        Threads of every pool during fit and predict: torch's, the loss engine's and the compiled kernels', BLAS
        (-1: all cores). None: the engine and the kernels on every usable CPU, torch's intra-op pool on one
        thread (the scorer is one matrix-vector product per batch; torch's spinning threads would only take the
        engine's cores).

    Attributes
    ----------
    coef_ : ndarray, shape (n_mapped_features,)
    intercept_ : float
    history_ : History
        Per iteration (lbfgs) or epoch (ogd, adam): ``"epoch"``, ``"loss"`` and, with an
        ``eval_set``, the ``eval_metric``. ``"loss"`` is, for lbfgs, the objective L-BFGS
        minimises (mean loss over queries plus both penalties) at its last evaluation of the
        iteration; for ogd/adam, the mean training loss over queries after the epoch (without
        the penalties).
    best_iteration_, best_score_ : int, float
        With ``early_stopping_rounds`` only: the best iteration/epoch on ``eval_set`` (the
        coefficients are those of that step) and its metric. An ``eval_set`` without early
        stopping only records the validation curve; the final coefficients are kept.
    n_iter_ : int
        L-BFGS iterations run (lbfgs), resumed ones included.
    solver_ : str
        The solver that ran (``solver`` with ``"auto"`` resolved).
    n_features_in_ : int

    References
    ----------
    S. Chaudhuri and A. Tewari. Generalization error bounds for learning to rank: does the length of
    document lists matter? ICML 2015 (permutation-invariant linear class, Thm 3; OGD, Thm 5;
    regularised ERM, Thm 6).
    A. Rahimi and B. Recht. Random features for large-scale kernel machines. NeurIPS 2007.
    """

    def __init__(self, loss="listnet", *, loss_params=None, alpha=1e-4, l1=0.0, solver="auto",
                 feature_map=None, n_components=256, gamma=None, standardize=True, fit_intercept=True,
                 max_iter=200, learning_rate=None, radius=None, batch_queries=None, tol=1e-7, eval_metric="ndcg@10",
                 early_stopping_rounds=None, random_state=None, verbose="auto", n_jobs=None, **deprecated):
        self.loss = loss
        self.loss_params = loss_params
        self.alpha = alpha
        self.l1 = l1
        self.solver = solver
        self.feature_map = feature_map
        self.n_components = n_components
        self.gamma = gamma
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.radius = radius
        self.batch_queries = batch_queries
        self.tol = tol
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self._init_deprecated(deprecated)

    _deprecated_params = {"lr": "learning_rate"}
    _parameter_constraints = {
        **TORCH_CONSTRAINTS,
        "alpha": [Interval("real", 0)],
        "l1": [Interval("real", 0)],
        "solver": [Options(*_SOLVERS)],
        "feature_map": [Options(*_FEATURE_MAPS)],
        "n_components": [Interval("int", 1)],
        "gamma": [None, Interval("real", 0, closed="neither")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval("int", 1)],
        "learning_rate": [None, Interval("real", 0, closed="neither")],
        "radius": [None, Interval("real", 0, closed="neither")],
        "batch_queries": [None, Interval("int", 1)],
        "tol": [Interval("real", 0)],
    }

    # -- features -----------------------------------------------------------------------------
    def _fit_feature_map(self, d: int, seed: int) -> None:
        self.rff_weights_ = self.rff_offsets_ = None
        if self.feature_map == "rff":
            n = int(self.n_components)
            gamma = 1.0 / d if self.gamma is None else float(self.gamma)
            rng = np.random.default_rng(seed)
            self.rff_weights_ = rng.normal(scale=np.sqrt(2 * gamma), size=(d, n))
            self.rff_offsets_ = rng.uniform(0, 2 * np.pi, size=n)

    def _transform(self, X, dtype=np.float32):
        """:math:`\\phi(x)` of standardized rows as ``dtype`` (float32 for torch training, float64 to predict)."""
        Z = Standardizer(self.scaler_mean_, self.scaler_scale_).transform(X, dtype)
        if self.feature_map == "poly2":
            from sklearn.preprocessing import PolynomialFeatures

            Z = PolynomialFeatures(degree=2, include_bias=False).fit_transform(Z)
            if dtype == np.float32:
                Standardizer(0.0, 1.0)._check_range(Z.data if sp.issparse(Z) else Z, np.float32)
            Z = Z.astype(dtype) if not sp.issparse(Z) else sp.csr_matrix(Z, dtype=dtype)
        elif self.feature_map == "rff":
            Zd = Z.toarray() if sp.issparse(Z) else Z
            Z = (np.sqrt(2.0 / self.rff_weights_.shape[1])
                 * np.cos(Zd.astype(np.float64) @ self.rff_weights_ + self.rff_offsets_)).astype(dtype)
        return Z

    def _check_params(self):
        self._validate_params()

    def _line_search_safe(self) -> bool:
        """Whether the loss suits L-BFGS (its spec's ``line_search_safe``; True for a callable loss)."""
        if not isinstance(self.loss, str):
            return True
        from rankwise.losses.registry import spec

        return spec(self.loss).line_search_safe(self.loss_params or {})

    def _resolve_solver(self, hooks=None) -> str:
        """``solver`` with ``"auto"`` resolved (minibatch Adam under training hooks); warns for an
        explicit ``"lbfgs"`` on a loss whose weights are held constant in the step."""
        safe = self._line_search_safe()
        if self.solver == "auto":
            return "adam" if hooks is not None or not safe else "lbfgs"
        if self.solver == "lbfgs" and not safe:
            warn_user(f"LinearRanker(loss={self.loss!r}, solver='lbfgs'): this loss's weights come from the current "
                      "ranking and are held constant in the step, so its value is not an objective whose derivative "
                      "is the gradient; L-BFGS's line search may stop at its all-tied start (w = 0). Use "
                      "solver='auto' (Adam for this loss) or 'adam'")
        return self.solver

    # -- torch module hooks -------------------------------------------------------------------
    def _build_module(self, n_inputs):
        return _linear_module(n_inputs, bool(self.fit_intercept))

    def _module_from_state(self):
        import torch

        m = self._build_module(len(self.coef_))
        with torch.no_grad():
            m.linear.weight.copy_(torch.from_numpy(self.coef_.astype(np.float32))[None, :])
            if self.fit_intercept:
                m.linear.bias.fill_(float(self.intercept_))
        return m

    def _sync_from_module(self):
        w = self.module_.linear.weight.detach().double().numpy()[0]
        self.coef_ = w.copy()
        self.intercept_ = float(self.module_.linear.bias.detach()[0]) if self.fit_intercept else 0.0

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None, checkpoint=None, resume=None):
        """Fit on rows ``X`` with labels ``y`` grouped by ``qid`` (or a RankingDataset as ``X``).

        ``eval_set=(X_val, y_val, qid_val)`` (or a RankingDataset) is scored with ``eval_metric``
        after every iteration; with ``early_stopping_rounds`` training stops after that many
        steps without improvement and keeps the best step. ``checkpoint=path`` writes the
        training state after every epoch (ogd/adam) or iteration (lbfgs), ``resume=path``
        continues a run from such a file up to ``max_iter`` steps in all, equal to the run that was
        never interrupted, bit for bit (lbfgs checkpoints carry L-BFGS-B's complete state: its
        correction pairs, line-search scalars and counters; a checkpoint without it restarts
        L-BFGS at the saved coefficients: the same optimum, not the same iterates). lbfgs warns (``ConvergenceWarning``, a
        ``UserWarning``) when it stops at ``max_iter`` while the objective is still falling
        (by more than 1e-4 relative over the last tenth of its iterations, at least 3); a run that merely did not reach
        the tight ``tol`` is not warned about. ``group`` (query sizes) may replace ``qid``.
        """
        self._check_params()
        train, val, metric = self._setup_common(X, y, qid, sample_weight, eval_set, group)
        with self._torch_threads(), self._scorer_threads():
            return self._fit_validated(train, val, metric, checkpoint, resume)

    def _scorer_threads(self):
        """``n_jobs=None``: torch's own intra-op pool on one thread for the fit (restored after); the loss engine and
        the compiled kernels still use every usable CPU. The linear scorer is one matrix-vector product per batch
        and its gradient another, too small for torch's threads to pay, while torch's OpenMP threads, spinning
        after each of its parallel regions, take the cores the engine's threads need. Measured on 2 cores,
        ``LinearRanker(loss="listnet")`` on MQ2008 Fold1 in a fresh process: 6.4-7.2 s wall and 9.9-11.6 CPU s
        with torch's default two threads, 4.4-5.1 s and 5.8-6.6 with one (5.8-6.3 CPU s with two threads and
        ``OMP_WAIT_POLICY=PASSIVE``: the spinning is the cost). An explicit ``n_jobs`` sets every pool, torch's
        included, as before."""
        return torch_single_thread() if self.n_jobs is None else contextlib.nullcontext()

    def _fit_validated(self, train, val, metric, checkpoint, resume, hooks=None):
        seed = fit_seed(self.random_state) if hooks is None else hooks.seed
        if resume is None:
            sc = Standardizer.fit(train.X, bool(self.standardize)) if hooks is None else \
                Standardizer(*hooks.scaler_stats(train.X, bool(self.standardize)))
            if not self.standardize:
                warn_unscaled(train.X, type(self).__name__)
            self.scaler_mean_, self.scaler_scale_ = sc.mean, sc.scale
            self._fit_feature_map(train.X.shape[1], seed)
        else:  # the scaler and feature map come from the checkpoint
            from rankwise.models import persistence

            state, arrays, tstate, tarrays = persistence.load_checkpoint(resume, self)
            self._check_resume_features(state, train.X.shape[1], resume)
            persistence.restore_state(self, state, arrays, resume)
            lbfgs = {k[len("lbfgs/"):]: v for k, v in tarrays.items() if k.startswith("lbfgs/")}
            if lbfgs and tstate.get("scipy") != _scipy_version():  # its workspace layout is scipy's own
                warn_user(f"resume={str(resume)!r}: the checkpoint's L-BFGS-B state was written by scipy "
                          f"{tstate.get('scipy')}, this is scipy {_scipy_version()}: L-BFGS restarts at the saved "
                          "coefficients (the same optimum, not the iterates of the uninterrupted run)")
                lbfgs = {}
            self._lbfgs_resume = (tstate.get("stopper", {}), tarrays.get("best_theta"), lbfgs or None, resume)
        self.n_features_in_ = train.X.shape[1]
        Z = self._transform(train.X)
        val_in = None if val is None else (self._transform(val.X), val.y, val.offsets, None)
        train_in = (Z, train.y, train.offsets, train.sample_weight)
        self.solver_ = self._resolve_solver(hooks)
        if self.solver_ == "lbfgs":
            self._fit_lbfgs(train_in, val_in, metric, checkpoint, resume)
        else:
            self._fit_sgd(train_in, val_in, metric, checkpoint, resume, hooks)
        if hooks is None:
            self._check_trained(train, f"after {self._steps_run()}", moved=self.__dict__.pop("_moved", None))
        return self

    def _untrained_hint(self) -> str:
        if self.solver_ == "lbfgs" and not self._line_search_safe():
            return (f"loss={self.loss!r} holds weights from the current ranking constant in the step, which L-BFGS's "
                    "line search cannot follow from an all-tied start: use solver='auto' or 'adam'")
        return super()._untrained_hint()

    def _steps_run(self) -> str:
        if self.solver_ == "lbfgs":
            return f"{getattr(self, 'n_iter_', 0)} L-BFGS iteration(s) from w = 0"
        return f"{len(self.history_)} epoch(s) of {self.solver_} from w = 0"

    def _fit_sgd(self, train_in, val_in, metric, checkpoint, resume, hooks=None):
        import torch

        alpha, l1 = float(self.alpha), float(self.l1)
        averaged = self.solver_ == "ogd"
        lr = self.learning_rate if self.learning_rate is not None else (0.1 if averaged else 0.01)
        batch = self.batch_queries if self.batch_queries is not None else (1 if averaged else 16)
        if averaged:
            factory = lambda m: make_averaged_ogd(m.parameters(), lr=float(lr), radius=self.radius)  # noqa: E731
        else:
            factory = lambda m: torch.optim.Adam(m.parameters(), lr=float(lr))  # noqa: E731

        def penalty_factory(m):
            if alpha == 0 and l1 == 0:
                return None
            w = m.linear.weight
            return lambda: 0.5 * alpha * (w * w).sum() + l1 * w.abs().sum()

        self._fit_minibatch(train_in, val_in, metric, optimizer_factory=factory, penalty_factory=penalty_factory,
                            epochs=int(self.max_iter), batch_queries=int(batch), checkpoint=checkpoint,
                            resume=resume, averaged=averaged, desc=f"LinearRanker[{self.solver_}]", hooks=hooks)
        self._sync_from_module()
        del self.module_

    def _fit_lbfgs(self, train_in, val_in, metric, checkpoint, resume):
        import torch

        Z, y, offsets, weights = train_in
        d = Z.shape[1]
        n_q = max(int(np.count_nonzero(np.diff(offsets) > 0)), 1)
        buckets = []
        for qs in query_batches(offsets, 256, max_cells=1 << 22):
            Xb, yb, wb, where, _ = gather_padded(Z, y, offsets, qs, weights)
            buckets.append((torch.from_numpy(Xb).double(), torch.from_numpy(yb).double(), torch.from_numpy(where),
                            None if wb is None else torch.from_numpy(wb).double()))
        alpha = float(self.alpha)
        fi = int(bool(self.fit_intercept))

        def fun_grad(theta):
            w = torch.from_numpy(theta[:d].copy()).requires_grad_(True)
            b = torch.tensor(theta[d] if fi else 0.0, dtype=torch.float64, requires_grad=bool(fi))
            total = 0.5 * alpha * (w * w).sum()
            for Xb, yb, where, wb in buckets:
                s = Xb @ w + b
                total = total + self._loss_fn(s, yb, where, wb) / n_q
            total.backward()
            g = w.grad.numpy().copy()
            if fi:
                g = np.append(g, b.grad.item() if b.grad is not None else 0.0)
            f = float(total.detach())
            if not np.isfinite(f) or not np.all(np.isfinite(g)):
                raise TrainingDivergedError("the training objective became non-finite; standardise the features")
            return f, g

        self.history_ = History() if resume is None else History(getattr(self, "_resumed_history", {}))
        for k in ("best_iteration_", "best_score_"):  # from a previous fit of this instance
            self.__dict__.pop(k, None)
        x0 = np.zeros(d + fi)
        stopper = EarlyStopping(self.early_stopping_rounds)
        early = self.early_stopping_rounds is not None
        best = {"theta": None}
        resumed = self.__dict__.pop("_lbfgs_resume", None)
        lbfgs_state = None
        if resume is not None:
            x0 = np.append(self.coef_, self.intercept_) if fi else self.coef_.copy()
            if resumed is not None:
                stopper.load_state(resumed[0])
                best["theta"] = None if resumed[1] is None or not early else np.asarray(resumed[1], dtype=np.float64)
                lbfgs_state = self._checked_lbfgs_state(resumed[2], len(self.history_), resumed[3])
        done = len(self.history_)
        remaining = int(self.max_iter) - done  # max_iter counts every iteration, resumed ones included
        step = [done]
        live = {}  # the optimiser's complete state at the current iterate (minimize_erm fills it)

        def set_theta(theta):
            self.coef_ = theta[:d].copy()
            self.intercept_ = float(theta[d]) if fi else 0.0

        def callback(theta, objective):
            # the objective of the optimiser's last evaluation (at theta): no extra pass over the data
            record = {"epoch": step[0], "loss": objective}
            stop = False
            if val_in is not None:
                s = val_in[0] @ theta[:d] + (theta[d] if fi else 0.0)
                value = metric(s, val_in[1], val_in[2])
                record[metric.__name__] = value
                stop = stopper.update(step[0], metric.sign * value)
                if stopper.improved and early:
                    best["theta"] = theta.copy()
            self.history_.record(**record)
            bar.update(1)
            step[0] += 1
            if checkpoint is not None:  # the iterate after every iteration, so a killed run resumes
                set_theta(theta)
                opt_state = dict(live)
                if stop and "counts" in opt_state:  # the stop is part of the state: a resume stops here too
                    opt_state["counts"] = opt_state["counts"].copy()
                    opt_state["counts"][2] = 1
                self._write_lbfgs_checkpoint(checkpoint, step[0], stopper, best["theta"], opt_state)
            if stop:
                raise StopIteration

        t0 = time.perf_counter()
        res = None
        theta = x0
        if remaining > 0:
            bar = Progress(int(self.max_iter), desc="LinearRanker[lbfgs]", verbose=self.verbose, initial=done)
            try:
                # with the saved state L-BFGS continues exactly (max_iter counts its iterations
                # before the interruption too); without one (an older checkpoint) it restarts at x0
                theta, res = minimize_erm(fun_grad, x0, l1=float(self.l1),
                                          l1_mask=np.r_[np.ones(d, bool), np.zeros(fi, bool)],
                                          max_iter=remaining if lbfgs_state is None else int(self.max_iter),
                                          tol=float(self.tol), callback=callback, state=lbfgs_state, state_out=live)
            finally:
                bar.close()
        if res is not None and res.status == 1:
            losses = [v for v in self.history_["loss"] if v is not None]
            window = max(3, len(losses) // 10)  # the last tenth of the run (at least 3 iterations)
            back = losses[-min(window, len(losses))] if losses else 0.0
            drop = (back - losses[-1]) / max(abs(losses[-1]), 1e-12) if losses else np.inf
            if not drop <= 1e-4:  # still falling: a real problem, not a tight tol
                warn_user(f"LinearRanker(solver='lbfgs') reached max_iter={int(self.max_iter)} iterations without "
                          f"converging (tol={self.tol:g}): the objective still fell by {drop:.2g} (relative) over "
                          f"the last {min(window, len(losses))} iterations; raise max_iter"
                          + ("" if self.standardize else ", or standardise the features (standardize=True)"),
                          ConvergenceWarning)
        if early and best["theta"] is not None:
            theta = best["theta"]  # early stopping keeps the best iterate; an eval_set alone does not
            self.best_iteration_ = int(stopper.best_step)
            self.best_score_ = float(stopper.best_value) * metric.sign
        self.n_iter_ = done if res is None else (int(res.nit) if lbfgs_state is not None else done + int(res.nit))
        set_theta(theta)
        self.fit_time_ = time.perf_counter() - t0
        if checkpoint is not None:
            final = lbfgs_state if res is None else res.state
            self._write_lbfgs_checkpoint(checkpoint, step[0], stopper, best["theta"], final)

    @staticmethod
    def _checked_lbfgs_state(arrays, done, path):
        """The saved L-BFGS-B state of a checkpoint, checked against its history (None: restart at its coefficients)."""
        from rankwise.models import persistence
        from rankwise.train.optim import _LBFGSB_ARRAYS

        if arrays is None:
            return None
        missing = [k for k in _LBFGSB_ARRAYS if k not in arrays]
        counts = np.asarray(arrays.get("counts", ()))
        if missing or counts.shape != (3,) or int(counts[0]) != done:
            why = f"missing {missing}" if missing else f"iteration counter {counts.tolist()} vs {done} recorded"
            raise persistence.corrupt(path, ValueError(f"L-BFGS state: {why}"), "a LinearRanker checkpoint")
        return arrays

    def _write_lbfgs_checkpoint(self, path, epoch, stopper, best_theta, opt_state=None):
        from rankwise.models import persistence

        arrays = {} if best_theta is None else {"best_theta": best_theta}
        arrays.update({f"lbfgs/{k}": v for k, v in (opt_state or {}).items()})
        tstate = {"epoch": epoch, "stopper": stopper.state()}
        if opt_state:
            tstate["scipy"] = _scipy_version()
        persistence.save_checkpoint(self, path, tstate, arrays)

    # -- predict ------------------------------------------------------------------------------
    def _predict_rows(self, Xv):
        """One score per row: :math:`\\langle w, \\phi(x) \\rangle + b`."""
        Z = self._transform(Xv, np.float64)  # float64 throughout: a float32 feature near 3.4e38 stays finite
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.asarray(Z @ self.coef_, dtype=np.float64).ravel() + self.intercept_
        if not np.all(np.isfinite(s)) and np.isfinite(self.intercept_) and np.all(np.isfinite(self.coef_)):
            r = int(np.flatnonzero(~np.isfinite(s))[0])
            raise InputError(f"X row {r}: the score <w, phi(x)> + b overflows float64 ({s[r]}); the row's features "
                             "are far outside the range seen in training: clip or rescale them")
        return s

    # -- persistence --------------------------------------------------------------------------
    def _get_state(self):
        state = {"n_features_in_": int(self.n_features_in_), "intercept_": float(self.intercept_),
                 "history": getattr(self, "history_", History()).to_dict()}
        for k in ("best_iteration_", "best_score_", "n_iter_", "fit_time_", "solver_"):
            if hasattr(self, k):
                state[k] = getattr(self, k)
        arrays = {"coef_": self.coef_, "scaler_mean_": self.scaler_mean_, "scaler_scale_": self.scaler_scale_}
        if self.rff_weights_ is not None:
            arrays.update(rff_weights_=self.rff_weights_, rff_offsets_=self.rff_offsets_)
        return state, arrays

    def _set_state(self, state, arrays):
        self.n_features_in_ = int(state["n_features_in_"])
        self.intercept_ = float(state["intercept_"])
        self.history_ = History(state.get("history", {}))
        self._resumed_history = state.get("history", {})
        for k in ("best_iteration_", "best_score_", "n_iter_", "fit_time_", "solver_"):
            if k in state:
                setattr(self, k, state[k])
        self.coef_ = np.asarray(arrays["coef_"], dtype=np.float64)
        self.scaler_mean_ = np.asarray(arrays["scaler_mean_"])
        self.scaler_scale_ = np.asarray(arrays["scaler_scale_"])
        self.rff_weights_ = arrays.get("rff_weights_")
        self.rff_offsets_ = arrays.get("rff_offsets_")
        d = self.n_features_in_
        expected = {"scaler_mean_": (d,), "scaler_scale_": (d,)}
        if self.feature_map == "rff":
            n = self.rff_offsets_.shape[0] if self.rff_offsets_ is not None else -1
            expected.update(rff_weights_=(d, n), rff_offsets_=(n,), coef_=(n,))
        elif self.feature_map is None:
            expected["coef_"] = (d,)
        for name, shape in expected.items():  # a file whose arrays disagree would fail in predict
            arr = getattr(self, name)
            if arr is None or arr.shape != shape:
                raise ValueError(f"{name} has shape {None if arr is None else arr.shape}, expected {shape}")
