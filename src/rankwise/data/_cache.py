"""The parsed-data cache of ``read_svmlight``: entries that cannot be stale, foreign or torn.

An entry is a folder written by :meth:`RankingDataset.save` (``.npy`` arrays + ``meta.json``),
named after the data file's resolved path and the read options (its *slot*). It is served only
when

- the content digests of the data file and of the group file it used (``.query`` / ``.group``)
  equal those recorded in its ``meta.json`` (so an edit that keeps the size and mtime, or another
  file swapped in, is seen),
- every array matches the digest recorded for it (dtype, shape and bytes: a flipped byte, a NaN
  block, a column less, reversed doc ids or another data set's arrays are seen), and
- the arrays are structurally sound (``RankingDataset.load``'s checks: CSR index arrays in range
  and monotone, offsets consistent) — checked before any kernel touches them.

A damaged or foreign entry is rebuilt with one warning. An entry is written as
:meth:`RankingDataset.save` writes any folder (:func:`rankwise._io.atomic_folder`: a temporary
folder beside its slot, swapped in), so a concurrent reader sees the old entry, the new one or
none, never a half-written one (the digests would refuse it anyway). A cache root that cannot
be written (read-only, full, not a folder) means no cache, with one warning per root.

Digests: xxHash3-128 (``xxhash``) over the bytes, a fast non-cryptographic hash that catches
accidents, not forgeries; SHA-256 where ``xxhash`` is not installed.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from rankwise.data._digest import digest_algorithm, file_digest

#: bump when what an entry holds or how it is keyed changes: older entries are then never looked up
CACHE_FORMAT = 3
#: a temporary folder older than this is a killed writer's, removed by the next writer
_STALE_TMP_S = 3600.0
_WARNED_ROOTS: set[str] = set()


# ------------------------------------------------------------------------------------ warnings
def _warn(message: str) -> None:
    from rankwise._validation import warn_user

    warn_user(message)


def _warn_unwritable(root: Path, exc: OSError) -> None:
    key = str(root)
    if key in _WARNED_ROOTS:
        return
    _WARNED_ROOTS.add(key)
    what = exc.strerror or type(exc).__name__
    _warn(f"the parsed-data cache {root} cannot be used ({what}"
          f"{', errno ' + errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else ''}); "
          "reading without a cache (the data are parsed every time)")


# ------------------------------------------------------------------------------------ entries
def stat_identity(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


class Entry:
    """The cache slot of one (data file, read options) pair under ``root``."""

    def __init__(self, root, path: Path, options: dict):
        self.root = Path(root)
        self.path = Path(path)
        self.source = str(self.path.resolve())
        self.options = options
        blob = json.dumps({"source": self.source, "options": options, "format": CACHE_FORMAT}, sort_keys=True)
        self.dir = self.root / f"v{CACHE_FORMAT}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"

    # -------------------------------------------------------------- reading
    def load(self, group_file: Path | None):
        """The cached data set, or None (a miss; a damaged or foreign entry also warns once)."""
        from rankwise.data.dataset import RankingDataset

        for _ in range(3):  # a writer that replaced the entry meanwhile: look again
            before = self._inode()
            if before is None:
                if self.dir.exists() and self._inode() is None:
                    _warn(f"{self.path}: the parsed-data cache entry {self.dir} was not used: it is incomplete "
                          "(no meta.json); the file is parsed again and the entry rebuilt")
                return None
            try:
                meta = RankingDataset._read_meta(self.dir)
                problem, quiet = self._check_sources(meta, group_file)
                ds = None
                if problem is None:
                    ds = RankingDataset._from_meta(self.dir, meta, None, verify=True, strict=True)
            except FileNotFoundError as exc:
                problem, quiet = f"incomplete ({exc})", False
            except PermissionError as exc:
                _warn_unwritable(self.root, exc)
                return None
            except Exception as exc:  # InputError from the checks; anything a damaged file raises
                text = str(exc).replace(f"{self.dir}: ", "").replace("; delete the folder to rebuild it", "")
                problem, quiet = " ".join(text.split())[:300], False
            if self._inode() != before:
                continue  # replaced while being read: what was read may mix two entries
            if problem is None:
                return ds
            if not quiet:
                _warn(f"{self.path}: the parsed-data cache entry {self.dir} was not used: {problem}; "
                      "the file is parsed again and the entry rebuilt")
            return None
        return None

    def _inode(self):
        try:
            st = os.stat(self.dir / "meta.json")
            return st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_size
        except OSError:
            return None

    def _check_sources(self, meta: dict, group_file: Path | None):
        """``(problem, quiet)``: None when the entry was made from these bytes; ``quiet`` for an
        ordinary edit of the file (its size or mtime changed too: no warning)."""
        info = meta.get("svmlight_cache")
        if not isinstance(info, dict) or info.get("format") != CACHE_FORMAT:
            return "it is not an entry of this cache (another data set's or another version's)", False
        if info.get("source") != self.source or info.get("options") != self.options:
            return f"it was made from another file or with other options ({str(info.get('source'))[:200]!r})", False
        if info.get("algorithm") != digest_algorithm():
            return "its digests use another algorithm", True
        files = [("data file", self.path, info.get("data"))]
        recorded_group = info.get("group")
        if recorded_group is not None:
            if group_file is None or str(group_file.resolve()) != recorded_group.get("path"):
                return "the group file it was made with is not the one this read uses", True
            files.append(("group file", group_file, recorded_group))
        for what, p, rec in files:
            if not isinstance(rec, dict):
                return f"no digest of the {what} recorded", False
            try:
                digest = file_digest(p)
            except OSError:  # unreadable or gone: a miss; the parse that follows reports it properly
                return f"the {what} cannot be read", True
            if digest != rec.get("digest"):
                same_stat = stat_identity(p) == {"size": rec.get("size"), "mtime_ns": rec.get("mtime_ns")}
                if same_stat:
                    return (f"the {what} {p} changed although its size and modification time did not "
                            "(restored, swapped or edited by a tool that keeps the mtime)"), False
                return f"the {what} changed", True
        return None, True

    # -------------------------------------------------------------- writing
    def store(self, ds, data_digest: str, group_file: Path | None, group_digest: str | None,
              data_stat: dict, group_stat: dict | None) -> None:
        """Write the entry (a temporary folder, swapped in); an unwritable root warns once."""
        info = {"format": CACHE_FORMAT, "algorithm": digest_algorithm(), "source": self.source,
                "options": self.options, "data": dict(data_stat, digest=data_digest),
                "group": None if group_file is None else dict(group_stat, digest=group_digest,
                                                             path=str(group_file.resolve()))}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._remove_stale_temporaries()
            ds._save(self.dir, extra={"svmlight_cache": info}, replace_any=True)
        except OSError as exc:
            _warn_unwritable(self.root, exc)

    def _remove_stale_temporaries(self) -> None:
        """Killed writers' temporary folders of any slot, once they are an hour old (those of this
        entry's slot also go as soon as their process is gone: atomic_folder's own clean-up)."""
        from rankwise._io import is_temp_name

        now = time.time()
        try:
            names = [e for e in os.scandir(self.root) if is_temp_name(e.name)]
        except OSError:
            return
        for e in names:
            try:
                if now - e.stat(follow_symlinks=False).st_mtime > _STALE_TMP_S:
                    shutil.rmtree(e.path, ignore_errors=True)
            except OSError:
                pass

