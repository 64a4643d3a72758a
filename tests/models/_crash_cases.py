"""Corrupted GBDT model files that crash LightGBM / XGBoost themselves (issue 17: 37 of 1,002).

Run as a script (``python _crash_cases.py N_LGB N_XGB``): it fits a small LightGBM and a small
XGBoost ``GBDTRanker``, mutates the booster text inside the saved file as the issue's fuzzer
did (truncation, digits changed, one byte replaced), and keeps the first mutations that **kill
the unprotected library** (abort, segfault, or a hang: 10 s of its own CPU time, or blocked after
10 s) when its own parser and
``predict`` are given the text directly, each tried in a forked child. Then, in this process
(not in a child: a miss would kill it, and the test reading the output sees that), every kept
case is written as a model file with valid digests (as a forger would) and loaded with
``rankwise.load``: each must raise ``InputError``. One JSON line per case goes to stdout.
"""
from __future__ import annotations

import json
import os
import random
import signal
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def mutate(text: bytes, rng: random.Random) -> bytes:
    b = bytearray(text)
    k = rng.random()
    if k < 0.3:
        return bytes(b[:rng.randrange(len(b))])
    if k < 0.8:
        digits = [i for i, c in enumerate(b) if 48 <= c <= 57]
        for _ in range(rng.randint(1, 3)):
            b[rng.choice(digits)] = 48 + rng.randrange(10)
        return bytes(b)
    b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live child (``/proc/PID/stat``); 0.0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def raw_library_outcome(backend: str, blob: bytes, X: np.ndarray, timeout: float = 10.0) -> str:
    """What the library does with ``blob`` and no rankwise check, in a forked child:
    'ok', 'error' (a Python exception), 'hang', or the name of the killing signal."""
    pid = os.fork()
    if pid == 0:  # child: the library alone
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if backend == "lightgbm":
                import lightgbm as lgb

                lgb.Booster(model_str=blob.decode("utf-8")).predict(X, raw_score=True)
            else:
                import xgboost as xgb

                b = xgb.Booster()
                b.load_model(bytearray(blob))
                b.predict(xgb.DMatrix(X), output_margin=True)
            os._exit(0)
        except BaseException:
            os._exit(1)
    # A hang is the child's own doing, not the machine's load: it spun for ``timeout`` seconds of its
    # own CPU time, or it has been blocked (no CPU time gained) for 2 s after ``timeout`` seconds of wall
    # time. A child that is merely starved on a loaded machine is neither, and is waited for (up to 600 s).
    t0 = time.monotonic()
    last_cpu, stalled_since = -1.0, time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now, cpu = time.monotonic(), _cpu_seconds(pid)
        if cpu != last_cpu:
            last_cpu, stalled_since = cpu, now
        blocked = now - t0 > timeout and now - stalled_since > 2.0
        if cpu > timeout or blocked or now - t0 > 600.0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang"
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return "ok" if os.WEXITSTATUS(status) == 0 else "error"


def fitted_files(folder):
    from _model_data import make_data

    from rankwise.models import GBDTRanker

    X, y, qid = make_data(n_queries=10, list_len=5)
    out = {}
    for backend, loss in (("lightgbm", "native:lambdarank"), ("xgboost", "native:rank:ndcg")):
        # one thread: a forked child of a process with a live OpenMP pool can deadlock (not a library hang)
        m = GBDTRanker(loss, backend=backend, n_estimators=3, min_child_samples=5, random_state=0, n_jobs=1)
        out[backend] = m.fit(X, y, qid=qid).save(os.path.join(folder, f"{backend}.npz"))
    return out, X


def crash_cases(n_lgb: int, n_xgb: int, folder: str, max_tries: int = 3000):
    """The first ``n`` mutations per backend that kill the unprotected library."""
    from rankwise.models import persistence

    files, X = fitted_files(folder)
    cases = []
    for backend, n in (("lightgbm", n_lgb), ("xgboost", n_xgb)):
        entries = persistence.raw_entries(files[backend])
        text = persistence.array_to_text(persistence._array(files[backend], "booster", entries["booster"])).encode()
        rng = random.Random(17)
        found = 0
        for trial in range(max_tries):
            blob = mutate(text, rng)
            outcome = raw_library_outcome(backend, blob, X)
            if outcome not in ("ok", "error"):
                cases.append((backend, trial, outcome, blob))
                found += 1
                if found == n:
                    break
    return files, cases


def main(n_lgb: int, n_xgb: int) -> int:
    import rankwise
    from rankwise.errors import InputError
    from rankwise.models import persistence

    with tempfile.TemporaryDirectory() as folder:
        files, cases = crash_cases(n_lgb, n_xgb, folder)
        for backend, trial, outcome, blob in cases:
            entries = persistence.raw_entries(files[backend])
            entries["booster"] = persistence._npy_bytes(np.frombuffer(blob, dtype=np.uint8))
            path = persistence.forge(os.path.join(folder, "case.npz"), entries)
            print(json.dumps({"backend": backend, "trial": trial, "library": outcome, "rankwise": "loading"}),
                  flush=True)
            try:
                rankwise.load(path)
                result, message = "loaded", ""
            except InputError as exc:
                result, message = "InputError", str(exc)
            print(json.dumps({"backend": backend, "trial": trial, "library": outcome, "rankwise": result,
                              "message": message}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
