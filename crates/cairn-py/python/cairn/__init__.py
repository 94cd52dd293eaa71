"""cairn for Python: a Rust-backed fsspec filesystem over every cairn scheme,
and pyarrow filesystems for Ray Data checkpoints.

    >>> import cairn
    >>> fs = cairn.fsspec.CairnFileSystem("memory")
    >>> fs.pipe_file("/doc/a", b"abc")
    >>> fs.cat_file("/doc/a")
    b'abc'
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Optional

from . import fsspec
from ._metrics import metrics, metrics_text
from ._native import CheckpointError
from .fsspec import CairnFileSystem

__all__ = [
    "CairnFileSystem",
    "CheckpointError",
    "build_checkpoint_filesystem",
    "fsspec",
    "metrics",
    "metrics_text",
]

_PROTOCOLS = {"s3", "s3a", "cos", "oss", "gcs", "gs", "tclake", "file", "local", "memory"}


def _protocol_of(path: str) -> str:
    return path.split("://", 1)[0].lower() if "://" in path else "file"


def build_checkpoint_filesystem(
    path: str, storage_options: Optional[Mapping[str, Any]] = None
) -> Any:
    """A ``pyarrow.fs.FileSystem`` over cairn for Ray Data's
    ``CheckpointConfig(override_filesystem=...)``, ``read_parquet`` and
    ``write_parquet`` (``filesystem=``) and ``pyarrow.dataset``: the
    checkpoint-storage preset (listing cache off), for the protocol of
    ``path``.

    ``storage_options`` is either keyed by protocol, as in the Xpark
    documentation (``{"cos": {...}}``), or the options of ``path``'s
    protocol themselves (``{"endpoint_url": ...}``).
    """
    try:
        from ._arrow_fs import arrow_filesystem
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "build_checkpoint_filesystem returns a pyarrow filesystem: pip install pyarrow"
        ) from e
    protocol = _protocol_of(path)
    options = dict(storage_options or {})
    if options and all(k.lower() in _PROTOCOLS for k in options):
        aliases = {"s3a": "s3", "gs": "gcs", "local": "file"}
        wanted = aliases.get(protocol, protocol)
        picked: dict = {}
        for key, value in options.items():
            if aliases.get(key.lower(), key.lower()) == wanted:
                picked.update(value or {})
        options = picked
    fs = CairnFileSystem(protocol=protocol, checkpoint=True, **options)
    return arrow_filesystem(fs)


# A Ray worker of a job whose runtime environment asks for it reports
# cairn's metrics to Ray (cairn.ray.report_metrics).
if os.environ.get("CAIRN_RAY_METRICS_INTERVAL_S") and "ray" in sys.modules:
    from ._ray_metrics import start_from_environment

    start_from_environment()
