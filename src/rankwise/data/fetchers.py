"""Data set fetchers: a cache directory, downloads from the publishers, sha256 checks.

Cache root: ``cache_dir`` if given, else ``$RANKWISE_DATA``, else ``~/.cache/rankwise/data``.
Each data set lives in a fixed layout under the root (the same as ``../shared/data``), e.g.
``MQ2008/Fold1/train.txt`` (or ``.txt.gz``) and ``ml-100k/u.data``.

Checksums: where the sha256 of a file is known (MQ2008 fold files and MovieLens 100k files, from
the verified copies described in ``shared/data/SOURCES.md``), it is checked on every fetch — of the
*uncompressed* content for fold files, so a ``.txt`` and a ``.txt.gz`` copy both verify. The
sha256 of the publishers' *archives* is not known to us; those are verified on first download
("trust on first use"): the digest is recorded in ``<root>/.rankwise-sha256.json`` and any later
download must match it.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from rankwise.errors import DataNotFoundError, InputError

__all__ = ["fetch", "DATASETS", "DatasetSpec", "cache_root"]


@dataclass(frozen=True)
class DatasetSpec:
    """Where a data set comes from and what its cached layout is."""

    name: str
    folder: str  # under the cache root
    files: tuple  # paths relative to the cache root (``.gz`` copies also accepted for .txt)
    url: str
    page: str
    archive: str  # file name of the download
    extract_to: str = ""  # folder (relative to root) the archive is extracted into
    sha256: dict = field(default_factory=dict)  # known digests of (uncompressed) files
    archive_sha256: str | None = None  # None: unknown, verified on first download


def _letor_files(folder, names=("train", "vali", "test"), ext=".txt"):
    return tuple(f"{folder}/Fold{k}/{n}{ext}" for k in range(1, 6) for n in names)


_MQ2008_SHA = {  # sha256 of the uncompressed fold files (shared/data/SOURCES.md)
    "MQ2008/Fold1/test.txt": "ce33aa98a1cc42847008f2d4280c30a52b6c8491206893cbc97e412ccb97426b",
    "MQ2008/Fold1/train.txt": "906deb7d4db46e908de7d9d8d82a9ce63a12090217a658b2524fcd860dd66bba",
    "MQ2008/Fold1/vali.txt": "971ab752d71d7b019c1c512d7ba4a05b1198bdeeda57a10dd69c62f3ac47dbb9",
    "MQ2008/Fold2/test.txt": "f754c61c4a5e2a14b330af767f12d1e88bab336219ae4f6f91a774f8f68b078e",
    "MQ2008/Fold2/train.txt": "98b2944d52cd0da6cd3d43b09cba92879197a4d4ae5b6949156e11eb3586a4f9",
    "MQ2008/Fold2/vali.txt": "ce33aa98a1cc42847008f2d4280c30a52b6c8491206893cbc97e412ccb97426b",
    "MQ2008/Fold3/test.txt": "2104c4f23f0119e0b0726bd80d1170822f37f63639879b0cf8fb43a301517903",
    "MQ2008/Fold3/train.txt": "4343556f569d7545d2b770b1737acda909cbe6ec6fc0f82f6f31b7d45bd0097b",
    "MQ2008/Fold3/vali.txt": "f754c61c4a5e2a14b330af767f12d1e88bab336219ae4f6f91a774f8f68b078e",
    "MQ2008/Fold4/test.txt": "ec7a1b9db068aa6d5e8c4d42d5f7b2a727543b9c1f79c30bed746568fb87ed03",
    "MQ2008/Fold4/train.txt": "7480d84a584ca0c1d4d9424c81824765bce29c175de1ac6c07737ecd5781c205",
    "MQ2008/Fold4/vali.txt": "2104c4f23f0119e0b0726bd80d1170822f37f63639879b0cf8fb43a301517903",
    "MQ2008/Fold5/test.txt": "971ab752d71d7b019c1c512d7ba4a05b1198bdeeda57a10dd69c62f3ac47dbb9",
    "MQ2008/Fold5/train.txt": "30236927b95d9f2b3c1a0100a325d333fa68e6cc1213db51f032750dec9d6435",
    "MQ2008/Fold5/vali.txt": "ec7a1b9db068aa6d5e8c4d42d5f7b2a727543b9c1f79c30bed746568fb87ed03",
}

_ML100K_SHA = {  # sha256 of the distribution's files (shared/data/SOURCES.md)
    "ml-100k/u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    "ml-100k/u.genre": "9757e0d3e6b298159a80dd48eaf938114690e911e39af97a76949ef1663610bb",
    "ml-100k/u.info": "5b0a40b2e47a729ee6203063f6dcf8790c2e63f5a18663e6ee318a72c5f3c27b",
    "ml-100k/u.item": "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
    "ml-100k/u.occupation": "cd5fbec9afe345d993a62fc7817df1a4a9079c4feb267b3118763b8fd942137d",
    "ml-100k/u.user": "f120e114da2e8cf314fd28f99417c94ae9ddf1cb6db8ce0e4b5995d40e90e62c",
    "ml-100k/u1.base": "ce253ec86c448b44fb3ba9a30d12dcfc2e9210cbde71efada3730c22e9ac212a",
    "ml-100k/u1.test": "18c6014a4b2c7324f250a63f8904a7b16b2b19f911129e346141507b0cbac950",
    "ml-100k/u2.base": "6c06f0b5df4b256da1a994f3ac66edc8da4d3f09bc9282df6b14d893366d703e",
    "ml-100k/u2.test": "4de658d1e04ed9104629509a2e2528fce833ac8e048280183f1df167632038c3",
    "ml-100k/u3.base": "afdc155c291c6edc41c0407e39d7462eb98d341e064f0b0a12175b80b3c4af5d",
    "ml-100k/u3.test": "0f548b51c78327de4c156461d3e430b7e5579fe2b5681586a59416e48fd35f6d",
    "ml-100k/u4.base": "219f0f4d40dfe9c5141d425f53fa91ee23ed275f14e280bbf1b50117afb064ca",
    "ml-100k/u4.test": "7c02ad0a1e7ab1083c8b9d4b627203a051dd7b5eab46d99fa44de33470de8db9",
    "ml-100k/u5.base": "a9574e59ce961eec2121627760b6e9b0974ce1637b3fe69ac32cb14a4bfab485",
    "ml-100k/u5.test": "351cc52e0d15b6c721466276fc24671d40936899e3d01fadeaf312915b8c5634",
    "ml-100k/ua.base": "67b5bcdb380c29f85d56a012ecd88612ae020f30a6730d117a334ee8203b91f2",
    "ml-100k/ua.test": "d0497e202417720f57a184ec8c66be2d1afa4ff41bb53787c57b28d6bf79bc42",
    "ml-100k/ub.base": "237254d253b6ad7de84f919d041055428646254f34ed8f562703c899430cd881",
    "ml-100k/ub.test": "d54a72d05730d5892062734b2bec73e976f9b713d18c828a18b968d6cce442da",
}

_LETOR4 = "https://www.microsoft.com/en-us/research/project/letor-learning-rank-information-retrieval/letor-4-0/"
_LETOR3 = "https://www.microsoft.com/en-us/research/project/letor-learning-rank-information-retrieval/letor-3-0/"
_MSLR = "https://www.microsoft.com/en-us/research/project/mslr/"

DATASETS: dict[str, DatasetSpec] = {
    "mq2008": DatasetSpec(
        "mq2008", "MQ2008", _letor_files("MQ2008"),
        "http://research.microsoft.com/en-us/um/beijing/projects/letor/LETOR4.0/Data/MQ2008.rar", _LETOR4,
        "MQ2008.rar", "", dict(_MQ2008_SHA)),
    "mq2007": DatasetSpec(
        "mq2007", "MQ2007", _letor_files("MQ2007"),
        "http://research.microsoft.com/en-us/um/beijing/projects/letor/LETOR4.0/Data/MQ2007.rar", _LETOR4,
        "MQ2007.rar", ""),
    "ohsumed": DatasetSpec(
        # LETOR 3.0 layout (QueryLevelNorm version); file names as in the LETOR 3.0 package
        "ohsumed", "OHSUMED",
        tuple(f"OHSUMED/QueryLevelNorm/Fold{k}/{n}.txt" for k in range(1, 6)
              for n in ("trainingset", "validationset", "testset")),
        "http://research.microsoft.com/en-us/um/beijing/projects/letor/LETOR3.0/OHSUMED.rar", _LETOR3,
        "OHSUMED.rar", ""),
    "mslr-web10k": DatasetSpec(
        "mslr-web10k", "MSLR-WEB10K", _letor_files("MSLR-WEB10K"),
        "https://api.onedrive.com/v1.0/shares/s!AtsMfWUz5l8nbOIoJ6Ks0bEMp78/root/content", _MSLR,
        "MSLR-WEB10K.zip", "MSLR-WEB10K"),
    "mslr-web30k": DatasetSpec(
        "mslr-web30k", "MSLR-WEB30K", _letor_files("MSLR-WEB30K"),
        "https://api.onedrive.com/v1.0/shares/s!AtsMfWUz5l8nbXGPBlwD1rnFdBY/root/content", _MSLR,
        "MSLR-WEB30K.zip", "MSLR-WEB30K"),
    "movielens-100k": DatasetSpec(
        "movielens-100k", "ml-100k", tuple(_ML100K_SHA),
        "https://files.grouplens.org/datasets/movielens/ml-100k.zip", "https://grouplens.org/datasets/movielens/100k/",
        "ml-100k.zip", "", dict(_ML100K_SHA)),
}

_TOFU_FILE = ".rankwise-sha256.json"


def cache_root(cache_dir=None) -> Path:
    """The cache root: ``cache_dir``, else ``$RANKWISE_DATA``, else ``~/.cache/rankwise/data``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("RANKWISE_DATA")
    return Path(env) if env else Path.home() / ".cache" / "rankwise" / "data"


def _present(root: Path, rel: str) -> Path | None:
    for cand in (root / rel, root / (rel + ".gz")):
        if cand.is_file():
            return cand
    return None


def _sha256_file(path: Path, *, uncompressed: bool) -> str:
    h = hashlib.sha256()
    opener = gzip.open if uncompressed and path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(root: Path, spec: DatasetSpec) -> None:
    for rel, want in spec.sha256.items():
        p = _present(root, rel)
        try:
            got = _sha256_file(p, uncompressed=True)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataNotFoundError(f"{p}: cannot be read ({type(exc).__name__}: {exc}); the file is truncated or "
                                    f"corrupt. Delete it and fetch {spec.name!r} again") from None
        if got != want:
            raise DataNotFoundError(f"{p}: sha256 {got} does not match the expected {want}; the file is corrupt or a "
                                    f"different version. Delete it and fetch {spec.name!r} again")


def _missing_message(spec: DatasetSpec, root: Path, missing: list, reason: str) -> str:
    shown = "\n  ".join(str(root / m) + "  (or .gz)" * m.endswith(".txt") for m in missing[:6])
    more = f"\n  ... and {len(missing) - 6} more" if len(missing) > 6 else ""
    return (f"data set {spec.name!r} is not in the cache {root} and could not be downloaded ({reason}).\n"
            f"Put these files there:\n  {shown}{more}\n"
            f"e.g. by downloading {spec.archive} from {spec.page} (direct link: {spec.url}) and extracting it into "
            f"{root / spec.extract_to if spec.extract_to else root}; or set RANKWISE_DATA (or cache_dir=) to a folder "
            "that already has this layout.")


def _download(url: str, dest: Path, *, timeout: float = 60.0) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
        for chunk in iter(lambda: resp.read(1 << 20), b""):
            h.update(chunk)
            out.write(chunk)
    tmp.replace(dest)
    return h.hexdigest()


def _safe_extract_zip(archive: Path, target: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        base = target.resolve()
        for m in zf.namelist():
            if not (base / m).resolve().is_relative_to(base):
                raise DataNotFoundError(f"{archive}: member {m!r} would extract outside {target}; refusing")
        zf.extractall(target)


def _extract(archive: Path, target: Path, spec: DatasetSpec, root: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        _safe_extract_zip(archive, target)
        return
    for tool, args in (("unrar", ["x", "-o+", str(archive), str(target) + os.sep]),
                       ("bsdtar", ["-xf", str(archive), "-C", str(target)]),
                       ("7z", ["x", "-y", f"-o{target}", str(archive)])):
        exe = shutil.which(tool)
        if exe:
            subprocess.run([exe, *args], check=True, capture_output=True)
            return
    raise DataNotFoundError(f"{archive} was downloaded but is a RAR archive and none of unrar, bsdtar or 7z is "
                            f"installed. Extract it by hand into {target} so that e.g. {root / spec.files[0]} exists.")


def fetch(name: str, cache_dir=None, *, download: bool = True, verify: bool = True) -> Path:
    """Return the local folder of data set ``name``, downloading it into the cache if needed.

    Parameters
    ----------
    name : {"mq2007", "mq2008", "ohsumed", "mslr-web10k", "mslr-web30k", "movielens-100k"}
    cache_dir : str or Path, optional
        Cache root (default ``$RANKWISE_DATA``, else ``~/.cache/rankwise/data``).
    download : bool
        If False, never touch the network (raise if the files are absent).
    verify : bool
        Check the sha256 of files whose digest is known.

    Returns
    -------
    Path
        ``<root>/<folder>``, e.g. ``<root>/MQ2008`` (with ``Fold1..5``) or ``<root>/ml-100k``.

    Raises
    ------
    DataNotFoundError
        When the files are absent and cannot be downloaded (offline), saying which files to put
        where; or when a checksum does not match.
    """
    key = str(name).lower()
    if key not in DATASETS:
        raise InputError(f"unknown data set {name!r}; known: {sorted(DATASETS)}")
    spec = DATASETS[key]
    root = cache_root(cache_dir)
    if root.exists() and not root.is_dir():
        raise InputError(f"cache folder {root} is a file, not a folder; give a folder (it is created if absent)")
    missing = [f for f in spec.files if _present(root, f) is None]
    if missing:
        if download:
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot create the cache folder {root}: {exc.strerror or exc}") from None
        if not download:
            raise DataNotFoundError(_missing_message(spec, root, missing, "download=False"))
        archive = root / "downloads" / spec.archive
        try:
            digest = _download(spec.url, archive)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DataNotFoundError(_missing_message(spec, root, missing, f"offline or unreachable: {reason}")) from None
        tofu_path = root / _TOFU_FILE
        try:
            tofu = json.loads(tofu_path.read_text()) if tofu_path.exists() else {}
            if not isinstance(tofu, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{tofu_path}: corrupt checksum record ({exc}); delete it (the next download is "
                             "trusted again)") from None
        expected = spec.archive_sha256 or tofu.get(spec.archive)
        if expected is not None and digest != expected:
            archive.unlink(missing_ok=True)
            raise DataNotFoundError(f"{spec.url}: downloaded {spec.archive} has sha256 {digest}, expected {expected}; "
                                    "refusing to use it (the download is corrupt or the publisher changed the file)")
        if expected is None:  # trust on first use: record it, later downloads must match
            tofu[spec.archive] = digest
            from rankwise._io import atomic_write

            with atomic_write(tofu_path, "w") as fh:
                fh.write(json.dumps(tofu, indent=1, sort_keys=True))
        _extract(archive, root / spec.extract_to if spec.extract_to else root, spec, root)
        missing = [f for f in spec.files if _present(root, f) is None]
        if missing:
            raise DataNotFoundError(_missing_message(spec, root, missing, f"{spec.archive} did not contain them"))
    if verify:
        _verify(root, spec)
    return root / spec.folder
