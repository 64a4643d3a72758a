"""Shared machinery of the torch-trained rankers (LinearRanker's ogd/adam solvers, NeuralRanker)."""
from __future__ import annotations

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from rankwise._validation import Interval, Options, fit_seed, limit_threads
from rankwise.errors import InputError
from rankwise.models import persistence
from rankwise.models.base import BaseRanker
from rankwise.train.checkpoint import (arrays_to_module_state, load_optimizer_state, module_state_to_arrays,
                                       optimizer_state)
from rankwise.train.early_stopping import EarlyStopping, resolve_metric
from rankwise.train.history import History
from rankwise.train.loop import TrainingHooks, resolve_loss, run_epochs

#: constraints of the parameters every torch-trained ranker has (checked by BaseRanker._validate_params)
TORCH_CONSTRAINTS = {
    "loss": ["string", "callable"],
    "standardize": ["boolean"],
    "eval_metric": ["string"],
    "early_stopping_rounds": [None, Interval("int", 1)],
    "random_state": [None, Interval("int", 0)],
    "verbose": [Options("auto"), "boolean"],
    "n_jobs": ["n_jobs"],
}


class Standardizer:
    """Per-feature centring and scaling fitted on the training rows (scaling only for sparse X)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray):
        self.mean, self.scale = mean, scale

    @classmethod
    def fit(cls, X, enabled: bool):
        d = X.shape[1]
        if not enabled:
            return cls(np.zeros(d), np.ones(d))
        if sp.issparse(X):
            mean = np.zeros(d)
            sq = np.asarray(X.multiply(X).mean(axis=0)).ravel()
            scale = np.sqrt(sq)
        else:
            Xd = np.asarray(X, dtype=np.float64)
            mean = Xd.mean(axis=0)
            scale = Xd.std(axis=0)
        scale = np.where(scale > 1e-12, scale, 1.0)
        return cls(mean, scale)

    def transform(self, X, dtype=np.float32):
        """Standardized rows, computed in float64 and returned as ``dtype``.

        A value whose standardized form does not fit ``dtype`` (a feature far outside the range
        seen in training: ``3.4e38`` where the training column had a standard deviation of 0.2)
        raises :class:`~rankwise.errors.InputError` naming the row and column, instead of turning
        into ``inf`` and an infinite or NaN score.
        """
        if sp.issparse(X):
            if np.any(self.mean != 0):  # fitted on dense rows (centred): centring densifies, as it must
                return self.transform(X.toarray(), dtype)
            Z = sp.csr_matrix(X.multiply(1.0 / self.scale[None, :]), dtype=np.float64)
            self._check_range(Z.data, dtype)
            return sp.csr_matrix(Z, dtype=dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            Z = (np.asarray(X, dtype=np.float64) - self.mean) / self.scale
        self._check_range(Z, dtype)
        return Z.astype(dtype)

    def _check_range(self, Z, dtype):
        big = np.finfo(dtype).max
        ok = np.abs(Z) <= big  # False for NaN and inf too
        if ok.all():
            return
        idx = np.argwhere(~ok)[0]
        where = f"row {idx[0]}, column {idx[1]}" if Z.ndim == 2 else f"stored entry {idx[0]}"
        raise InputError(f"X at {where}: the standardized feature value {Z[tuple(idx)]:.4g} (value minus the "
                         f"training mean, over the training standard deviation) is outside the {np.dtype(dtype).name} "
                         f"range (|z| <= {big:.4g}) the model computes in ({int((~ok).sum())} entries); the feature "
                         "is far outside the range seen in training: clip or rescale it")


class _TorchRanker(BaseRanker):
    """Fit/predict/checkpoint logic for rankers whose scorer is a torch module over padded queries."""

    _resume_free_params = ("max_iter", "verbose", "n_jobs")

    # subclasses define: _build_module(n_inputs) -> nn.Module, _transform(X) -> model inputs,
    # _make_optimizer(module), _penalty(module) (or None), _epochs, _batch_queries, _lr_check

    @contextlib.contextmanager
    def _torch_threads(self):
        """Every thread pool of training and scoring (torch, the compiled kernels and loss engine, BLAS)
        limited to ``n_jobs`` for the duration (:func:`rankwise._validation.limit_threads`; restored after)."""
        import torch

        before = torch.get_num_threads()
        try:
            with limit_threads(getattr(self, "n_jobs", None)):
                yield
        finally:
            torch.set_num_threads(before)

    def fit_with_hooks(self, train, hooks: TrainingHooks):
        """Run this model's own training loop on validated rows under training ``hooks``; returns ``self``.

        The hook point for distributed trainers (:mod:`rankwise.distributed.ddp`): ``train`` is a
        :class:`rankwise.data.ranking_input.RankingInput` (this process's rows), ``hooks`` a
        :class:`rankwise.train.loop.TrainingHooks` that supplies the seed, the feature
        statistics, the minibatch schedule, the module wrapper that synchronises gradients and
        the reduction of the training loss. Minibatch solvers only, no eval_set / checkpoints.
        """
        self._check_params()
        if getattr(self, "solver", "adam") == "lbfgs":
            raise InputError(f"training hooks (data-parallel training) drive minibatch solvers; {type(self).__name__}"
                             "(solver='lbfgs') is not one: use solver='adam' or 'ogd'")
        if self.early_stopping_rounds is not None:
            raise InputError("training hooks (data-parallel training) do not support early_stopping_rounds (no "
                             "eval_set); set it to None")
        self._loss_fn = self._make_loss()
        with self._torch_threads():
            return self._fit_validated(train, None, None, None, None, hooks=hooks)

    def _make_loss(self):
        """The training loss ``f(scores, labels, where, weights)`` (see :func:`rankwise.train.loop.run_epochs`):
        the ``loss``/``loss_params`` parameters resolved; a model with a loss of its own overrides this."""
        return resolve_loss(self.loss, self.loss_params)

    def _setup_common(self, X, y, qid, sample_weight, eval_set, group=None):
        train, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set, group=group)
        self._loss_fn = self._make_loss()
        metric = resolve_metric(self.eval_metric) if val is not None else None
        if self.early_stopping_rounds is not None and val is None:
            raise InputError("early_stopping_rounds needs a validation set: pass eval_set=(X_val, y_val, qid_val)")
        return train, val, metric

    def _ckpt_writer(self, path, optimizer, stopper, seed):
        if path is None:
            return None

        def write(epoch, best_state):
            arrays = optimizer_state(optimizer)[1]
            opt_meta = optimizer_state(optimizer)[0]
            if best_state is not None:
                arrays.update({f"best/{k}": v.numpy().copy() for k, v in best_state.items()})
            persistence.save_checkpoint(self, path, {"epoch": epoch, "seed": seed, "optimizer": opt_meta,
                                                     "stopper": stopper.state()}, arrays)
        return write

    def _fit_minibatch(self, train_in, val_in, metric, *, optimizer_factory, penalty_factory, epochs, batch_queries,
                       checkpoint, resume, averaged: bool = False, desc: str, hooks=None):
        import torch

        self.history_ = History()
        for k in ("best_iteration_", "best_score_"):  # from a previous fit of this instance
            self.__dict__.pop(k, None)
        seed = fit_seed(self.random_state) if hooks is None else hooks.seed
        start_epoch, best_state = 0, None
        stopper = EarlyStopping(self.early_stopping_rounds)
        torch.manual_seed(seed)
        module = self._build_module(train_in[0].shape[1])
        optimizer = optimizer_factory(module)
        if resume is not None:
            # (the caller's fit has already checked the checkpoint's features against X)
            state, arrays, tstate, tarrays = persistence.load_checkpoint(resume, self)
            persistence.restore_state(self, state, arrays, resume)
            try:
                module = self._module_from_state()
                optimizer = optimizer_factory(module)
                load_optimizer_state(optimizer, tstate["optimizer"], tarrays)
                start_epoch, seed = int(tstate["epoch"]), int(tstate["seed"])
                stopper.load_state(tstate["stopper"])
            except InputError:
                raise
            except Exception as exc:
                raise persistence.corrupt(resume, exc, f"a {type(self).__name__} checkpoint") from None
            best = {k[len("best/"):]: torch.from_numpy(np.array(v)) for k, v in tarrays.items() if k.startswith("best/")}
            best_state = best or None
            self.history_ = History(state.get("history", {}))
            if averaged:  # the saved module holds the averaged iterate; the optimiser holds the last one
                optimizer.swap_average()
        self.module_ = module
        swap = optimizer.swap_average if averaged else None

        def ckpt(epoch, best):
            if averaged:
                optimizer.swap_average()
            try:
                self._sync_from_module()
                self._ckpt_writer(checkpoint, optimizer, stopper, seed)(epoch, best)
            finally:
                if averaged:
                    optimizer.swap_average()

        start = {k: v.detach().clone() for k, v in module.state_dict().items()}
        t0 = time.perf_counter()
        best_state = run_epochs(module=module, optimizer=optimizer, loss_fn=self._loss_fn, train=train_in, val=val_in,
                                metric=metric, epochs=epochs, batch_queries=batch_queries, seed=seed, stopper=stopper,
                                history=self.history_, start_epoch=start_epoch, verbose=self.verbose, desc=desc,
                                penalty=penalty_factory(module), before_eval=swap, after_eval=swap,
                                checkpoint_fn=None if checkpoint is None else ckpt, best_state=best_state,
                                score_fn=self._val_score_fn(module), hooks=hooks)
        if averaged:
            optimizer.swap_average()  # predict with the online-to-batch average
        if best_state is not None and self.early_stopping_rounds is not None:
            module.load_state_dict(best_state)  # an eval_set alone keeps the final state
            self.best_iteration_ = int(stopper.best_step)
            self.best_score_ = float(stopper.best_value) * metric.sign
        module.eval()
        self.fit_time_ = time.perf_counter() - t0
        # whether training left its start (None for a resumed run: its start is a trained state)
        self._moved = None if resume is not None else any(
            not torch.equal(v, start[k]) for k, v in module.state_dict().items() if k in start)
        return module

    def _val_score_fn(self, module):
        return None

    # torch modules are built from classes local to a function (torch is imported lazily), so a
    # pickled model (joblib, scikit-learn's clone-and-pickle) carries the module's weights instead
    def __getstate__(self):
        state = dict(super().__getstate__())  # a copy: object.__getstate__ is the live __dict__
        module = state.pop("module_", None)
        if module is not None:
            state["_pickled_module"] = (module_state_to_arrays(module), int(next(iter(module.parameters())).shape[1]))
        return state

    def __setstate__(self, state):
        state = dict(state)
        packed = state.pop("_pickled_module", None)
        super().__setstate__(state)
        if packed is not None:
            self.module_ = self._load_module(*packed)

    def _module_state(self):
        return module_state_to_arrays(self.module_)

    def _load_module(self, arrays, n_inputs):
        module = self._build_module(n_inputs)
        module.load_state_dict(arrays_to_module_state(arrays))
        module.eval()
        return module
