"""Run a collective training call while watching the Dask workers it depends on.

The booster libraries train over their own collective (LightGBM's sockets, XGBoost's tracker): every worker
takes part in every round, and a task pinned to a worker that died can never run again (Dask restarts the
worker under a new address). Left alone, such a call waits forever. :func:`watched` runs the call in a
thread and returns its value, or raises :class:`rankwise.errors.WorkerLostError` as soon as a worker present
at the start has left the cluster (or ``timeout`` seconds have passed); no partial model is returned.
"""
from __future__ import annotations

import threading
import time

from rankwise.errors import WorkerLostError

#: seconds between two looks at the cluster's workers
POLL_S = 0.25
#: after the call failed: how long to wait for the scheduler to notice a dead worker (its closed connection)
GRACE_S = 3.0


def _workers(client) -> set[str] | None:
    """The addresses of the cluster's workers as the scheduler lists them; None when the listing has none
    (a listing being refreshed, or every worker restarting): not taken as a loss by itself."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # pragma: no cover - distributed before n_workers=
        info = client.scheduler_info()
    workers = set((info or {}).get("workers") or ())
    return workers or None


def _lost(start: set[str] | None, client) -> set[str]:
    now = _workers(client)
    return set() if start is None or now is None else start - now


def _lost_message(what: str, lost: set[str]) -> str:
    who = ", ".join(sorted(lost))
    return (f"{what}: Dask worker {who} left the cluster during training (killed, out of memory or disconnected); "
            "the booster's collective cannot go on without it, so no model is returned. Run the fit again once "
            "the cluster has its workers back (a nanny restarts a killed worker); the surviving workers may hold "
            "the collective until its sockets close (client.restart() frees them at once)")


def workers(client) -> set[str] | None:
    """The workers now (pass as ``start=`` to :func:`watched` to count losses from this moment on)."""
    return _workers(client)


def watched(client, fn, *, what: str, timeout: float | None = None, start: set[str] | None = None):
    """``fn()`` (blocking), or :class:`WorkerLostError` when a worker dies or ``timeout`` passes first.

    ``start``: the workers to watch (default: those at the call). A worker lost since then (e.g. while
    the training rows were being partitioned, whose recomputation may leave the booster's inputs
    inconsistent) is reported before ``fn`` runs."""
    if timeout is not None and not timeout > 0:
        from rankwise.errors import InputError

        raise InputError(f"timeout must be a positive number of seconds or None; got {timeout!r}")
    if start is None:
        start = _workers(client)
    lost = _lost(start, client)
    if lost:
        raise WorkerLostError(_lost_message(what, lost))
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            box["error"] = exc

    # a daemon thread: if the collective never returns, it must not keep the interpreter from exiting
    thread = threading.Thread(target=target, name=f"rankwise-{what}", daemon=True)
    t0 = time.monotonic()
    thread.start()
    while True:
        thread.join(POLL_S)
        if not thread.is_alive():
            break
        lost = _lost(start, client)
        if lost:
            raise WorkerLostError(_lost_message(what, lost))
        if timeout is not None and time.monotonic() - t0 > timeout:
            raise WorkerLostError(f"{what}: training did not finish within timeout={timeout:g} s; no model is "
                                  "returned (a worker may be stuck in the booster's collective: client.restart() "
                                  "frees it)")
    if "error" in box:
        exc = box["error"]
        # a dead worker often surfaces first as the survivors' error (a closed socket, a lost task):
        # give the scheduler a moment to register the loss, then name it
        deadline = time.monotonic() + GRACE_S
        lost = _lost(start, client)
        while not lost and time.monotonic() < deadline and _looks_like_worker_loss(exc):
            time.sleep(POLL_S)
            lost = _lost(start, client)
        if lost:
            raise WorkerLostError(_lost_message(what, lost)) from exc
        if _looks_like_worker_loss(exc):
            raise WorkerLostError(f"{what}: a Dask worker failed during training ({type(exc).__name__}: {exc}); "
                                  "no model is returned") from exc
        raise exc
    return box["value"]


def _looks_like_worker_loss(exc: BaseException) -> bool:
    """Errors by which Dask and the booster libraries report a lost peer."""
    name = type(exc).__name__
    if name in ("KilledWorker", "CommClosedError", "FutureCancelledError", "CancelledError"):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("socket", "connection reset", "connection closed", "broken pipe",
                                   "killedworker", "communicator"))
