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

A *folder* (``RankingDataset.save``, the parsed-data cache) is written the same way by
:func:`atomic_folder`: into a temporary folder beside the target (same parent, same hidden name
pattern), every file in it fsynced, then swapped in. A folder cannot be renamed over a non-empty
one, so the swap is Linux's ``renameat2(RENAME_EXCHANGE)`` where the C library and the file system
offer it: one atomic step after which the old folder sits under the temporary name and is removed,
so the target name always holds the complete old folder or the complete new one. Elsewhere the old
folder is first renamed to a backup, ``.NAME.rankwise-old-PID-XXXXXXXX``, then the new one takes
the name and the backup is removed; a writer killed between those two renames leaves the name
empty for a moment, and the next save or load of that name (:func:`recover_folder`) renames the
dead writer's backup back. (A versioned folder behind an atomically replaced symlink was the other
choice; it would turn the saved folder into a link, which copies and archives of it do not expect.)
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from rankwise.errors import InputError, RankwiseError, WriteError

__all__ = ["atomic_write", "atomic_folder", "recover_folder", "check_target", "is_temp_name", "write_error",
           "TEMP_MARK", "OLD_MARK"]

#: what every temporary file name holds: ``.NAME`` + TEMP_MARK + ``PID-RANDOM``
TEMP_MARK = ".rankwise-tmp-"
#: a folder's previous version while :func:`atomic_folder` swaps (no RENAME_EXCHANGE): ``.NAME`` + OLD_MARK + ...
OLD_MARK = ".rankwise-old-"
_TEMP_RE = re.compile(r"\.(?P<name>.+)" + re.escape(TEMP_MARK) + r"(?P<pid>[0-9]+)-[A-Za-z0-9_]+\Z")
_OLD_RE = re.compile(r"\.(?P<name>.+)" + re.escape(OLD_MARK) + r"(?P<pid>[0-9]+)-[A-Za-z0-9_]+\Z")
_STALE_AGE_S = 24 * 3600
_UMASK = None


def is_temp_name(name: str) -> bool:
    """Whether a name is one of :func:`atomic_write`'s / :func:`atomic_folder`'s temporary files or
    folders, or a folder's backup during a swap (never data)."""
    base = os.path.basename(name)
    return _TEMP_RE.match(base) is not None or _OLD_RE.match(base) is not None


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
    """Remove temporary files and folders a killed writer left for ``name``: those whose process is
    gone or that are older than a day (only names of this helper's pattern, for this one target).
    A dead folder writer's backup (:data:`OLD_MARK`) is renamed back to ``name`` when nothing holds
    that name (it was killed between its two renames), removed otherwise."""
    prefix = "." + name
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(prefix)]
    except OSError:
        return
    now = time.time()
    for entry in entries:
        m = _TEMP_RE.match(entry.name) or _OLD_RE.match(entry.name)
        if m is None or m.group("name") != name:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_AGE_S
            if not (old or not _pid_alive(int(m.group("pid")))):
                continue
            if m.re is _OLD_RE and not os.path.lexists(folder / name):
                os.rename(entry.path, folder / name)  # the previous folder back under its name
            else:
                _remove(entry.path)
        except OSError:
            pass  # gone already, or not ours to remove: the write goes on


def recover_folder(path) -> None:
    """Tidy what a killed :func:`atomic_folder` left beside ``path`` (see :func:`_remove_stale_temps`);
    called by the next save and by a load that finds ``path`` missing."""
    path = Path(os.fspath(path))
    _remove_stale_temps(path.parent, path.name)


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


# ------------------------------------------------------------------ folders

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_RENAMEAT2 = []  # [the C function or None], looked up once


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the C library or the file system cannot (the caller then renames in two steps)."""
    if not _RENAMEAT2:
        fn = None
        if os.name == "posix":
            import ctypes

            with contextlib.suppress(OSError, AttributeError):
                fn = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
        _RENAMEAT2.append(fn)
    fn = _RENAMEAT2[0]
    if fn is None:
        return False
    import ctypes

    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):  # not offered here
        return False
    raise OSError(err, os.strerror(err), str(b))  # ENOENT is FileNotFoundError


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then the folders themselves (innermost first)."""
    for root, _dirs, files in os.walk(folder, topdown=False):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def _remove(path) -> None:
    """Remove a folder or a file, as far as possible (what is left is a stale temporary, by name)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _swap_in(tmp: Path, path: Path) -> None:
    """Give the finished folder ``tmp`` the name ``path``, replacing the folder there (see the module)."""
    for _ in range(10):
        try:
            os.rename(tmp, path)  # nothing (or an empty folder) there: one atomic rename
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
        try:
            if _exchange(tmp, path):  # the previous folder is now under tmp's name
                _remove(tmp)
                return
        except FileNotFoundError:
            continue  # another writer moved the name away meanwhile: try again
        backup = path.parent / f".{path.name}{OLD_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, backup)
        except FileNotFoundError:
            continue  # another writer is swapping: try again
        try:
            os.rename(tmp, path)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):  # put the previous folder back
                with contextlib.suppress(OSError):
                    os.rename(backup, path)
                raise
            _remove(backup)  # another writer's new folder got there first
            continue
        _remove(backup)
        return
    raise OSError(errno.EBUSY, "other writers keep replacing this folder", str(path))


def _named_in_target(exc: OSError, tmp: Path, path: Path) -> Path:
    """The path an error inside the temporary folder is about, under the target's name."""
    name = exc.filename if isinstance(exc.filename, str) else None
    if name and name.startswith(str(tmp) + os.sep):
        return path / os.path.relpath(name, tmp)
    return path


@contextlib.contextmanager
def atomic_folder(path, *, replaceable=None):
    """Yield a new empty folder beside ``path``; on a normal exit it replaces ``path`` atomically.

    Write the files into the yielded folder (plain ``open`` is enough: each is fsynced before the
    swap). ``replaceable(path)``, called when ``path`` exists, raises if it is not what this writer
    may replace (a file, a folder of the user's own files); None: anything under that name is
    replaced (a name rankwise owns, such as a cache slot). The parent folders are
    created. On an exception nothing changes under ``path`` and the temporary folder is removed;
    an ``OSError`` is raised as :class:`~rankwise.errors.WriteError` naming ``path`` (or the file
    in it that could not be written), never the temporary name.
    """
    path = Path(os.fspath(path))
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc) from None
    recover_folder(path)
    if replaceable is not None and os.path.lexists(path):
        replaceable(path)
    try:
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{path.name}{TEMP_MARK}{os.getpid()}-"))
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
        _fsync_tree(tmp)
        _swap_in(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and (isinstance(exc, WriteError) or not isinstance(exc, RankwiseError)):
            raise write_error(_named_in_target(exc, tmp, path), exc) from None
        raise
    _fsync_dir(parent)
