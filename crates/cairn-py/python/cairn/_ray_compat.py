"""Every name of Ray's that is not its public API, in one place, so a Ray
upgrade touches this file: the private modules cairn's reader, manager and
table sinks build on, and the walks up the stack that find what Ray does
not hand over (the datasink and the inputs being planned, the callback
that ends a job that succeeded). Written against Ray Data 2.60."""

from __future__ import annotations

import inspect
from typing import Any, List, Optional, Tuple

import pyarrow.fs as pafs
import ray
from ray.data._internal.arrow_block import ArrowBlockAccessor
from ray.data._internal.datasource.parquet_datasource import (
    ParquetDatasource,
    _read_batches_from,
)
from ray.data._internal.datasource_v2.common.synthesized_columns import _compute_row_hashes
from ray.data._internal.delegating_block_builder import DelegatingBlockBuilder
from ray.data._internal.logical.operators import ListFiles
from ray.data._internal.object_extensions.arrow import raise_on_pickle_object_columns
from ray.data._internal.planner.plan_expression.expression_visitors import (
    get_column_references,
)
from ray.data._internal.planner.plan_write_op import WRITE_UUID_KWARG_NAME
from ray.data._internal.util import iterate_with_retry
from ray.data.checkpoint.checkpoint_filter import CheckpointFilter as RayCheckpointFilter
from ray.data.checkpoint.checkpoint_filter import CheckpointManager as RayCheckpointManager
from ray.data.checkpoint.load_checkpoint_callback import LoadCheckpointCallback
from ray.data.datasource.file_datasink import _FileDatasink as FileDatasink
from ray.data.datasource.filename_provider import _split_base_and_ext as split_base_and_ext
from ray.data.datasource.path_util import _unwrap_protocol as unwrap_protocol

__all__ = [
    "ArrowBlockAccessor",
    "DelegatingBlockBuilder",
    "FileDatasink",
    "LoadCheckpointCallback",
    "ParquetDatasource",
    "RayCheckpointFilter",
    "RayCheckpointManager",
    "WRITE_UUID_KWARG_NAME",
    "called_on_rays_success",
    "compute_row_hashes",
    "datasink_being_planned",
    "get_column_references",
    "inputs_being_planned",
    "iterate_with_retry",
    "raise_on_pickle_object_columns",
    "read_batches_from",
    "split_base_and_ext",
    "unwrap_protocol",
    "unwrapped",
]

compute_row_hashes = _compute_row_hashes
read_batches_from = _read_batches_from


def unwrapped(filesystem: Any) -> Any:
    """The filesystem under pyarrow wrappers that carry another one: Ray
    wraps every sink's filesystem in its ``RetryingPyFileSystem``, whose
    handler gives the wrapped one back with ``unwrap()``."""
    for _ in range(8):
        if not isinstance(filesystem, pafs.PyFileSystem):
            break
        unwrap = getattr(filesystem.handler, "unwrap", None)
        if not callable(unwrap):
            break
        filesystem = unwrap()
    return filesystem


def datasink_being_planned() -> Any:
    """The datasink of the plan Ray is planning, or None: the planner's
    ``logical_plan`` found up the stack (Ray does not hand the sink to the
    checkpoint manager)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            plan = frame.f_locals.get("logical_plan")
            sink = getattr(getattr(plan, "dag", None), "datasink_or_legacy_datasource", None)
            if sink is not None:
                return sink
            frame = frame.f_back
    finally:
        del frame
    return None


def inputs_being_planned() -> Optional[List[Tuple[List[str], Any]]]:
    """The file inputs of the plan Ray is planning, as (paths, pyarrow
    filesystem) per read, or None when a source is not a file read cairn
    knows (Ray 2.60's ``ListFiles`` of ``read_parquet`` and the file-based
    datasources' ``Read``, cairn's reader among them)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            plan = frame.f_locals.get("logical_plan")
            dag = getattr(plan, "dag", None)
            if dag is not None and hasattr(dag, "input_dependencies"):
                return _file_sources(dag)
            frame = frame.f_back
    finally:
        del frame
    return None


def _file_sources(op: Any) -> Optional[List[Tuple[List[str], Any]]]:
    parents = list(getattr(op, "input_dependencies", None) or [])
    if not parents:
        if isinstance(op, ListFiles) and op.filesystem is not None:
            paths = list(op.paths)
            filesystem = op.filesystem
        else:
            # Ray 2.60's Read names it ``datasource``; the legacy wrapper
            # ``_datasource``.
            datasource = getattr(op, "datasource", None) or getattr(op, "_datasource", None)
            paths_ref = getattr(datasource, "_source_paths_ref", None)
            filesystem = getattr(datasource, "_filesystem", None)
            if paths_ref is None or filesystem is None:
                return None
            found = ray.get(paths_ref)
            paths = [found] if isinstance(found, str) else list(found)
        if any(str(p).startswith(("http://", "https://")) for p in paths):
            return None  # kept whole by Ray's resolution; not listed here
        return [([unwrap_protocol(str(p)) for p in paths], filesystem)]
    sources: List[Tuple[List[str], Any]] = []
    for parent in parents:
        found = _file_sources(parent)
        if found is None:
            return None
        sources.extend(found)
    return sources


def called_on_rays_success() -> bool:
    """Whether Ray's checkpoint callback, ending a job that succeeded, is
    up the stack: the only caller whose delete means the job finished."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "after_execution_succeeds" and isinstance(
                frame.f_locals.get("self"), LoadCheckpointCallback
            ):
                return True
            frame = frame.f_back
    finally:
        del frame
    return False
