"""cairn's checkpoint manager and filter for Ray Data 2.60 (re-exported by
:mod:`cairn.ray`, whose docstring says what they do), the completion
markers a finished job leaves until its driver exits cleanly, and
:func:`checkpoint_config`."""

from __future__ import annotations

import atexit
import copy
import hashlib
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from ray.data.checkpoint import CheckpointConfig
from ray.data.context import DataContext
from ray.data.block import BlockAccessor

from . import _protocol_of, build_checkpoint_filesystem
from ._arrow_fs import arrow_filesystem, clean_up_on_delete
from ._native import (
    NativeIdSet,
    finish_checkpoint,
    load_ids,
    open_checkpoint,
    remove_completion_marker,
)
from ._ray_compat import (
    FilterPool,
    RayCheckpointFilter,
    RayCheckpointManager,
    called_on_rays_success,
    datasink_being_planned,
    guard_file_writes,
    inputs_being_planned,
    plan_checkpoint_writer,
    plan_filter_operator,
    plan_pending_ids,
    unwrapped,
    work_being_planned,
)
from ._ray_fit import Demand, check_fit, misfit
from ._ray_keys import (
    KEY_COLUMNS,
    LINEAGE,
    complete_sources,
    key_columns,
    key_of,
    lineage_markers,
    lineage_of,
    parse_id_column,
)
from ._ray_skip import take_for_skip
from ._ray_fs import cairn_of
from ._ray_table import TableDatasink, record_clean_up
from ._ray_writer import MovingCheckpointWriter
from ._ray_output import (
    EXISTING_OUTPUT_CHOICES,
    HoldsRows,
    SameJob,
    checkpoint_holds_rows,
    checkpoint_is_new,
    committed_set,
    judge_existing_output,
    output_ids,
    write_record,
)
from ._ray_read import (
    offer_committed,
    withdraw_committed,
)
from ._ray_shards import (
    DEFAULT_MAX_FILTER_MEMORY,
    DEFAULT_SHARD_TIMEOUT,
    NotShardable,
    ShardedSet,
    build_sharded_set,
)
from .fsspec import CairnFileSystem

# Logged as cairn.ray, the public module whose logging users configure.
logger = logging.getLogger("cairn.ray")


#: Where checkpoint_config keeps its lease_ttl on Ray's CheckpointConfig.
_LEASE_TTL = "_cairn_lease_ttl"

#: Where checkpoint_config keeps its max_filter_memory on Ray's CheckpointConfig.
_MAX_FILTER_MEMORY = "_cairn_max_filter_memory"

#: Where checkpoint_config keeps its shard_timeout on Ray's CheckpointConfig.
_SHARD_TIMEOUT = "_cairn_shard_timeout"

#: Where checkpoint_config keeps its existing_output on Ray's CheckpointConfig.
_EXISTING_OUTPUT = "_cairn_existing_output"
#: The attribute of a CheckpointConfig that keeps string, binary and
#: composite IDs' bytes in the set rather than their fingerprints.
_EXACT_IDS = "_cairn_exact_ids"

#: cairn's checkpoint filter actors ask for max(checkpoint_actor_memory_bytes,
#: this many times the set's size) of memory each, as Ray's do.
_RAY_FILTER_MEMORY_FACTOR = 1.5


def _filter_memory(config: CheckpointConfig, set_bytes: int) -> int:
    return int(
        max(float(config.checkpoint_actor_memory_bytes), set_bytes * _RAY_FILTER_MEMORY_FACTOR)
    )


def _filter_pool(config: CheckpointConfig, set_bytes: int) -> FilterPool:
    """The filter actors of cairn's manager: no CPU each (Ray Data would
    give each one CPU, and a CPU held by the filter can be the one the
    reads it filters wait for), the set's memory, at most one actor a CPU
    of the cluster (the filter's work is CPU work, and no CPU budget bounds
    the pool any more), and a start bounded by shard_timeout."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    smallest = max(1, int(config.checkpoint_actor_pool_min_size))
    return FilterPool(
        {"num_cpus": 0, "memory": _filter_memory(config, set_bytes)},
        smallest,
        min(int(config.checkpoint_actor_pool_max_size), max(1, cpus)),
        getattr(config, _SHARD_TIMEOUT, DEFAULT_SHARD_TIMEOUT),
    )


#: pyarrow's names of its filesystems, as cairn's protocols.
_PYARROW_PROTOCOLS = {"s3": "s3", "gcs": "gcs", "local": "file"}


def _local(path: str, fs: CairnFileSystem) -> str:
    """A local path without a scheme made absolute, as Ray resolves it."""
    if fs._protocol == "file" and "://" not in path:
        return os.path.abspath(path)
    return path


#: Ray 2.60's writes whose units cairn commits exactly once: its file sinks.
_EXACTLY_ONCE_WRITES = (
    "write_parquet, write_json, write_csv, write_numpy, write_tfrecords, write_webdataset, "
    "write_images, write_orc"
)


#: The checkpoints whose job finished in this process, by URL, each left
#: with only its completion marker: removed when the driver exits (not when
#: it is killed, so a run again knows the job finished), or when this
#: process starts another job on the same checkpoint.
_MARKERS_LEFT: Dict[str, Any] = {}


#: Set once this process is ending other than cleanly (an uncaught
#: exception, SIGTERM): the markers then stay, so an orchestrator's retry
#: of the whole script finds the job finished and writes nothing again.
_EXIT_UNCLEAN: List[str] = []
_EXIT_WATCHED = False


def _watch_for_unclean_exit() -> None:
    """Notes an exit that is not a clean end of the driver: an uncaught
    exception (``sys.excepthook``, wrapped once) or SIGTERM (what
    Kubernetes, Slurm, ``timeout`` and Airflow send; Ray's own handler
    turns it into ``sys.exit``, which runs the exit handlers). Called each
    time a marker is left, after ``ray.init`` installed Ray's handler, which
    is kept and called: a handler installed since (a new Ray node's) is
    wrapped in turn. From the main thread only (Python's rule for signal
    handlers)."""
    global _EXIT_WATCHED
    if not _EXIT_WATCHED:
        _EXIT_WATCHED = True
        previous_hook = sys.excepthook

        def excepthook(kind: Any, value: Any, tb: Any) -> None:
            _EXIT_UNCLEAN.append(f"an uncaught {kind.__name__}")
            previous_hook(kind, value, tb)

        sys.excepthook = excepthook
    if threading.current_thread() is not threading.main_thread():
        return
    previous_term = signal.getsignal(signal.SIGTERM)
    if getattr(previous_term, "_cairn_notes_sigterm", False):
        return
    if previous_term in (signal.SIG_IGN, signal.SIG_DFL, None):
        # Ignored: nothing ends. Default (or set outside Python): the
        # process ends at once, without exit handlers, so the marker stays.
        return

    def on_term(signum: int, frame: Any) -> None:
        _EXIT_UNCLEAN.append("SIGTERM")
        # Ray's handler raises SystemExit; one that returns (a graceful
        # shutdown of the user's own) did not end the process here.
        previous_term(signum, frame)
        _EXIT_UNCLEAN.remove("SIGTERM")

    on_term._cairn_notes_sigterm = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, on_term)


def _remove_markers_at_exit() -> None:
    if not _MARKERS_LEFT:
        return
    if _EXIT_UNCLEAN:
        logger.warning(
            "cairn: the driver is ending with %s after its job finished: the completion "
            "marker(s) of %s stay, so the same job run again writes nothing (and removes them)",
            _EXIT_UNCLEAN[0],
            ", ".join(_MARKERS_LEFT),
        )
        return
    # Ray's own exit handler (registered when ray is imported, so it runs
    # after this one) shuts Ray down, which takes seconds: done first here,
    # so the markers go in the last moment of the driver's life.
    if ray.is_initialized():
        ray.shutdown()
    _remove_markers()


def _remove_markers() -> None:
    """Removes the markers of the jobs that finished in this process."""
    for url, native in list(_MARKERS_LEFT.items()):
        _remove_marker(url, native)


atexit.register(_remove_markers_at_exit)


def _remove_marker(url: str, native: Any) -> None:
    _MARKERS_LEFT.pop(url, None)
    try:
        remove_completion_marker(native, url)
    except Exception as e:
        logger.warning(
            "cairn: the completion marker of the finished job's checkpoint %s was not removed "
            "(%s): a run of the same job over it writes nothing and removes it",
            url,
            e,
        )


def _end_own_marker(checkpoint_fs: CairnFileSystem, checkpoint_path: str) -> str:
    """The URL of the checkpoint at ``checkpoint_path``, its completion
    marker removed first when a job of this process finished there and
    left it (its execution returned: a new write or planning on it is a
    new job, as Ray has it)."""
    native = checkpoint_fs._native
    url = native.url(native.strip(_local(checkpoint_path, checkpoint_fs)))
    if url in _MARKERS_LEFT:
        _remove_marker(url, _MARKERS_LEFT[url])
    return url


def _input_digest() -> Optional[str]:
    """``"<n> files, <digest>"`` of the input files of the plan being
    planned (each one's path, size, and modification time and ETag where
    the store gives them, sorted), or None when its sources are not file
    reads cairn knows or cannot be listed: the job record keeps it, so a
    finished job's completion marker tells a run over the same input (the
    job is done) from one over other input (refused, naming both). Under a
    directory, files whose path below it has a part starting with ``.`` or
    ``_`` are left out, as Ray's readers leave them out; a file named
    itself never is."""
    try:
        sources = inputs_being_planned()
        if not sources:
            return None
        files = [line for paths, filesystem in sources for line in _listed(paths, filesystem)]
    except Exception as e:  # noqa: BLE001 - best effort: a job is never failed by it
        logger.warning("cairn: the job's input could not be listed (%r): no digest recorded", e)
        return None
    digest = hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:32]
    return f"{len(files)} files, sha256 {digest}"


def _listed(paths: List[str], filesystem: Any) -> List[str]:
    """A line per input file under ``paths``: path, size, and what the
    store says of its version (cairn's listing: modification time and
    ETag; another pyarrow filesystem: its modification time)."""
    lines = []
    cairn_fs = cairn_of(filesystem)
    for root in paths:
        if cairn_fs is not None:
            if cairn_fs.isdir(root):
                found = list(cairn_fs.find(root, detail=True).values())
            else:
                found = [cairn_fs.info(root)]
            entries = [
                (e["name"], e.get("size"), f"{e.get('LastModified')}|{e.get('ETag')}")
                for e in found
                if e.get("type") == "file"
            ]
        else:
            info = filesystem.get_file_info(root)
            if info.type == pafs.FileType.Directory:
                found = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
            elif info.type == pafs.FileType.File:
                found = [info]
            else:
                raise FileNotFoundError(root)
            entries = [
                (f.path, f.size, str(f.mtime_ns)) for f in found if f.type == pafs.FileType.File
            ]
        base = root.rstrip("/") + "/"
        for name, size, version in entries:
            below = name[len(base) :] if name.startswith(base) else ""
            if any(part.startswith((".", "_")) for part in below.split("/") if part):
                continue
            lines.append(f"{name}\t{size}\t{version}")
    return lines


def _save_mode(sink: Any) -> str:
    """The save mode of Ray's file sink ``sink`` (``append`` for any other)."""
    mode = getattr(sink, "mode", "append")
    return str(getattr(mode, "value", mode))


def _refuse_overwriting_a_resume(sink: Any) -> None:
    """Refuses, before Ray deletes anything, a file sink's
    ``mode='overwrite'`` under cairn's manager when the checkpoint holds
    committed units or a finished job's marker: Ray would delete their
    files, and the run would skip their rows."""
    config = DataContext.get_current().checkpoint_config
    if _save_mode(sink) != "overwrite" or config is None:
        return
    if not _is_cairns(getattr(config, "checkpoint_manager_cls", None)):
        return
    checkpoint_fs = cairn_of(config.filesystem) if config.filesystem is not None else None
    if checkpoint_fs is None:
        return
    _end_own_marker(checkpoint_fs, config.checkpoint_path)
    if not checkpoint_holds_rows(checkpoint_fs, _local(config.checkpoint_path, checkpoint_fs)):
        return
    raise ValueError(
        f"cairn: the write's mode='overwrite' would delete the files in {sink.path}, and the "
        f"checkpoint {config.checkpoint_path} holds units this job already committed there "
        "(or records that it finished): the run would skip their rows, so they would be lost. "
        "Nothing was deleted or written. Resume with the default mode='append'; to write the "
        "job afresh, delete the checkpoint first, then run with mode='overwrite'"
    )


def _sink_being_planned() -> str:
    """The datasink of the plan Ray is planning, named for a message."""
    sink = datasink_being_planned()
    return type(sink).__name__ if sink is not None else "a sink that writes no files"


def _refusal_of_non_file_sink(checkpoint_path: str) -> str:
    return (
        f"cairn.ray.CheckpointManager refuses the checkpoint {checkpoint_path} for a write to "
        f"{_sink_being_planned()}: Ray 2.60 checkpoints the units of a sink that writes no "
        "files (tables: write_delta, write_iceberg, write_lance; databases: write_sql, "
        "write_mongo, write_bigquery, ...) after their rows are sent, and commits a table only "
        "once, on the driver, at the end, so a job killed midway keeps IDs whose rows never "
        "reached the table (rows lost on resume) or sends rows twice. Under cairn only Ray's "
        f"file sinks are exactly once ({_EXACTLY_ONCE_WRITES}): write files, or run this "
        "write without a checkpoint config, or write a Delta, Iceberg or Lance table through "
        "cairn.ray.DeltaDatasink, IcebergDatasink or LanceDatasink, which commit each unit to "
        "the table exactly once"
    )


class CheckpointManager(RayCheckpointManager):
    """Ray Data's ``checkpoint_manager_cls``, backed by cairn.

    The checkpoint filesystem must be cairn's (``override_filesystem=
    cairn.build_checkpoint_filesystem(path, storage_options)``, which
    :func:`checkpoint_config` sets) or pyarrow's local disk. The output is
    settled through the write's filesystem when it is cairn's or local
    disk (seen through Ray's ``RetryingPyFileSystem``; the path with or
    without its scheme), else through the checkpoint's filesystem when both
    are on the same protocol (the output then needs the same credentials).
    Every Ray 2.60 file sink's data-file names are known: Parquet's
    ``<unit>-<n>.parquet``, the block-based sinks' ``<unit>.<ext>``
    (``write_json``, ``write_csv``, ``write_numpy``, ...), the row-based
    sinks' ``<unit>_<block>_<row>.<ext>``. A partitioned write
    (``partition_cols``) is settled in every partition directory: when the
    output holds directories, an unfinished unit's files are found by one
    recursive listing of the output.
    """

    # Pending units of cairn's table sinks are settled by the table's log
    # here: the sinks check for this before they write.
    cairn_settles_table_units = True

    def __init__(self, checkpoint_config: CheckpointConfig, data_context: Any):
        super().__init__(checkpoint_config=checkpoint_config, data_context=data_context)
        self._config = checkpoint_config
        self._lease_ttl: Optional[float] = getattr(checkpoint_config, _LEASE_TTL, None)
        self._max_filter_memory: Optional[int] = getattr(
            checkpoint_config, _MAX_FILTER_MEMORY, DEFAULT_MAX_FILTER_MEMORY
        )
        self._shard_timeout: float = getattr(
            checkpoint_config, _SHARD_TIMEOUT, DEFAULT_SHARD_TIMEOUT
        )
        #: A composite key's columns (None: one ID column).
        self._key_columns = key_columns(checkpoint_config)

    def _filter_actors(self, set_bytes: int) -> List[Demand]:
        """The filter actors the job starts for a set of ``set_bytes`` (its
        checkpoint filter operator's smallest pool)."""
        pool = _filter_pool(self._config, set_bytes)
        return [Demand.of_remote_args("checkpoint filter actors", pool.remote_args)] * pool.min_size

    def _warn_if_starved(self, own: List[Demand]) -> None:
        """Warns, with the numbers, when the job's own actor pools (their
        smallest size) and cairn's actors ``own`` leave no node room for one
        read task: unless the cluster adds nodes, Ray waits for ever. A
        warning, not a refusal: an autoscaler Ray cannot report (KubeRay's,
        a head node started without CPUs) may bring the nodes."""
        found = misfit(self._plan_actors + own, self._read)
        if found is not None:
            logger.warning(
                "cairn: %s: unless the cluster adds nodes, Ray will wait for ever for them. Give "
                "the job's actor pools fewer actors or fewer resources each (map_batches' "
                "concurrency, num_cpus, num_gpus, resources), or add nodes",
                found,
            )

    def load_checkpoint(
        self,
        data_file_dir: Optional[str] = None,
        data_file_filesystem: Optional[pafs.FileSystem] = None,
    ) -> Tuple[Optional[Any], int]:
        """Settles pending units, loads the committed IDs and puts their set
        in Ray's object store: ``(ref, the set's size in bytes)``, or
        ``(None, 0)`` when nothing is committed."""
        started = time.monotonic()
        # A set offered to an earlier planning and never taken must not
        # reach this one's read.
        withdraw_committed(self.checkpoint_path)
        if self.checkpoint_path_partition_filter is not None:
            raise ValueError(
                "cairn.ray.CheckpointManager reads every committed unit of a flat checkpoint "
                "directory; checkpoint_path_partition_filter (which selects partitions of a "
                "hive-partitioned checkpoint directory) is not supported: leave it unset, or use "
                "Ray's own manager"
            )
        if data_file_dir is None:
            raise ValueError(_refusal_of_non_file_sink(self.checkpoint_path))
        checkpoint_fs = cairn_of(self.filesystem)
        if checkpoint_fs is None:
            raise ValueError(
                f"the checkpoint filesystem of {self.checkpoint_path} is "
                f"{type(self.filesystem).__name__}, not cairn's: pass override_filesystem="
                "cairn.build_checkpoint_filesystem(checkpoint_path, storage_options), or use "
                "cairn.ray.checkpoint_config(...), which sets it"
            )
        work = work_being_planned()
        # The job's own actor pools and reads, for the warning below.
        self._plan_actors: List[Demand] = []
        self._read: Optional[Demand] = None
        if work is not None:
            for name, smallest, args in work.actor_pools:
                self._plan_actors += [Demand.of_remote_args(f"{name} actors", args)] * smallest
            reads = [Demand.of_remote_args("read task", args) for args in work.reads]
            self._read = max(reads, key=lambda d: sum(d.resources.values()), default=None)
        native = checkpoint_fs._native
        checkpoint_url = _end_own_marker(checkpoint_fs, self.checkpoint_path)
        output_fs = self._output_filesystem(data_file_dir, data_file_filesystem, checkpoint_fs)
        output_dir = _local(data_file_dir, output_fs)
        # A table sink's log, not file names, says which units reached it.
        sink = datasink_being_planned()
        unit_log = sink.unit_log() if isinstance(sink, TableDatasink) else None
        if unit_log is not None and self._key_columns is not None:
            raise ValueError(
                f"the composite key {self._key_columns} writes through file sinks (Parquet, "
                f"JSON, ...) only; {type(sink).__name__} records one ID column. Add a column "
                "that joins the key's values (a string) and pass its name as id_column"
            )
        digest = _input_digest()
        mode = _save_mode(sink)
        # What the output holds before this job's first unit: judged once,
        # on a new checkpoint (its job record keeps the verdict for every
        # later run of the job).
        existing = None
        if (
            getattr(self._config, _EXISTING_OUTPUT, "skip") == "skip"
            and mode != "overwrite"
            and checkpoint_is_new(checkpoint_fs, _local(self.checkpoint_path, checkpoint_fs))
        ):
            existing = judge_existing_output(
                sink, unit_log, output_fs, output_dir, self.id_column, digest
            )
        # Settled and listed first, the IDs not read: their files' size
        # decides whether the set is loaded here or spread over shards.
        _, report = open_checkpoint(
            native,
            checkpoint_url,
            self.id_column,
            output_fs._native,
            output_dir,
            lease_ttl=self._lease_ttl,
            read_ids=False,
            unit_log=unit_log,
            # A marker exists only where Ray deletes the checkpoint.
            input_digest=digest if self._config.delete_checkpoint_on_success else None,
            # The same job's verdict is kept too: a run of it killed (or
            # kept, delete_checkpoint_on_success=False) leaves a checkpoint
            # that is not new, whose next run must still skip every row
            # the output holds.
            output_ids_committed=isinstance(existing, (HoldsRows, SameJob)),
        )
        started_before = bool(report.get("finished") or report["committed_units"])
        #: The read's filter under source lineage: (its config, the set of
        #: the sources all of whose outputs are committed, its size), or
        #: None (the read is not filtered).
        self.complete_sources: Optional[Tuple[Any, Any, int]] = None
        if lineage_of(self._config) is not None and report["committed_units"]:
            self.complete_sources = self._complete_sources(checkpoint_fs, report)
        if self._config.delete_checkpoint_on_success:
            self._clean_up_on_success(
                checkpoint_fs,
                checkpoint_url,
                output_fs,
                output_dir,
                sink,
                digest,
            )
        if isinstance(existing, SameJob) and not started_before:
            logger.warning(
                "cairn: this job already finished (output %s, ID column %s, the same input: "
                "%s) at %s: every row is in the output, so this run writes none. To write "
                "them again, pass mode='overwrite' to the write (replaces the output) or "
                "existing_output='append' to cairn.ray.checkpoint_config (adds them beside)",
                output_dir,
                self.id_column,
                digest,
                existing.record.get("finished_at"),
            )
            return self._every_row_committed()
        if report.get("finished"):
            logger.warning(
                "cairn: the checkpoint %s records that this job (output %s, ID column %s) "
                "finished and that its clean-up was cut short: every row is already in the "
                "output, so this run writes none and ends the clean-up when it succeeds. To run "
                "the job again from the start, delete the checkpoint first",
                checkpoint_url,
                output_dir,
                self.id_column,
            )
            return self._every_row_committed()
        if report.get("committed_from_table"):
            logger.info(
                "cairn: %d pending unit(s) found in the table %s, committed: %s",
                len(report["committed_from_table"]),
                unit_log.table if unit_log is not None else output_dir,
                ", ".join(report["committed_from_table"]),
            )
        if report.get("foreign"):
            logger.warning(
                "files cairn did not write were left in the checkpoint %s: %s",
                checkpoint_url,
                ", ".join(report["foreign"]),
            )
        if report.get("output_ids_committed"):
            return self._load_from_output(sink, unit_log, output_fs, output_dir, existing)
        if report["committed_units"] == 0:
            logger.info("cairn: nothing committed in %s", checkpoint_url)
            return None, 0
        budget = self._max_filter_memory
        if budget is not None and report["committed_bytes"] > budget:
            sharded = self._load_sharded(checkpoint_fs, report, budget)
            if sharded is not None:
                # The filter actors hold no part of the set, only a block's
                # keys; cairn's reader asks the shards about row groups.
                self._warn_if_starved(
                    self._filter_actors(0)
                    + [Demand("shard actors", {"memory": float(budget)})] * len(sharded.shards)
                )
                ref = ray.put(sharded)
                self._offer_to_reader(ref)
                return ref, 0
        ids = load_ids(
            native,
            checkpoint_url,
            self.id_column,
            exact_strings=getattr(self._config, _EXACT_IDS, False),
        )
        if len(ids) == 0:
            logger.info("cairn: nothing committed in %s", checkpoint_url)
            return None, 0

        # A NumPy array: Ray's object store hands it to each filter actor
        # in place (shared memory), and the set is used where it lies.
        data = np.frombuffer(ids.to_bytes(), dtype=np.uint8)
        size = data.nbytes
        count = len(ids)
        del ids
        filter_actors = self._filter_actors(size)
        check_fit(
            filter_actors,
            None,
            f"Lower max_filter_memory below the set's {size} bytes so it is split over shard "
            "actors, add memory to the nodes, or lower checkpoint_actor_memory_bytes on the "
            "CheckpointConfig",
        )
        self._warn_if_starved(filter_actors)
        ref = ray.put(data)
        self._offer_to_reader(ref)
        logger.info(
            "cairn: %d committed IDs in %d units loaded from %s in %.2f s (a set of %d bytes, "
            "shared by the filter actors of a machine); %d pending unit(s) rolled back, "
            "%d data file(s) deleted",
            count,
            report["committed_units"],
            checkpoint_url,
            time.monotonic() - started,
            size,
            len(report.get("rolled_back", [])),
            report.get("data_files_deleted", 0),
        )
        return ref, size

    def _every_row_committed(self) -> Tuple[Any, int]:
        """The set of a job all of whose rows are committed; under a skip
        step, the read is filtered by it too (nothing need be read)."""
        ref = ray.put(_EveryRowCommitted())
        self.complete_sources = (self._config, ref, 0)
        return ref, 0

    def _complete_sources(
        self, checkpoint_fs: CairnFileSystem, report: Mapping[str, Any]
    ) -> Optional[Tuple[Any, Any, int]]:
        """The sources all of whose outputs are committed, from the lineage
        markers of every committed unit's ID file (read on threads), as the
        read's filter: a config keyed by the source column and the set's
        reference and size; None when there is none."""
        started = time.monotonic()
        source_column, _ = lineage_of(self._config)
        directory = checkpoint_fs._native.strip(_local(self.checkpoint_path, checkpoint_fs))
        filesystem = arrow_filesystem(checkpoint_fs)

        def markers(unit: str) -> List[bytes]:
            column = pq.read_table(
                f"{directory}/{unit}.parquet", columns=[self.id_column], filesystem=filesystem
            ).column(0)
            starts = pc.starts_with(column.cast(pa.binary()), pattern="\x00L")
            return column.filter(starts).to_pylist()

        with ThreadPoolExecutor(max_workers=16) as pool:
            found = [
                m for unit_markers in pool.map(markers, report["committed"]) for m in unit_markers
            ]
        done, sources = complete_sources(found)
        logger.info(
            "cairn: %d of the %d sources the committed units name have all their outputs "
            "committed: the read skips them (%.2f s)",
            len(done),
            sources,
            time.monotonic() - started,
        )
        if not done:
            return None
        data, count = committed_set(iter([pa.array(done)]))
        read_config = copy.copy(self._config)
        read_config.id_column = source_column
        setattr(read_config, KEY_COLUMNS, None)
        setattr(read_config, LINEAGE, None)
        return read_config, ray.put(data), data.nbytes

    def _offer_to_reader(self, ref: Any) -> None:
        """Offers the committed set to cairn's reader, which leaves the row
        groups all of whose IDs are committed unread: not a composite key's,
        which no input column holds."""
        if self._key_columns is None:
            offer_committed(self._data_context, self.checkpoint_path, ref)

    def _load_from_output(
        self,
        sink: Any,
        unit_log: Any,
        output_fs: CairnFileSystem,
        output_dir: str,
        existing: Any,
    ) -> Tuple[Optional[Any], int]:
        """The committed set of a job whose output held rows before its
        first unit: the IDs the output holds now (those rows, and every
        unit this job committed since), read back in one projected scan."""
        started = time.monotonic()
        data, count = committed_set(
            output_ids(sink, unit_log, output_fs, output_dir, self.id_column, self._key_columns)
        )
        if isinstance(existing, HoldsRows):
            logger.warning(
                "cairn: the output holds rows already (%s): the %d IDs there count as "
                "committed, and only input rows with other IDs are written",
                existing.what,
                count,
            )
        logger.info(
            "cairn: %d IDs read back from the output %s in %.2f s (a set of %d bytes)",
            count,
            output_dir,
            time.monotonic() - started,
            data.nbytes,
        )
        if count == 0:
            return None, 0
        filter_actors = self._filter_actors(data.nbytes)
        check_fit(
            filter_actors,
            None,
            "Add memory to the nodes, or lower checkpoint_actor_memory_bytes on the "
            "CheckpointConfig",
        )
        self._warn_if_starved(filter_actors)
        ref = ray.put(data)
        self._offer_to_reader(ref)
        return ref, data.nbytes

    def _clean_up_on_success(
        self,
        checkpoint_fs: CairnFileSystem,
        checkpoint_url: str,
        output_fs: CairnFileSystem,
        output_dir: str,
        sink: Any,
        input_digest: Optional[str],
    ) -> None:
        """Has Ray's ``delete_checkpoint_on_success`` (a ``delete_dir`` of
        the checkpoint through its filesystem, on this driver, once the job
        succeeded) end the checkpoint as cairn's protocol does: the
        completion marker written before anything is deleted and removed
        last, when the driver exits, so a driver killed in the middle or
        after it leaves a checkpoint that says the job finished. Any other
        ``delete_dir`` of it stays plain."""
        lease_ttl = self._lease_ttl
        id_column = self.id_column
        checkpoint_path = self.checkpoint_path
        table_sink = sink if isinstance(sink, TableDatasink) else None
        unit_log = table_sink.unit_log() if table_sink is not None else None
        # The checkpoint this manager ends (the driver's current context may
        # name another: Ray Data takes the one the dataset was made in).
        checkpoint_config = self._config

        def clean_up() -> bool:
            if not called_on_rays_success():
                # Someone else deleting the checkpoint (after a failed run,
                # say): a plain delete, and no marker saying it finished.
                return False
            try:
                if table_sink is not None:
                    # Units handed to the job's committer are committed (or
                    # the checkpoint kept) before it is ended.
                    table_sink.end_commits(checkpoint_config)
                elif not getattr(sink, "_skip_write", False):
                    # Every unit is committed: the record that the job
                    # finished goes beside its files before the checkpoint
                    # (whose completion marker says the same until then)
                    # is deleted. A table's own rows are its record. (A
                    # write Ray skipped, mode='ignore' over an output
                    # that held files, wrote no files to record.)
                    write_record(output_fs, output_dir, id_column, input_digest, checkpoint_url)
                report = finish_checkpoint(
                    checkpoint_fs._native,
                    checkpoint_url,
                    id_column,
                    output_fs._native,
                    output_dir,
                    lease_ttl=lease_ttl,
                    unit_log=unit_log,
                )
            except Exception as e:
                logger.warning(
                    "cairn: the checkpoint %s of the finished job was not deleted: %s",
                    checkpoint_url,
                    e,
                )
                if unit_log is not None:
                    # Ray only logs this; the table sink raises it.
                    record_clean_up(checkpoint_path, e)
                raise
            if unit_log is not None:
                record_clean_up(checkpoint_path, None)
            if report["marker_left"]:
                _MARKERS_LEFT[checkpoint_url] = checkpoint_fs._native
                _watch_for_unclean_exit()
            if report["rolled_back"]:
                logger.warning(
                    "cairn: unit(s) written after their run lost the checkpoint's lease were "
                    "rolled back at the end of the job: %s (%d data file(s) deleted)",
                    ", ".join(report["rolled_back"]),
                    report["data_files_deleted"],
                )
            if report["kept_foreign"]:
                logger.warning(
                    "cairn: files cairn did not write were left in the checkpoint %s: %s",
                    checkpoint_url,
                    ", ".join(report["kept_foreign"]),
                )
            return True

        clean_up_on_delete(checkpoint_fs, _local(self.checkpoint_path, checkpoint_fs), clean_up)

    def _load_sharded(
        self, checkpoint_fs: CairnFileSystem, report: Mapping[str, Any], budget: int
    ) -> Optional[ShardedSet]:
        """The set spread over shard actors, or None (with a warning) when
        its IDs cannot be sharded."""
        directory = checkpoint_fs._native.strip(_local(self.checkpoint_path, checkpoint_fs))
        files = [f"{directory}/{unit}.parquet" for unit in report["committed"]]
        filesystem = arrow_filesystem(checkpoint_fs)
        try:
            return build_sharded_set(
                files,
                filesystem,
                self.id_column,
                report["committed_bytes"],
                budget,
                other_actors=self._filter_actors(0),
                timeout=self._shard_timeout,
            )
        except NotShardable as e:
            logger.warning(
                "cairn: the committed IDs of %s (%d bytes of ID files) are over "
                "max_filter_memory=%d but cannot be sharded (%s): every filter node holds them all",
                self.checkpoint_path,
                report["committed_bytes"],
                budget,
                e,
            )
            return None

    def _output_filesystem(
        self,
        data_file_dir: str,
        data_file_filesystem: Optional[pafs.FileSystem],
        checkpoint_fs: CairnFileSystem,
    ) -> CairnFileSystem:
        if data_file_filesystem is None:
            return checkpoint_fs
        found = cairn_of(data_file_filesystem)
        if found is not None:
            return found
        # Another filesystem on the checkpoint's store (pyarrow's own S3,
        # say): the output is settled through the checkpoint's filesystem.
        # Ray passes the path without its scheme, so the filesystem's kind
        # decides.
        kind = getattr(unwrapped(data_file_filesystem), "type_name", None)
        if _PYARROW_PROTOCOLS.get(kind) == checkpoint_fs._protocol or (
            "://" in data_file_dir and _protocol_of(data_file_dir) == checkpoint_fs._protocol
        ):
            return checkpoint_fs
        raise ValueError(
            f"the output {data_file_dir} is written through "
            f"{type(data_file_filesystem).__name__}, which cairn cannot settle pending units "
            "on: pass filesystem=cairn.build_checkpoint_filesystem(output, storage_options) "
            "to the write"
        )


def _pending_ids_of(config: Any) -> Any:
    """How a write task of a job under ``config`` makes its pending record's
    IDs and the rows it writes, when not as Ray does (one column, every
    row): a composite key's IDs, encoded; with source lineage, its markers
    too, and without the rows that stand for sources with no outputs."""
    columns = key_columns(config)
    lineage = lineage_of(config)
    if (columns is None and lineage is None) or not _is_cairns(
        getattr(config, "checkpoint_manager_cls", None)
    ):
        return None

    def prepare(table: pa.Table) -> Tuple[Any, Optional[pa.Table]]:
        if lineage is None:
            return key_of(table, config.id_column, columns), None
        markers, kept = lineage_markers(table, *lineage)
        ids = key_of(kept, config.id_column, columns)
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks()
        return pa.concat_arrays([ids.cast(markers.type), markers]), kept

    return prepare


def _is_cairns(manager_class: Any) -> bool:
    return isinstance(manager_class, type) and issubclass(manager_class, CheckpointManager)


plan_filter_operator(_is_cairns, _filter_pool, take_for_skip)
guard_file_writes(_refuse_overwriting_a_resume)
plan_checkpoint_writer(_is_cairns, MovingCheckpointWriter)
plan_pending_ids(_pending_ids_of)


class _EveryRowCommitted:
    """The committed set of a job that finished: every row is committed
    (its checkpoint's ID files may be partly deleted already)."""


class CheckpointFilter(RayCheckpointFilter):
    """Ray Data's ``checkpoint_filter_cls``, backed by cairn: built once per
    filter actor from :class:`CheckpointManager`'s set; each block's ID
    column is probed in Rust and the committed rows dropped, in order."""

    #: A composite key's columns (None: one ID column).
    _key_columns: Optional[List[str]] = None

    def __init__(self, config: CheckpointConfig, checkpoint_ref: Any = None):
        super().__init__(config, checkpoint_ref)
        self._key_columns = key_columns(config)
        data = ray.get(checkpoint_ref) if checkpoint_ref is not None else None
        if isinstance(data, np.ndarray):
            # Read in place where the memory is Ray's (read-only, shared by
            # the actors of a machine); copied otherwise.
            array = np.ascontiguousarray(data, dtype=np.uint8)
            self._ids = NativeIdSet._from_shared_memory(array)
        elif isinstance(data, ShardedSet):
            self._ids = None
            self._sharded: Optional[ShardedSet] = data
        elif isinstance(data, NativeIdSet):
            self._ids = data
        elif isinstance(data, _EveryRowCommitted):
            self._ids = None
            self._sharded = None
        elif isinstance(data, (bytes, bytearray, memoryview)):
            self._ids = NativeIdSet.from_bytes(bytes(data))
        else:
            raise TypeError(
                "cairn.ray.CheckpointFilter needs the set cairn.ray.CheckpointManager loads; "
                f"got {type(data).__name__}: set checkpoint_manager_cls=cairn.ray."
                "CheckpointManager too (cairn.ray.checkpoint_config does)"
            )
        del data

    def filter_rows_for_block(self, block: Any) -> Any:
        """The rows of ``block`` whose ID is not committed, in their order."""
        if not isinstance(block, pa.Table):
            block = BlockAccessor.for_block(block).to_arrow()
        if block.num_rows == 0:
            return block
        if self._ids is None:
            if self._sharded is None:
                # _EveryRowCommitted.
                return block.slice(0, 0)
            committed = self._sharded.committed(key_of(block, self.id_column, self._key_columns))
            return block.filter(pa.array(~committed))
        if len(self._ids) == 0:
            return block
        column = key_of(block, self.id_column, self._key_columns)
        masks = []
        for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
            if pa.types.is_dictionary(chunk.type):
                chunk = chunk.dictionary_decode()
            masks.append(self._ids.uncommitted(chunk))
        return block.filter(pa.chunked_array(masks, type=pa.bool_()))


def checkpoint_config(
    id_column: Union[str, Sequence[str]],
    checkpoint_path: str,
    storage_options: Optional[Mapping[str, Any]] = None,
    *,
    lease_ttl: Optional[float] = None,
    max_filter_memory: Optional[int] = DEFAULT_MAX_FILTER_MEMORY,
    shard_timeout: float = DEFAULT_SHARD_TIMEOUT,
    existing_output: str = "skip",
    source_column: Optional[str] = None,
    fan_out_column: Optional[str] = None,
    exact_ids: bool = False,
    **ray_kwargs: Any,
) -> CheckpointConfig:
    """A Ray ``CheckpointConfig`` with cairn's manager, filter and checkpoint
    filesystem (``storage_options`` keyed by protocol or flat, as for
    :func:`cairn.build_checkpoint_filesystem`). ``lease_ttl`` is the
    lifetime in seconds (at least 3; 120 by default) of the lease the
    manager holds, renewed every third of it, while it settles and loads
    the checkpoint: raise it for a store far away. ``max_filter_memory`` is
    the bytes a machine gives the committed set (2 GiB by default): when the
    committed ID files are larger, integer IDs are split by key range over
    shard actors spread over the cluster, each asking Ray for that much
    memory, and no machine holds the whole set (None: never split).
    ``shard_timeout`` bounds, in seconds (600 by default), each wait for
    cairn's actors and tasks: a shard placed or answering, the set's
    loader tasks, the filter pool's first actors. ``existing_output`` says
    what a job's first run does with rows its output already holds:
    ``"skip"`` (the default) writes nothing when the output's record says
    this same job (ID column and input) finished there, skips the IDs the
    output holds when a finished job's files (read back from Parquet or
    JSON) or a table's rows are there, and refuses files no cairn job
    recorded; ``"append"`` writes every row beside them, as Ray alone
    does. ``source_column`` and ``fan_out_column`` (with a composite key
    that holds the source column, and :func:`cairn.ray.skip_committed`
    after the explode) give each output row its source and its source's
    output count: the read then skips the sources all of whose outputs are
    committed, and a row whose count is 0 records a source with none (it
    is not written). String, binary and composite IDs are held as 96-bit
    fingerprints (about 9 bytes an ID; the chance that a row is skipped
    for a collision is about n*m / 2^96 for n committed and m tested IDs,
    about 10^-11 at a billion of each); ``exact_ids=True`` keeps their
    bytes (their length plus 16 bytes an ID) in the set loaded from the
    checkpoint. Other keyword arguments
    go to ``CheckpointConfig`` unchanged (``delete_checkpoint_on_success``,
    ...). An ``override_filesystem`` given there must be cairn's: a
    :class:`cairn.fsspec.CairnFileSystem` (wrapped for pyarrow here) or what
    ``build_checkpoint_filesystem`` returns."""
    given = ray_kwargs.pop("override_filesystem", None)
    if given is None:
        filesystem = build_checkpoint_filesystem(checkpoint_path, storage_options)
    elif isinstance(given, CairnFileSystem):
        filesystem = arrow_filesystem(given)
    elif cairn_of(given) is not None:
        filesystem = given
    else:
        raise TypeError(
            f"override_filesystem is a {type(given).__name__}; cairn's checkpoint manager needs "
            "cairn's filesystem: leave it out (storage_options= builds it), or pass "
            "cairn.build_checkpoint_filesystem(checkpoint_path, storage_options)"
        )
    name, columns = parse_id_column(id_column)
    config = CheckpointConfig(
        id_column=name,
        checkpoint_path=checkpoint_path,
        override_filesystem=filesystem,
        checkpoint_manager_cls=CheckpointManager,
        checkpoint_filter_cls=CheckpointFilter,
        **ray_kwargs,
    )
    if lease_ttl is not None:
        if not lease_ttl >= 3:
            raise ValueError(
                f"lease_ttl={lease_ttl!r}: give at least 3 seconds (the lease is renewed every "
                "third of its lifetime)"
            )
        setattr(config, _LEASE_TTL, float(lease_ttl))
    if max_filter_memory is not None and not (
        isinstance(max_filter_memory, int) and max_filter_memory > 0
    ):
        raise ValueError(
            f"max_filter_memory={max_filter_memory!r}: give the bytes a machine gives the "
            "committed set (2 GiB by default), or None never to shard it"
        )
    setattr(config, _MAX_FILTER_MEMORY, max_filter_memory)
    if not (isinstance(shard_timeout, (int, float)) and shard_timeout > 0):
        raise ValueError(
            f"shard_timeout={shard_timeout!r}: give the seconds a shard actor may stay "
            "unplaced or unanswering (600 by default)"
        )
    setattr(config, _SHARD_TIMEOUT, float(shard_timeout))
    if existing_output not in EXISTING_OUTPUT_CHOICES:
        raise ValueError(
            f"existing_output={existing_output!r}: give 'skip' (rows the output already holds "
            "are not written again; the default) or 'append' (every row is written beside them)"
        )
    setattr(config, _EXISTING_OUTPUT, existing_output)
    if columns is not None:
        setattr(config, KEY_COLUMNS, columns)
    setattr(config, _EXACT_IDS, bool(exact_ids))
    if (source_column is None) != (fan_out_column is None):
        raise ValueError(
            "give source_column and fan_out_column together: the column that names an output "
            "row's source, and the one that holds its source's output count"
        )
    if source_column is not None:
        if columns is None or source_column not in columns:
            raise ValueError(
                f"source_column={source_column!r} must be a column of a composite id_column "
                f"(such as [{source_column!r}, 'shot_idx']): an output row is keyed by its "
                "source and its place among the source's outputs"
            )
        if fan_out_column in columns:
            raise ValueError(
                f"fan_out_column={fan_out_column!r} is a key column: name the column that holds "
                "a source's output count, which is not part of an output's key"
            )
        setattr(config, LINEAGE, (source_column, fan_out_column))
    # Ray consults the manager only when the checkpoint directory exists:
    # made now, so the first run is settled and checked (its sink among
    # others) as every resume is.
    cairn_fs = cairn_of(filesystem)
    if cairn_fs is not None:
        cairn_fs._native.mkdir(cairn_fs._native.strip(_local(checkpoint_path, cairn_fs)))
    return config
