"""Fault injection: SIGKILL at random moments of every writer, and a full disk (issue 29).

For each writer a child process (a fresh interpreter, its data loaded) writes the *new* version
of a file over the *old* one while the parent kills it (SIGKILL) at a random moment, uniform
over 1.1 times the time an uninterrupted write takes. Then the
parent looks at the target name:

* ``old intact``: byte for byte the old file (the writer was killed before its rename);
* ``new complete``: byte for byte what an uninterrupted write gives;
* ``refused``: neither, and rankwise's reader refuses it with a rankwise error (a folder save
  that mixed two saves or lost its ``meta.json``, as ``RankingDataset.save`` did before it wrote
  the folder whole);
* ``torn left``: neither old nor new bytes under the target name;
* ``torn accepted``: a torn file that rankwise's reader loads without an error (the worst case).

A folder (``RankingDataset.save``) is swapped in by ``renameat2(RENAME_EXCHANGE)``; the row
``RankingDataset.save (two renames)`` takes that away (as on a system without it): the old folder
is renamed to a backup, then the new one takes the name. A kill between the two leaves the name
empty; ``restored`` counts the trials where the next load (``rankwise._io.recover_folder``, run
here before looking) put the dead writer's backup back -- those then count as ``old intact``.

``stray temps`` counts the hidden temporary files (``.NAME.rankwise-tmp-PID-...``) a killed writer
left; ``left after next write`` counts those still there after one more uninterrupted write to
the same target (they must be cleaned up). ``--plain`` reruns the TREC and SVMlight writers with
``rankwise._io.atomic_write`` replaced by a plain ``open`` (what rankwise did before issue 29), to
show that the suite sees torn files, and that the readers refuse them (last line without a line
break; SVMlight header without its trailer).

Full disk: each writer writes a file larger than the free space of a small tmpfs (mounted when
the process may, as root; otherwise that part is skipped and says so) over a previous file; it
must raise :class:`rankwise.errors.WriteError` naming the target, leave the previous file intact
and no temporary file.

Usage: python benchmarks/faults.py [--quick] [--kills N] [--only NAME ...] [--plain]
Writes benchmarks/results/faults.md.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent / "src"))


# ------------------------------------------------------------------ what each writer writes

def _dataset(version: int, scale: float):
    from rankwise.data import make_synthetic

    n_q = max(2, int((20 if version == 0 else 60) * scale))
    return make_synthetic(n_q, n_features=20, max_len=200, seed=version)


def _run_dict(version: int, scale: float):
    import numpy as np

    rng = np.random.default_rng(version)
    n_q, n_d = max(2, int((40 if version == 0 else 150) * scale)), 1000
    return {f"q{q}": {f"doc-{q}-{d}": float(s) for d, s in enumerate(rng.normal(size=n_d))} for q in range(n_q)}


def _model(version: int, scale: float):
    from rankwise.models import GBDTRanker

    ds = _dataset(version, min(scale, 0.5))
    return GBDTRanker(n_estimators=20 if version == 0 else int(300 * max(scale, 0.1)), random_state=0).fit(ds)


def _prepare(name: str, version: int, scale: float):
    """What the writer writes (built once in the parent, handed to the children pickled)."""
    import numpy as np

    from rankwise import data

    if name == "write_trec_run":
        return _run_dict(version, scale)
    if name == "write_trec_qrels":
        return {q: {d: int(abs(s) * 2) for d, s in docs.items()} for q, docs in _run_dict(version, scale).items()}
    if name == "write_svmlight decimals=6":
        ds = _dataset(version, scale)
        return data.RankingDataset.from_arrays(ds.X, np.round(ds.labels), ds.qid)
    if name.startswith("write_svmlight"):
        return _dataset(version, scale)
    if name == "write_parquet" or name.startswith("RankingDataset.save"):
        return _dataset(version, scale * 4)
    if name == "model.save":
        return _model(version, scale)
    raise SystemExit(f"unknown writer {name!r}")


def _write(name: str, payload, path) -> None:
    from rankwise import data

    if name == "write_trec_run":
        data.write_trec_run(payload, path)
    elif name == "write_trec_qrels":
        data.write_trec_qrels(payload, path)
    elif name.startswith("write_svmlight"):
        data.write_svmlight(payload, path, **({"decimals": 6} if "decimals" in name else {}))
    elif name == "write_parquet":
        data.write_parquet(payload, path)
    else:  # RankingDataset.save, model.save
        payload.save(path)


WRITERS = ["write_trec_run", "write_trec_qrels", "write_svmlight", "write_svmlight .gz", "write_svmlight decimals=6",
           "write_parquet", "RankingDataset.save", "RankingDataset.save (two renames)", "model.save"]
PLAIN = ["write_trec_run", "write_svmlight"]
SUFFIX = {"write_svmlight .gz": ".txt.gz", "write_parquet": ".parquet", "RankingDataset.save": "",
          "RankingDataset.save (two renames)": "", "model.save": ".npz"}


def _read(name: str, path: Path):
    """rankwise's reader of what ``name`` writes (raises on what it refuses)."""
    from rankwise import data, load

    if name == "write_trec_run":
        return data.read_trec_run(path)
    if name == "write_trec_qrels":
        return data.read_trec_qrels(path)
    if name.startswith("write_svmlight"):
        return data.read_svmlight(path)
    if name == "write_parquet":
        return data.read_parquet(path)
    if name.startswith("RankingDataset.save"):
        return data.RankingDataset.load(path)
    return load(path)


def _plain_open_writes():
    """Replace atomic_write by a plain open (the writers as they were before issue 29)."""
    import rankwise._io as io_mod

    @contextlib.contextmanager
    def plain(path, mode="wb", *, encoding=None, newline=None):
        with open(path, mode, encoding=None if mode == "wb" else (encoding or "utf-8"), newline=newline) as fh:
            yield fh

    io_mod.atomic_write = plain
    for mod in list(sys.modules.values()):
        if getattr(mod, "atomic_write", None) is not None and getattr(mod, "__name__", "").startswith("rankwise"):
            mod.atomic_write = plain


def child(name: str, payload: str, target: str, plain: bool) -> None:
    """A writer process: load what to write, say READY, wait for GO on stdin, write, say DONE."""
    import pickle

    import rankwise.data  # noqa: F401  (the writers' modules loaded before the clock starts)

    if plain:
        _plain_open_writes()
    if name.endswith("(two renames)"):  # no RENAME_EXCHANGE: old folder -> backup, new folder -> name
        import rankwise._io as io_mod

        io_mod._exchange = lambda a, b: False
    with open(payload, "rb") as fh:
        obj = pickle.load(fh)
    print("READY", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    _write(name, obj, target)
    print(f"DONE {time.perf_counter() - t0:.6f}", flush=True)


class _Children:
    """Writer processes started ahead of time (a fresh interpreter starts in seconds on a busy machine)."""

    def __init__(self, name, payload, target, plain, total, ahead=3):
        self.args = (name, str(payload), str(target), plain)
        self.left = total - min(ahead, total)
        self.ready = [self._spawn() for _ in range(min(ahead, total))]

    def _spawn(self):
        name, payload, target, plain = self.args
        env = dict(os.environ, OMP_NUM_THREADS="1", RANKWISE_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, payload, target]
        return subprocess.Popen(cmd + (["--plain"] if plain else []), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def start(self):
        """A child that has loaded its data, told to write now."""
        p = self.ready.pop(0)
        if self.left > 0:
            self.left -= 1
            self.ready.append(self._spawn())
        line = p.stdout.readline()
        if not line.startswith("READY"):
            p.kill()
            raise RuntimeError(f"a writer did not start: {p.communicate()[1][-2000:]}")
        p.stdin.write("GO\n")
        p.stdin.flush()
        return p

    def close(self):
        for p in self.ready:
            p.kill()
            p.communicate()


def _snapshot(path: Path):
    """The bytes under a name: a file's, or a folder's files (name -> bytes); None if absent."""
    if path.is_dir():
        return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}
    return path.read_bytes() if path.exists() else None


def _copy(src: Path, dst: Path) -> None:
    if dst.is_dir():
        shutil.rmtree(dst)
    elif dst.exists():
        dst.unlink()
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def _temps(folder: Path) -> list[Path]:
    from rankwise._io import is_temp_name

    return [p for p in folder.rglob("*") if is_temp_name(p.name)]


def kill_trials(name: str, kills: int, scale: float, rng: random.Random, work: Path, plain=False) -> dict:
    import pickle

    from rankwise.errors import RankwiseError

    suffix = SUFFIX.get(name, ".txt")
    ref_old, ref_new = work / f"old{suffix}", work / f"new{suffix}"
    _write(name, _prepare(name, 0, scale), ref_old)
    payload = _prepare(name, 1, scale)
    _write(name, payload, ref_new)
    old, new = _snapshot(ref_old), _snapshot(ref_new)
    with open(work / "payload.pkl", "wb") as fh:
        pickle.dump(payload, fh)
    trial_dir = work / "trials"
    trial_dir.mkdir()
    target = trial_dir / f"target{suffix}"
    children = _Children(name, work / "payload.pkl", target, plain, kills + 1)
    try:
        _copy(ref_old, target)
        p = children.start()  # one uninterrupted write: how long a write takes
        out, err = p.communicate(timeout=600)
        if p.returncode != 0 or _snapshot(target) != new:
            raise RuntimeError(f"{name}: an uninterrupted write failed or differs:\n{err[-2000:]}")
        seconds = float(out.split("DONE")[1])
        row = dict(writer=name + (" (plain open)" if plain else ""), trials=0, old=0, new=0, refused=0, torn=0,
                   torn_accepted=0, temps=0, temps_after=0, restored=0, write_s=seconds)
        for _ in range(kills):
            _copy(ref_old, target)
            p = children.start()
            time.sleep(rng.uniform(0, 1.1 * seconds))
            p.send_signal(signal.SIGKILL)
            p.communicate()
            row["trials"] += 1
            stray = _temps(trial_dir)
            if name.startswith("RankingDataset.save"):  # what the next load does first
                from rankwise._io import recover_folder

                missing = not target.exists()
                recover_folder(target)
                row["restored"] += missing and target.exists()
            got = _snapshot(target)
            if got == old:
                row["old"] += 1
            elif got == new:
                row["new"] += 1
            else:
                try:
                    _read(name, target)
                except (RankwiseError, FileNotFoundError):
                    row["refused" if name.startswith("RankingDataset.save") and not plain else "torn"] += 1
                else:
                    row["torn"] += 1
                    row["torn_accepted"] += 1
            row["temps"] += len(stray)
            if _temps(trial_dir):  # the next write to the same target removes them
                _write(name, payload, target)
                row["temps_after"] += len(_temps(trial_dir))
                for t in _temps(trial_dir):
                    shutil.rmtree(t) if t.is_dir() else t.unlink()
    finally:
        children.close()
    shutil.rmtree(trial_dir)
    return row


# ------------------------------------------------------------------ full disk

@contextlib.contextmanager
def small_tmpfs(kib: int):
    """A tmpfs of ``kib`` KiB (root only); yields None where it cannot be mounted."""
    folder = Path(tempfile.mkdtemp(prefix="rankwise-fulldisk-"))
    mounted = False
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount"):
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)],
                               capture_output=True, text=True)
            mounted = r.returncode == 0
        yield folder if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def full_disk(names, scale: float) -> list[dict]:
    """Each writer over a previous file on a 256 KiB tmpfs, with a new file larger than the space left."""
    from rankwise.errors import WriteError

    rows = []
    with small_tmpfs(256) as disk:
        if disk is None:
            return [dict(writer=n, result="skipped: no tmpfs (needs root)") for n in names]
        for name in names:
            suffix = SUFFIX.get(name, ".txt")
            target = disk / f"target{suffix}"
            _write(name, _prepare(name, 0, 0.02), target)  # a small previous file
            before = _snapshot(target)
            payload = _prepare(name, 1, max(scale, 0.5))
            row = dict(writer=name, error="—", names_path=False, previous_intact=False, temps_left=0)
            try:
                _write(name, payload, target)
            except WriteError as exc:
                row["error"] = "WriteError"
                row["names_path"] = str(target) in str(exc) and ".rankwise-tmp-" not in str(exc)
            except Exception as exc:  # noqa: BLE001 (what else came is the finding)
                row["error"] = f"{type(exc).__name__} (not a rankwise error)"
            row["previous_intact"] = _snapshot(target) == before
            row["temps_left"] = len(_temps(disk))
            rows.append(row)
            _copy_clear(disk)
    return rows


def _copy_clear(folder: Path) -> None:
    for p in folder.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


# ------------------------------------------------------------------ report

def kill_table(rows) -> str:
    head = ("| writer | trials | old intact | new complete | refused (folder) | torn left | torn silently accepted "
            "| stray temps | left after next write | restored (folder) | write time (s) |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    body = [f"| {r['writer']} | {r['trials']} | {r['old']} | {r['new']} | {r['refused']} | {r['torn']} | "
            f"{r['torn_accepted']} | {r['temps']} | {r['temps_after']} | {r['restored']} | {r['write_s']:.2f} |"
            for r in rows]
    return "\n".join([head] + body)


def disk_table(rows) -> str:
    if rows and "result" in rows[0]:
        return "\n".join(f"- {r['writer']}: {r['result']}" for r in rows)
    head = ("| writer (256 KiB tmpfs) | error | names the target | previous file intact | temps left |\n"
            "|---|---|---|---|---:|")
    body = [f"| {r['writer']} | {r['error']} | {'yes' if r['names_path'] else 'no'} | "
            f"{'yes' if r['previous_intact'] else 'no'} | {r['temps_left']} |" for r in rows]
    return "\n".join([head] + body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller files, 8 kills per writer")
    ap.add_argument("--kills", type=int, default=None, help="kill points per writer (default 30; 8 with --quick)")
    ap.add_argument("--only", nargs="*", default=None, help="writers to run (names as in the table)")
    ap.add_argument("--plain", action="store_true", help="also run the plain-open comparison rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", nargs=3, metavar=("NAME", "PAYLOAD", "TARGET"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child, plain=args.plain)
        return 0
    kills = args.kills or (8 if args.quick else 30)
    scale = 0.3 if args.quick else 1.0
    names = args.only or WRITERS
    rng = random.Random(args.seed)
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rankwise-faults-") as tmp:
        for k, name in enumerate(names):
            work = Path(tmp) / f"w{k}"
            work.mkdir()
            rows.append(kill_trials(name, kills, scale, rng, work))
            print(kill_table(rows[-1:]).splitlines()[-1], flush=True)
        if args.plain:
            for k, name in enumerate(n for n in PLAIN if n in names):
                work = Path(tmp) / f"p{k}"
                work.mkdir()
                rows.append(kill_trials(name, kills, scale, rng, work, plain=True))
                print(kill_table(rows[-1:]).splitlines()[-1], flush=True)
    disk = full_disk(names, scale)
    text = (f"SIGKILL at random moments ({kills} per writer, seed {args.seed}; {time.time() - t0:.0f} s):\n\n"
            f"{kill_table(rows)}\n\nFull disk:\n\n{disk_table(disk)}\n")
    print("\n" + text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "faults.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
