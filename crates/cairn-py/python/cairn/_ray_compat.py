"""Every name of Ray's that is not its public API, in one place, so a Ray
upgrade touches this file: the private modules cairn's reader, manager and
table sinks build on, and the walks up the stack that find what Ray does
not hand over (the datasink and the inputs being planned, the callback
that ends a job that succeeded), and the planning of the checkpoint
filter operator for cairn's manager. Written against Ray Data 2.60."""

from __future__ import annotations

import inspect
from typing import Any, Callable, List, Optional, Tuple

import pyarrow.fs as pafs
import ray
from ray.data._internal.arrow_block import ArrowBlockAccessor
from ray.data._internal.datasource.parquet_datasource import (
    ParquetDatasource,
    _read_batches_from,
)
from ray.data._internal.datasource_v2.common.synthesized_columns import _compute_row_hashes
from ray.data._internal.delegating_block_builder import DelegatingBlockBuilder
from ray.data._internal.cluster_autoscaler.util import is_autoscaling_enabled
from ray.data._internal.compute import ActorPoolStrategy
from ray.data._internal.execution.interfaces.task_context import TaskContext
from ray.data._internal.execution.operators.map_operator import MapOperator
from ray.data._internal.logical.operators import ListFiles
from ray.data._internal.object_extensions.arrow import raise_on_pickle_object_columns
from ray.data._internal.planner.plan_expression.expression_visitors import (
    get_column_references,
)
from ray.data._internal.planner.checkpoint import plan_read_files_op as _plan_read_files_op
from ray.data._internal.planner.checkpoint import plan_read_op as _plan_read_op
from ray.data._internal.planner.checkpoint import plan_write_op as _plan_write_op
from ray.data._internal.planner.plan_write_op import (
    PENDING_CHECKPOINTS_KWARG_NAME,
    WRITE_UUID_KWARG_NAME,
)
from ray.data._internal.util import _autodetect_parallelism, call_with_retry, iterate_with_retry
from ray.data.checkpoint.checkpoint_filter import CheckpointFilter as RayCheckpointFilter
from ray.data.checkpoint.checkpoint_filter import CheckpointManager as RayCheckpointManager
from ray.data.checkpoint.checkpoint_writer import BatchBasedCheckpointWriter
from ray.data.checkpoint.checkpoint_writer import CheckpointWriter as RayCheckpointWriter
from ray.data.checkpoint.checkpoint_writer import PENDING_CHECKPOINT_SUFFIX, PendingCheckpoint
from ray.data.checkpoint.load_checkpoint_callback import LoadCheckpointCallback
from ray.data.block import BlockAccessor
from ray.data.context import DataContext
from ray.data.datasource.file_datasink import _FileDatasink as FileDatasink
from ray.data.datasource.filename_provider import _split_base_and_ext as split_base_and_ext
from ray.data.datasource.path_util import _unwrap_protocol as unwrap_protocol

__all__ = [
    "ArrowBlockAccessor",
    "BatchBasedCheckpointWriter",
    "PendingCheckpoint",
    "call_with_retry",
    "plan_checkpoint_writer",
    "FilterPool",
    "PlannedWork",
    "DelegatingBlockBuilder",
    "FileDatasink",
    "LoadCheckpointCallback",
    "PENDING_CHECKPOINT_SUFFIX",
    "ParquetDatasource",
    "RayCheckpointFilter",
    "RayCheckpointManager",
    "WRITE_UUID_KWARG_NAME",
    "called_on_rays_success",
    "current_task_context",
    "cluster_can_grow",
    "compute_row_hashes",
    "datasink_being_planned",
    "default_read_blocks",
    "get_column_references",
    "inputs_being_planned",
    "pending_records",
    "plan_filter_operator",
    "plan_pending_ids",
    "NO_DATA_FILES",
    "logical_ops_of",
    "ops_being_planned",
    "task_attempt",
    "work_being_planned",
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
    """The datasink of the plan Ray is planning, or None: the sink of the
    planner's ``logical_plan`` found up the stack (Ray does not hand the
    sink to the checkpoint manager)."""
    return getattr(_dag_being_planned(), "datasink_or_legacy_datasource", None)


def _dag_being_planned() -> Any:
    """The logical plan's DAG Ray is planning (found up the stack), or None."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            plan = frame.f_locals.get("logical_plan")
            dag = getattr(plan, "dag", None)
            if dag is not None and hasattr(dag, "input_dependencies"):
                return dag
            frame = frame.f_back
    finally:
        del frame
    return None


def logical_ops_of(dag: Any) -> List[Any]:
    """Every operator of the logical plan ``dag``, each once."""
    seen: dict = {}
    stack = [dag]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        stack.extend(getattr(op, "input_dependencies", None) or [])
    return list(seen.values())


def ops_being_planned() -> Optional[List[Any]]:
    """The operators of the logical plan Ray is planning, or None."""
    dag = _dag_being_planned()
    return None if dag is None else logical_ops_of(dag)


def inputs_being_planned() -> Optional[List[Tuple[List[str], Any]]]:
    """The file inputs of the plan Ray is planning, as (paths, pyarrow
    filesystem) per read, or None when a source is not a file read cairn
    knows (Ray 2.60's ``ListFiles`` of ``read_parquet`` and the file-based
    datasources' ``Read``, cairn's reader among them)."""
    dag = _dag_being_planned()
    return None if dag is None else _file_sources(dag)


def default_read_blocks(datasource: Any) -> int:
    """The number of blocks Ray's read operator aims for when a read gives
    none (``override_num_blocks`` unset): its autodetected parallelism,
    from ``DataContext.read_op_min_num_blocks`` (200), the data's
    estimated size and the cluster's CPUs."""
    context = DataContext.get_current()
    detected, _, _ = _autodetect_parallelism(-1, context.target_max_block_size, context, datasource)
    return int(detected)


def cluster_can_grow() -> bool:
    """Whether the cluster's autoscaler can add nodes (a node type whose
    most nodes is more than its fewest), as Ray Data judges it; False
    when Ray cannot say."""
    try:
        return bool(is_autoscaling_enabled())
    except Exception:  # noqa: BLE001 - no cluster config: a fixed cluster
        return False


class PlannedWork:
    """What the plan Ray is planning keeps alive and runs: each actor pool
    as (operator name, its smallest size, its ``ray.remote`` arguments), and
    the ``ray.remote`` arguments of its reads (Ray Data gives a task one CPU
    unless it asks otherwise)."""

    def __init__(self) -> None:
        self.actor_pools: List[Tuple[str, int, dict]] = []
        self.reads: List[dict] = []


def work_being_planned() -> Optional[PlannedWork]:
    """The actor pools and reads of the plan Ray is planning, or None
    when no plan is found up the stack."""
    dag = _dag_being_planned()
    if dag is None:
        return None
    work = PlannedWork()
    seen: set = set()
    stack = [dag]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.extend(getattr(op, "input_dependencies", None) or [])
        compute = getattr(op, "compute", None)
        args = dict(getattr(op, "ray_remote_args", None) or {})
        if isinstance(compute, ActorPoolStrategy):
            work.actor_pools.append((str(op.name), int(compute.min_size), args))
        elif not getattr(op, "input_dependencies", None) or isinstance(op, ListFiles):
            work.reads.append(args)
    return work


#: Ray's own planning of the checkpoint filter operator.
_RAYS_FILTER_OPERATOR = _plan_read_op.create_checkpoint_filter_op


class FilterPool:
    """The actor pool of a checkpoint filter operator: each actor's
    ``ray.remote`` arguments, the pool's size bounds and how long its start
    may wait for its smallest size (None: as Ray's context says)."""

    def __init__(
        self, remote_args: dict, min_size: int, max_size: int, start_timeout: Optional[float]
    ) -> None:
        self.remote_args = remote_args
        self.min_size = min_size
        self.max_size = max(min_size, max_size)
        self.start_timeout = start_timeout


def plan_filter_operator(
    is_cairns: Callable[[Any], bool],
    pool_of: Callable[[Any, int], FilterPool],
    taken_later: Callable[[Any, Any, Any], Optional[Tuple[Any, Any, int]]],
) -> None:
    """Has Ray plan the checkpoint filter operator of a job whose manager
    ``is_cairns(manager class)`` with the pool ``pool_of(checkpoint config,
    the set's size in bytes)``: Ray's planning (``create_checkpoint_filter_op``:
    the set loaded, an actor-pool map after the read) with cairn's actor
    resources and bounds instead of Ray's (one CPU an actor, by Ray Data's
    default for actors; a start that waits for ever). Every other job is
    planned by Ray's own function. When ``taken_later(the manager, config,
    the set's reference or None)`` says a later step of the plan took the
    set, the read is filtered by the (config, set, size) it returns
    instead, or not at all. Ray 2.60 calls it by name from two planner
    modules: both are pointed here."""

    def create_checkpoint_filter_op(
        physical_input_op: Any,
        data_context: Any,
        data_file_dir: Optional[str],
        data_file_filesystem: Any,
    ) -> Any:
        config = data_context.checkpoint_config
        if not is_cairns(config.checkpoint_manager_cls):
            return _RAYS_FILTER_OPERATOR(
                physical_input_op, data_context, data_file_dir, data_file_filesystem
            )
        path = unwrap_protocol(config.checkpoint_path)
        if config.filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            # Ray skips the manager of a checkpoint that does not exist
            # yet; cairn's must see the first run too (a hand-built config
            # has no directory made by checkpoint_config): it refuses a
            # sink that would lose rows, judges what the output holds and
            # registers the clean-up that ends the checkpoint.
            config.filesystem.create_dir(path, recursive=True)
        manager = config.checkpoint_manager_cls(checkpoint_config=config, data_context=data_context)
        ids_ref, size = manager.load_checkpoint(data_file_dir, data_file_filesystem)
        later = taken_later(manager, config, ids_ref or None)
        if later is not None:
            # A step after the read filters by the key (made there); the
            # read by what that step says, if anything.
            read_config, ids_ref, size = later
            if not ids_ref:
                return physical_input_op
            config = read_config
            data_context = data_context.copy()
            data_context.checkpoint_config = read_config
        if not ids_ref:
            return physical_input_op
        pool = pool_of(config, size)
        context = data_context
        if pool.start_timeout is not None and data_context.wait_for_min_actors_s <= 0:
            # The pool's start waits for its actors at most this long; the
            # job's other operators keep Ray's setting.
            context = data_context.copy()
            context.wait_for_min_actors_s = int(max(1, pool.start_timeout))
        return MapOperator.create(
            map_transformer=_plan_read_op._get_checkpoint_map_transformer(context, ids_ref),
            input_op=physical_input_op,
            data_context=context,
            name="CheckpointFilter",
            compute_strategy=ActorPoolStrategy(min_size=pool.min_size, max_size=pool.max_size),
            ray_remote_args=dict(pool.remote_args),
            supports_fusion=False,
        )

    _plan_read_op.create_checkpoint_filter_op = create_checkpoint_filter_op
    _plan_read_files_op.create_checkpoint_filter_op = create_checkpoint_filter_op


def plan_checkpoint_writer(is_cairns: Callable[[Any], bool], writer_class: type) -> None:
    """Has Ray's planning of a checkpointed write give the write tasks of
    a job whose manager ``is_cairns(manager class)`` a ``writer_class``
    (made from the checkpoint config), every other job Ray's own writer.
    Ray 2.60's planner module calls ``CheckpointWriter.create`` by name: it
    is pointed here."""

    class Writers:
        @staticmethod
        def create(config: Any) -> Any:
            if is_cairns(getattr(config, "checkpoint_manager_cls", None)):
                return writer_class(config)
            return RayCheckpointWriter.create(config)

    _plan_write_op.CheckpointWriter = Writers


#: Ray's own transform that writes a file sink's pending records.
_RAYS_PREPARE_TRANSFORM = _plan_write_op._generate_prepare_checkpoint_transform


#: The task context's key under which a write task notes that its unit
#: writes no row (each stood for a source with no outputs).
NO_DATA_FILES = "_cairn_no_data_files"


def plan_pending_ids(prepare_of: Callable[[Any], Optional[Callable[[Any], Any]]]) -> None:
    """Has the write tasks of a job whose checkpoint config
    ``prepare_of(config)`` gives a function ``prepare(rows)`` record the IDs
    it returns in their pending records (a composite key's, which no
    column of the rows holds, and lineage markers), and write the rows it
    returns (None: all of them); every other job's write is planned by
    Ray's own transform. Otherwise as Ray 2.60's
    ``_generate_prepare_checkpoint_transform``: the task's blocks combined,
    its base file name the record's name, the record written before the
    data files. Ray's planner calls it by name: it is pointed here."""

    def prepare_transform(data_context: Any, datasink: Any, checkpoint_writer: Any) -> Any:
        prepare = prepare_of(data_context.checkpoint_config)
        if prepare is None:
            return _RAYS_PREPARE_TRANSFORM(data_context, datasink, checkpoint_writer)

        def prepare_checkpoint(blocks: Any, ctx: Any) -> Any:
            block_list, combined = _plan_write_op._combine_blocks(blocks)
            table = BlockAccessor.for_block(combined).to_arrow()
            if table.num_rows > 0:
                ids, kept = prepare(table)
                if kept is not None:
                    block_list = [kept] if kept.num_rows else []
                ctx.kwargs[NO_DATA_FILES] = not block_list
                base_filename = _plan_write_op._generate_base_filename(datasink, ctx)
                pending = checkpoint_writer.write_pending_checkpoint(
                    ids, checkpoint_id=base_filename
                )
                if pending is not None:
                    ctx.kwargs.setdefault(PENDING_CHECKPOINTS_KWARG_NAME, []).append(pending)
            return iter(block_list)

        return _plan_write_op.BlockMapTransformFn(prepare_checkpoint, disable_block_shaping=True)

    _plan_write_op._generate_prepare_checkpoint_transform = prepare_transform


def guard_file_writes(check: Callable[[Any], None]) -> None:
    """Has ``check(sink)`` run on the driver first when a Ray file sink's
    write starts: Ray 2.60 calls ``on_write_start`` before it plans the
    job (so before any checkpoint manager runs), and with
    ``mode='overwrite'`` it deletes the output's files there. Once."""
    original = FileDatasink.on_write_start
    if getattr(original, "_cairn_guarded", False):
        return

    def on_write_start(self: Any, schema: Any = None) -> None:
        if not self._write_started:
            check(self)
        original(self, schema)

    on_write_start._cairn_guarded = True  # type: ignore[attr-defined]
    on_write_start.__doc__ = original.__doc__
    FileDatasink.on_write_start = on_write_start


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


def task_attempt() -> Optional[int]:
    """The attempt of the Ray task running here: 0 the first time, counted
    up by each of Ray's retries (a worker that died, an object rebuilt from
    its lineage); None outside a task, or when this Ray does not say."""
    try:
        worker = ray._private.worker.global_worker
        if worker.mode != ray.WORKER_MODE or ray.get_runtime_context().get_task_id() is None:
            return None  # not inside a task (Ray would answer 0)
        return int(worker.core_worker.get_current_task_attempt_number())
    except Exception:
        return None


def pending_records(ctx: Any) -> List[PendingCheckpoint]:
    """The pending records Ray's write planning wrote for this write task
    before its sink's ``write`` (their ``pending_path`` and
    ``committed_path`` within the checkpoint's filesystem)."""
    return list(ctx.kwargs.get(PENDING_CHECKPOINTS_KWARG_NAME, []))


def current_task_context() -> Any:
    """The write task's context (Ray Data's ``TaskContext``) on this
    thread, or None."""
    return TaskContext.get_current()
