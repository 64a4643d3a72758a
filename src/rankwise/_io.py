"""Atomic file writes: every file rankwise writes goes through :func:`atomic_write`.

The bottom layer, beside :mod:`rankwise._validation`: it imports nothing from rankwise but the
errors. What it guarantees, whatever happens while writing (an exception, a full disk, a
read-only folder, the process killed with SIGKILL, a power cut after the call returned):

* the target name holds either the previous file, untouched, or the complete new one, never a
  prefix of it. The bytes go to a temporary file in the target's own folder, named
  ``.NAME.rankwise-tmp-PID-XXXXXXXX`` (hidden, so ``*`` globs skip it), which is flushed and
  fsynced, then renamed over the target (``os.replace``, atomic on POSIX and Windows); the folder
  is fsynced so that the rename itself survives a power cut;
* an ``OSError`` (``ENOSPC``, ``EACCES``, ``EROFS``, ``EDQUOT``...) becomes one
  :class:`~rankwise.errors.WriteError` naming the target path (never the temporary one) and the
  reason; the temporary file is removed on any exception;
* the temporary file of a writer that was killed (SIGKILL leaves no chance to remove it) is
  removed by the next write to the same target: a temp whose process is gone, or one older than
  a day. No reader opens these names.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import tempfile
import time
from pathlib import Path

from rankwise.errors import InputError, RankwiseError, WriteError

__all__ = ["atomic_write", "check_target", "is_temp_name", "write_error", "TEMP_MARK"]

#: what every temporary file name holds: ``.NAME`` + TEMP_MARK + ``PID-RANDOM``
TEMP_MARK = ".rankwise-tmp-"
_TEMP_RE = re.compile(r"\.(?P<name>.+)" + re.escape(TEMP_MARK) + r"(?P<pid>[0-9]+)-[A-Za-z0-9_]+\Z")
_STALE_AGE_S = 24 * 3600
_UMASK = None


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of :func:`atomic_write`'s temporary files (never data)."""
    return _TEMP_RE.match(os.path.basename(name)) is not None


def _umask() -> int:
    global _UMASK
    if _UMASK is None:  # read once: os.umask can only be read by setting it
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return _UMASK


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's live process
        return True
    return True


def _remove_stale_temps(folder: Path, name: str) -> None:
    """Remove temporary files a killed writer left for ``name``: those whose process is gone or
    that are older than a day (only names of this helper's pattern, for this one target)."""
    prefix = "." + name + TEMP_MARK
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(prefix)]
    except OSError:
        return
    now = time.time()
    for entry in entries:
        m = _TEMP_RE.match(entry.name)
        if m is None or m.group("name") != name:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_AGE_S
            if old or not _pid_alive(int(m.group("pid"))):
                os.unlink(entry.path)
        except OSError:
            pass  # gone already, or not ours to remove: the write goes on


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a platform without directory handles (Windows): the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory (EINVAL): nothing more can be done
    finally:
        os.close(fd)


def write_error(path, exc: OSError) -> WriteError:
    """The :class:`~rankwise.errors.WriteError` for ``exc`` raised while writing ``path``."""
    code = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or str(exc) or type(exc).__name__
    err = WriteError(f"cannot save to {path}: {reason}{f' [{code}]' if code else ''}; nothing was written under "
                     "that name (a previous file there is unchanged)")
    err.errno, err.strerror, err.filename = exc.errno, exc.strerror, str(path)
    return err


def check_target(path) -> Path:
    """``path`` as a ``Path`` after the checks any write needs: its folder exists, it is not a folder."""
    path = Path(os.fspath(path))
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"cannot save to {path}: directory {folder} does not exist")
    if path.is_dir():
        raise InputError(f"cannot save to {path}: it is a directory; give a file name")
    return path


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb", *, encoding: str | None = None, newline: str | None = None):
    """Open a temporary file next to ``path``; on a normal exit it replaces ``path`` atomically.

    ``mode`` is ``"wb"`` or ``"w"`` (text, with ``encoding``, default UTF-8, and ``newline``).
    On an exception nothing changes under ``path`` and the temporary file is removed; an
    ``OSError`` is raised as :class:`~rankwise.errors.WriteError` naming ``path``.

    >>> with atomic_write(tmp / "run.txt", "w") as fh:  # doctest: +SKIP
    ...     fh.write("1 Q0 d1 1 0.5 rankwise\\n")
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb'; got {mode!r}")
    path = check_target(path)
    folder = path.parent
    _remove_stale_temps(folder, path.name)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}{TEMP_MARK}{os.getpid()}-", suffix="")
    except OSError as exc:
        raise write_error(path, exc) from None
    raw = os.fdopen(fd, "wb")
    fh = raw if mode == "wb" else io.TextIOWrapper(raw, encoding=encoding or "utf-8", newline=newline)
    try:
        yield fh
        fh.flush()
        os.fsync(raw.fileno())
        fh.close()
        try:  # mkstemp makes the file private (0600); give it what a plain open would (or the old file's mode)
            mode_bits = os.stat(path).st_mode & 0o7777
        except OSError:
            mode_bits = 0o666 & ~_umask()
        os.chmod(tmp, mode_bits)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError, ValueError):
            fh.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, RankwiseError):  # ENOSPC, EIO, EDQUOT...
            raise write_error(path, exc) from None
        raise
    _fsync_dir(folder)
