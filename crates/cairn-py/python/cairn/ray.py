"""cairn's checkpoint machinery for Ray Data 2.60 job-level checkpointing.

Ray stays the engine and its writer stays Ray's (pending file, data files,
rename to committed). cairn replaces the two pieces that run on resume:

- :class:`CheckpointManager` (``checkpoint_manager_cls``) settles the units
  a killed run left pending with cairn's recovery (a unit owns only the data
  files named ``<unit>_...``, ``<unit>-...`` or ``<unit>.<ext>``, so a
  committed unit whose name extends a pending one keeps its data, which
  Ray's prefix trie does not guarantee), refuses a checkpoint bound to another output or whose
  committed data is gone, and loads the committed IDs in Rust, in parallel,
  into cairn's compact ID set;
- :class:`CheckpointFilter` (``checkpoint_filter_cls``) uses that set where
  it lies in Ray's shared object store (one copy per machine, not one per
  actor) and drops committed rows block by block in Rust, through the Arrow
  C Data Interface, keeping row order.

:func:`checkpoint_config` returns a ``CheckpointConfig`` wired with both
and with :func:`cairn.build_checkpoint_filesystem`::

    from ray.data import DataContext
    import cairn.ray

    DataContext.get_current().checkpoint_config = cairn.ray.checkpoint_config(
        "uid", "s3://bucket/ckpt/job-1", storage_options={"s3": {...}}
    )

The ID may be a composite key (``["video", "shot_idx"]``), and the filter
may be placed after the step that makes it (:func:`skip_committed`, for a
1:N explode) instead of after the read.
"""

from __future__ import annotations

from ._ray_delta import DeltaDatasink, DeltaUnitLog
from ._ray_iceberg import IcebergDatasink, IcebergUnitLog
from ._ray_lance import LanceDatasink, LanceUnitLog
from ._ray_manager import (
    CheckpointFilter,
    CheckpointManager,
    checkpoint_config,
)
from ._ray_metrics import flush_metrics, report_metrics
from ._ray_read import SkippingParquetDatasource, read_parquet
from ._ray_shards import ShardActor, ShardedSet, ShardUnavailable
from ._ray_skip import skip_committed
from ._ray_table import UnitTakenOver

__all__ = [
    "CheckpointFilter",
    "CheckpointManager",
    "DeltaDatasink",
    "DeltaUnitLog",
    "IcebergDatasink",
    "IcebergUnitLog",
    "LanceDatasink",
    "LanceUnitLog",
    "ShardActor",
    "ShardUnavailable",
    "ShardedSet",
    "SkippingParquetDatasource",
    "UnitTakenOver",
    "checkpoint_config",
    "flush_metrics",
    "read_parquet",
    "report_metrics",
    "skip_committed",
]
