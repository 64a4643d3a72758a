"""Content digests of files, bytes and arrays (xxh3-128, else SHA-256): what the parsed-data cache and
``RankingDataset.save`` record, and what they check on load."""
from __future__ import annotations

import hashlib
import mmap

import numpy as np

try:  # a hard dependency; the fallback only keeps a broken install working
    import xxhash
except ImportError:  # pragma: no cover
    xxhash = None

_CHUNK = 1 << 20


def digest_algorithm() -> str:
    return "xxh3_128" if xxhash is not None else "sha256"


def _hasher(algorithm: str):
    if algorithm == "xxh3_128":
        if xxhash is None:
            return None
        return xxhash.xxh3_128()
    if algorithm == "sha256":
        return hashlib.sha256()
    return None


def bytes_digest(data) -> str:
    """Digest of a bytes-like object (the bytes of a file as read)."""
    h = _hasher(digest_algorithm())
    h.update(data)
    return h.hexdigest()


def file_digest(path) -> str:
    """Digest of a file's bytes, through a read-only memory map (no copy; memory stays flat for
    large files), else read in 1 MiB chunks (an empty file, a pipe)."""
    h = _hasher(digest_algorithm())
    with open(path, "rb", buffering=0) as fh:
        try:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                h.update(m)
                return h.hexdigest()
        except (ValueError, OSError):
            pass
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()


def array_digest(arr: np.ndarray, algorithm: str | None = None) -> str | None:
    """Digest of an array's dtype, shape and bytes (C order); None for an unknown algorithm."""
    h = _hasher(algorithm or digest_algorithm())
    if h is None:
        return None
    arr = np.ascontiguousarray(arr)
    h.update(f"{arr.dtype.str}|{arr.shape}|".encode())
    h.update(memoryview(arr).cast("B") if arr.size else b"")
    return h.hexdigest()
