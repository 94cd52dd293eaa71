"""``cairn.ray.read_parquet``: Ray Data 2.60's Parquet reader that, on a
resumed job, leaves out the row groups whose IDs are all committed.

Ray's own resume reads the whole input and drops committed rows after the
read (the checkpoint filter runs downstream of it), so a 95%-committed
resume costs a full read. Here the read tasks are planned with the
committed set in hand: a row group is left out when every row of it is
known committed without reading it --

- ``row_hash`` IDs (``include_row_hash=True``, ID column ``row_hash``): a
  row's ID follows from the file's path and its position, so the row
  group's IDs are derived and looked up;
- a signed integer ID column: the row group's statistics (no nulls, exact
  min and max) prove it when the set holds every integer from min to max.

Everything else is read as Ray reads it, and the checkpoint filter still
drops the committed rows of what is read. Leaving a row group out is only
ever an optimisation: its rows are exactly those the filter would drop.

The set comes from :class:`cairn.ray.CheckpointManager`, which Ray runs
while planning the read: it offers the set's object-store reference for
that planning (:func:`offer_committed`), and the read tasks of that same
planning take it once (:func:`_take_committed`). A read planned without
cairn's manager, or after the checkpoint is gone, reads everything. When
the set is split over shard actors (over ``max_filter_memory``), the
planning asks every shard once about all row groups; each answers for the
IDs of its own key range, and a row group is left out when all say so.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from ray.data import Dataset
from ray.data.block import BlockMetadata
from ray.data.context import DataContext
from ray.data.datasource.datasource import ReadTask
from ray.data.datasource.partitioning import Partitioning, PathPartitionFilter

from ._arrow_fs import CairnHandler, RangeFile
from ._native import NativeIdSet
from ._ray_compat import (
    ArrowBlockAccessor,
    ParquetDatasource,
    compute_row_hashes,
    default_read_blocks,
    get_column_references,
    iterate_with_retry,
    raise_on_pickle_object_columns,
    read_batches_from,
    unwrap_protocol,
    unwrapped,
)
from ._ray_shards import ShardedSet, covers_each

logger = logging.getLogger("cairn.ray")

#: Committed sets offered by the manager, by checkpoint path: the planning
#: (its DataContext, weakly), the checkpoint config it was made under, the
#: set's object-store reference, and the input column the set holds values
#: of (None: the config's ID column).
_OFFERED: Dict[str, Tuple["weakref.ref[Any]", Any, Any, Optional[str]]] = {}

#: Footers read at once on the driver when the read tasks are planned.
_FOOTER_THREADS = 16
#: Bytes read from a file's end to find its footer in one request: the
#: metadata of a few hundred row groups of a few columns fits.
_FOOTER_GUESS = 16 << 10
#: Files no larger than this are fetched whole by a read task whatever it
#: reads: pyarrow's first read of a Parquet file (for its footer) takes its
#: last 64 KiB.
_WHOLE_FILE_BYTES = 64 << 10
#: Files no larger than this are fetched whole by a read task that reads
#: all of them (every row group and column, no filter): one GET where a
#: ranged read needs a footer GET and one or more data GETs. A unit's
#: cheapest read of its input is one request; the bytes are the same.
_WHOLE_READ_BYTES = 8 << 20

#: The widest min..max range, as a multiple of the row count, whose every
#: integer is looked up to prove a row group committed.
_MAX_SPAN_PER_ROW = 4

_SIGNED_INTS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


#: The skipping datasources alive in this process: without one, nothing
#: can take an offer, so none is kept (it would pin the set in the object
#: store).
_READERS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def offer_committed(
    data_context: Any, checkpoint_path: str, ref: Any, column: Optional[str] = None
) -> None:
    """Offers the committed set ``ref`` (the manager's object-store
    reference) to the read tasks of the planning whose context is
    ``data_context``: a set of the values of the input's ``column``, the
    config's ID column when None (under source lineage, the sources all of
    whose outputs are committed). A later offer for the same checkpoint
    replaces it; the offer goes with the context."""
    if data_context is None or not _READERS:
        return
    config = getattr(data_context, "checkpoint_config", None)
    _OFFERED[checkpoint_path] = (weakref.ref(data_context), config, ref, column)
    weakref.finalize(data_context, _withdraw_if_gone, checkpoint_path)


def withdraw_committed(checkpoint_path: str) -> None:
    """Withdraws any set offered for ``checkpoint_path``: the manager calls
    it as each planning starts, so an offer a planning never took (its read
    was Ray's own, or it failed before reading) cannot reach a later one,
    which may find fewer units committed."""
    _OFFERED.pop(checkpoint_path, None)


def _withdraw_if_gone(checkpoint_path: str) -> None:
    offered = _OFFERED.get(checkpoint_path)
    if offered is not None and offered[0]() is None:
        del _OFFERED[checkpoint_path]


def _take_committed(
    data_context: Any,
) -> Optional[Tuple[Union[NativeIdSet, ShardedSet], str]]:
    """The committed set offered to this planning and the input column its
    values are of, taken once: ``None`` when there is none, it was offered
    to another planning, or the checkpoint is gone since (a set must never
    outlive its checkpoint)."""
    config = getattr(data_context, "checkpoint_config", None)
    if config is None:
        return None
    offered = _OFFERED.pop(config.checkpoint_path, None)
    if offered is None or offered[0]() is not data_context or offered[1] is not config:
        return None
    checkpoint = config.filesystem.get_file_info(unwrap_protocol(config.checkpoint_path))
    if checkpoint.type == pafs.FileType.NotFound:
        return None
    column = offered[3] if offered[3] is not None else config.id_column
    value = ray.get(offered[2])
    if isinstance(value, ShardedSet):
        return value, column
    array = np.ascontiguousarray(value, dtype=np.uint8)
    return NativeIdSet._from_shared_memory(array), column


def _path_seed(path: str) -> int:
    """The seed of Ray's ``row_hash`` for the file at ``path``: the first 8
    bytes of the path's MD5, little-endian (as ``compute_row_hashes``)."""
    return int.from_bytes(hashlib.md5(path.encode("utf-8")).digest()[:8], "little")


@dataclass
class _Piece:
    """A run of consecutive row groups of one file to read (all of them
    when ``row_groups`` is None), whose first row is row ``first_row`` of
    the file. Pickled by what rebuilds its fragment, never its footer."""

    format: Any
    path: str
    filesystem: Any
    partition_expression: Any
    row_groups: Optional[List[int]]
    first_row: int
    rows: int
    compressed_bytes: int
    #: The file's size as listed at planning, 0 when the listing gave none.
    file_size: int = 0

    def fragment(self, reads_everything: bool = False) -> Any:
        """The fragment to read, opened without asking the store for the
        file's size again where the listing gave it (see
        :func:`_sized_fragment`); ``reads_everything`` when the read takes
        every column and no filter (with no row group left out, the whole
        file is read)."""
        sized = _sized_fragment(self, reads_everything)
        return sized if sized is not None else self.listed_fragment()

    def listed_fragment(self) -> Any:
        """The fragment on the filesystem the file was listed with, as
        Ray's read task makes it."""
        return self.format.make_fragment(
            self.path, self.filesystem, self.partition_expression, row_groups=self.row_groups
        )

    def ranged_fragment(self, handler: CairnHandler) -> "_Listed":
        """The fragment read by cairn's own ranged reads of the listed size
        (a read past the end of a file that shrank since is an error)."""
        path = handler.fs._strip_protocol(self.path)
        return self.listed_as(pa.PythonFile(RangeFile(handler.fs, path, self.file_size), mode="r"))

    def listed_as(
        self,
        source: Any,
        filesystem: Any = None,
        fallback: Optional[Callable[[], "_Listed"]] = None,
        **options: Any,
    ) -> "_Listed":
        """The fragment of this piece's row groups read from ``source`` (a
        buffer, a file, or a path on ``filesystem``; ``options`` are
        ``make_fragment``'s), under the path and filesystem it was listed
        with."""
        fragment = self.format.make_fragment(
            source, filesystem, self.partition_expression, row_groups=self.row_groups, **options
        )
        return _Listed(fragment, self.path, self.filesystem, fallback)


def _object_store_handler(filesystem: Any) -> Optional[CairnHandler]:
    """The handler of a cairn pyarrow filesystem over an object store (not
    local disk, whose opens send no request), else None; under Ray's
    retrying wrapper too (whose retries the native client makes itself)."""
    handler = getattr(unwrapped(filesystem), "handler", None)
    if isinstance(handler, CairnHandler) and handler.fs._protocol != "file":
        return handler
    return None


class _Listed:
    """A fragment read from another source (the file's bytes, or pyarrow's
    S3 client told the file's size), as Ray's batch reader sees it: with the
    path and filesystem the file was listed with, which give the partition
    values, the ``path`` column, error messages and the reader for nested
    columns too large for one batch."""

    def __init__(
        self,
        fragment: Any,
        path: str,
        filesystem: Any,
        fallback: Optional[Callable[[], "_Listed"]],
    ) -> None:
        self._fragment = fragment
        self.path = path
        self.filesystem = filesystem
        #: The fragment to read instead when this one fails before its first
        #: batch (one read through pyarrow's S3 client is read through
        #: cairn's own, as the handler's opens fall back), or None.
        self.fallback = fallback

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fragment, name)


def _read_whole(handler: CairnHandler, path: str, size: int) -> pa.Buffer:
    """The ``size`` bytes of the file at ``path`` (stripped), in one request,
    in memory Arrow owns (a buffer over Python's bytes, released by one of
    Arrow's threads while the interpreter shuts down, aborts the process;
    see ``_arrow_fs._Reads``); an error naming the file when it is no
    longer that size."""
    data = handler.fs._native.read_range(path, 0, size, size)
    if len(data) != size:
        raise OSError(
            f"{handler.fs.unstrip_protocol(path)} has changed since the job listed its input "
            f"({size} bytes then, {len(data)} read): run the job again on input that does not "
            "change while it runs"
        )
    out = pa.BufferOutputStream()
    out.write(data)
    return out.getvalue()


def _sized_fragment(piece: _Piece, reads_everything: bool = False) -> Optional[_Listed]:
    """``piece``'s fragment opened with the size the listing gave, on a
    cairn filesystem over an object store, or None (read as Ray does).
    pyarrow opens a file by path with a HEAD for its size, then reads the
    footer from the last 64 KiB, and Ray's reader opens every file twice
    (once for its schema, once for its batches): 2 HEADs and 2 GETs for a
    small file. Here a file is fetched whole in one GET when it is no
    larger than pyarrow's first footer read (pyarrow would fetch all of it
    for its footer anyway), or no larger than ``_WHOLE_READ_BYTES`` and
    read whole (``reads_everything`` and every row group: the same bytes
    in one request, not a footer's and the data's); a larger one is opened
    on pyarrow's S3 client with its size (no HEAD), or on cairn's ranged
    reads where that client is not used."""
    handler = _object_store_handler(piece.filesystem)
    if handler is None or piece.file_size <= 0:
        return None
    path = handler.fs._strip_protocol(piece.path)
    read_whole = reads_everything and piece.row_groups is None
    if piece.file_size <= (_WHOLE_READ_BYTES if read_whole else _WHOLE_FILE_BYTES):
        return piece.listed_as(_read_whole(handler, path, piece.file_size))
    s3 = handler._pyarrow_s3()
    if s3 is None:
        return piece.ranged_fragment(handler)
    return piece.listed_as(
        path, s3, lambda: piece.ranged_fragment(handler), file_size=piece.file_size
    )


@dataclass
class SkipReport:
    """What a planned read leaves out: row groups, rows and compressed
    bytes, left out and in all."""

    row_groups_skipped: int = 0
    row_groups: int = 0
    rows_skipped: int = 0
    rows: int = 0
    bytes_skipped: int = 0
    bytes: int = 0


def _footer(fragment: Any, file_size: int) -> Any:
    """The Parquet footer (``FileMetaData``) of a fragment's file, read by
    exact ranges: the tail of ``_FOOTER_GUESS`` bytes, and the rest of the
    metadata only when it is longer. pyarrow's own read of a footer takes
    the last 64 KiB, a few percent of a file of a few MB, for every file a
    resume plans, committed or not. On a cairn filesystem over an object
    store the listed ``file_size`` spares the open its HEAD. An encrypted
    footer, or one that does not parse, is left to pyarrow's own read (and
    its error, which names the file)."""
    handler = _object_store_handler(fragment.filesystem)
    if handler is not None and file_size > 0:
        path = handler.fs._strip_protocol(fragment.path)
        metadata = _parse_footer(
            lambda n, offset: handler.fs._native.read_range(path, offset, offset + n, file_size),
            file_size,
        )
    else:
        with fragment.filesystem.open_input_file(fragment.path) as f:
            metadata = _parse_footer(f.read_at, f.size())
    if metadata is not None:
        return metadata
    fragment.ensure_complete_metadata()
    return fragment.metadata


def _parse_footer(read_at: Callable[[int, int], bytes], size: int) -> Any:
    """The footer of a file of ``size`` bytes read by ``read_at(n,
    offset)``, or None when it does not parse."""
    tail = read_at(min(size, _FOOTER_GUESS), max(0, size - _FOOTER_GUESS))
    wanted = int.from_bytes(tail[-8:-4], "little") + 8 if len(tail) >= 8 else size + 1
    if tail[-4:] == b"PAR1" and wanted <= size:
        if wanted > len(tail):
            tail = read_at(wanted - len(tail), size - wanted) + tail
        try:
            # The metadata, its length and the magic, read as a file of
            # their own: pyarrow checks only a file's last 8 bytes.
            return pq.read_metadata(pa.BufferReader(tail[-wanted:]))
        except (OSError, ValueError):
            pass
    return None


def _id_leaf(metadata: Any, id_column: str) -> Optional[int]:
    """The leaf index of ``id_column`` when it is a signed integer column
    (whose statistics order like its values)."""
    arrow_schema = metadata.schema.to_arrow_schema()
    index = arrow_schema.get_field_index(id_column)
    if index < 0 or arrow_schema.field(index).type not in _SIGNED_INTS:
        return None
    for leaf in range(metadata.num_columns):
        if metadata.schema.column(leaf).path == id_column:
            return leaf
    return None


def _stats_range(statistics: Any, rows: int) -> Optional[Tuple[int, int]]:
    """The ``(min, max)`` of a row group's integer IDs when its statistics
    could prove them all committed (no nulls: a null ID is never committed;
    a range at most a few times the row count, whose every integer is
    looked up), else None."""
    if statistics is None or not statistics.has_min_max or not statistics.has_null_count:
        return None
    if statistics.null_count != 0:
        return None
    low, high = statistics.min, statistics.max
    if not isinstance(low, int) or not isinstance(high, int) or low > high:
        return None
    if high - low + 1 > _MAX_SPAN_PER_ROW * rows:
        return None
    return low, high


def _covered(
    committed: Union[NativeIdSet, ShardedSet],
    queries: List[Tuple[int, int, int]],
    by_row_hash: bool,
) -> List[bool]:
    """For each query (``(seed, first_row, rows)`` of ``row_hash`` IDs,
    else ``(min, max, 0)`` of integer statistics), whether the row group's
    IDs are all committed. A sharded set asks each shard once, for all."""
    if isinstance(committed, ShardedSet):
        return committed.covers(queries, by_row_hash)
    return covers_each(committed, queries, by_row_hash)


def _plan_pieces(
    fragments: List[Any],
    committed: Optional[Union[NativeIdSet, ShardedSet]],
    id_column: str,
    by_row_hash: bool,
    one_group_a_piece: bool,
) -> Tuple[List[_Piece], SkipReport]:
    """The pieces of ``fragments`` (Ray's ``_ParquetFragment``) left to
    read: each file's runs of row groups not all committed (every group
    without a ``committed`` set), or each such group a piece of its own
    with ``one_group_a_piece`` (``row_hash`` numbered per row group)."""
    originals = [f.original for f in fragments]
    sizes = [f.file_size for f in fragments]
    with ThreadPoolExecutor(max_workers=max(1, min(_FOOTER_THREADS, len(originals)))) as pool:
        footers = list(pool.map(_footer, originals, sizes))

    # Every row group's question first, so a sharded set is asked once.
    groups: List[List[Tuple[int, int, Optional[int]]]] = []
    queries: List[Tuple[int, int, int]] = []
    for fragment, metadata in zip(originals, footers):
        leaf = None if by_row_hash else _id_leaf(metadata, id_column)
        seed = _path_seed(fragment.path) if by_row_hash else 0
        first_row = 0
        file_groups = []
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            rows = group.num_rows
            size = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
            query: Optional[Tuple[int, int, int]] = None
            if committed is None:
                pass
            elif by_row_hash:
                query = (seed, first_row, rows)
            elif leaf is not None:
                bounds = _stats_range(group.column(leaf).statistics, rows)
                query = None if bounds is None else (bounds[0], bounds[1], 0)
            file_groups.append((rows, size, None if query is None else len(queries)))
            if query is not None:
                queries.append(query)
            first_row += rows
        groups.append(file_groups)
    covered = _covered(committed, queries, by_row_hash) if committed is not None else []

    report = SkipReport()
    pieces: List[_Piece] = []
    for fragment, file_size, file_groups in zip(originals, sizes, groups):
        run: Optional[_Piece] = None
        first_row = 0
        kept_all = True
        file_pieces: List[_Piece] = []
        for index, (rows, size, query) in enumerate(file_groups):
            skip = query is not None and covered[query]
            report.row_groups += 1
            report.rows += rows
            report.bytes += size
            if skip:
                report.row_groups_skipped += 1
                report.rows_skipped += rows
                report.bytes_skipped += size
                kept_all = False
                run = None
            else:
                if run is None or one_group_a_piece:
                    run = _Piece(
                        fragment.format,
                        fragment.path,
                        fragment.filesystem,
                        fragment.partition_expression,
                        [],
                        first_row,
                        0,
                        0,
                        file_size,
                    )
                    file_pieces.append(run)
                assert run.row_groups is not None
                run.row_groups.append(index)
                run.rows += rows
                run.compressed_bytes += size
            first_row += rows
        if kept_all and file_pieces and not one_group_a_piece:
            # Read whole, as Ray does.
            file_pieces[0].row_groups = None
        pieces.extend(file_pieces)
    return pieces, report


def _read_pieces(
    pieces: List[_Piece],
    block_udf: Optional[Callable[[Any], Any]],
    to_batches_kwargs: Dict[str, Any],
    data_columns: Optional[List[str]],
    partition_columns: Optional[List[str]],
    read_schema: Optional[pa.Schema],
    include_paths: bool,
    include_row_hash: bool,
    partitioning: Optional[Partitioning],
    filter_expr: Any,
    filter_columns: Optional[List[str]],
    row_limit: Optional[int] = None,
) -> Iterator[pa.Table]:
    """A read task's blocks: each piece read through Ray's own batch reader,
    its ``row_hash`` numbered from the piece's first row in its file
    (``row_limit``: the task's row limit, which Ray applies; with one, no
    file is fetched whole past pyarrow's footer read)."""

    def batches(fragment: Any) -> Iterator[pa.Table]:
        return read_batches_from(
            fragment,
            schema=read_schema,
            data_columns=data_columns,
            partition_columns=partition_columns,
            partitioning=partitioning,
            include_path=include_paths,
            include_row_hash=False,
            filter_expr=filter_expr,
            filter_columns=filter_columns,
            to_batches_kwargs=to_batches_kwargs,
        )

    # A task that stops after a few rows does not fetch a whole file.
    reads_everything = data_columns is None and filter_expr is None and row_limit is None
    for piece in pieces:
        position = piece.first_row
        retried = DataContext.get_current().retried_io_errors
        for table in iterate_with_retry(
            lambda piece=piece: _piece_tables(piece, batches, reads_everything),
            "reading batches",
            match=retried,
        ):
            if include_row_hash:
                hashes = compute_row_hashes(piece.path, position, table.num_rows)
                table = ArrowBlockAccessor.for_block(table).fill_column(
                    "row_hash", pa.array(hashes, type=pa.uint64())
                )
                position += table.num_rows
            if table.num_rows > 0:
                raise_on_pickle_object_columns(table)
                yield block_udf(table) if block_udf is not None else table


def _piece_tables(
    piece: _Piece, batches: Callable[[Any], Iterator[pa.Table]], reads_everything: bool = False
) -> Iterator[pa.Table]:
    """``batches`` of ``piece``'s fragment (``reads_everything``: see
    :meth:`_Piece.fragment`). A file pyarrow's S3 client fails to open is
    read through cairn's own client, as the handler's own opens fall back
    (the error names the file if that fails too)."""
    fragment = piece.fragment(reads_everything)
    fallback = getattr(fragment, "fallback", None)
    if fallback is None:
        yield from batches(fragment)
        return
    started = False
    try:
        for table in batches(fragment):
            started = True
            yield table
    except OSError:
        if started:
            raise
        yield from batches(fallback())


class SkippingParquetDatasource(ParquetDatasource):
    """Ray 2.60's Parquet datasource whose read tasks, when the planning
    carries cairn's committed set, leave out the row groups whose IDs are
    all committed. Without a set it is Ray's datasource unchanged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # How Ray's own read_parquet would number row_hash after a
        # pushed-down filter: its V2 datasource (Ray 2.60's default) from
        # each row group's first row in the file, counting the rows the
        # filter keeps; the V1 one from the file's first row.
        self._row_hash_by_row_group = bool(DataContext.get_current().use_datasource_v2)
        _READERS.add(self)

    def get_name(self) -> str:
        return "CairnParquet"

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: Optional[int] = None,
        data_context: Optional[DataContext] = None,
    ) -> List[ReadTask]:
        taken = _take_committed(data_context)
        committed, id_column = taken if taken is not None else (None, None)
        if committed is not None and len(committed) == 0:
            committed, id_column = None, None
        return self._read_tasks_given(
            committed, id_column, parallelism, per_task_row_limit, data_context
        )

    def _read_tasks_given(
        self,
        committed: Optional[Union[NativeIdSet, ShardedSet]],
        id_column: Optional[str],
        parallelism: int,
        per_task_row_limit: Optional[int] = None,
        data_context: Optional[DataContext] = None,
    ) -> List[ReadTask]:
        """The read tasks with ``committed`` (the set of ``id_column``, or
        None) in hand: Ray's own when nothing can be left out and Ray's
        numbering of ``row_hash`` is the one wanted."""
        filtered = self._predicate_expr is not None
        # After a filter, row_hash counts the rows the filter keeps: from a
        # row group's first row (V2), a group left out changes no other
        # group's numbers; from the file's first row (V1), it would
        # renumber every row after it.
        numbered_by_group = self._include_row_hash and filtered and self._row_hash_by_row_group
        skips_keep_numbers = not (self._include_row_hash and filtered) or numbered_by_group
        by_row_hash = id_column == "row_hash" and self._include_row_hash
        provable = False
        if committed is not None and self._shuffle is None and skips_keep_numbers:
            id_index = self._file_schema.get_field_index(id_column)
            provable = by_row_hash or (
                id_index >= 0 and self._file_schema.field(id_index).type in _SIGNED_INTS
            )
        if not provable:
            committed = None
            if not numbered_by_group or self._shuffle is not None:
                # Nothing to prove a row group committed with, and Ray's
                # numbering: no footer is read.
                return self._whole_file_tasks(parallelism, per_task_row_limit, data_context)
        pieces, report = _plan_pieces(
            self._pq_fragments, committed, id_column or "", by_row_hash, numbered_by_group
        )
        del committed
        if provable:
            logger.info(
                "cairn: read_parquet leaves out %d of %d row groups (%d of %d rows, %d of %d "
                "compressed bytes) whose IDs are all committed",
                report.row_groups_skipped,
                report.row_groups,
                report.rows_skipped,
                report.rows,
                report.bytes_skipped,
                report.bytes,
            )
        if report.row_groups_skipped == 0 and not numbered_by_group:
            return self._whole_file_tasks(parallelism, per_task_row_limit, data_context)
        return self._tasks_for(pieces, parallelism, per_task_row_limit)

    def _whole_file_tasks(
        self,
        parallelism: int,
        per_task_row_limit: Optional[int],
        data_context: Optional[DataContext],
    ) -> List[ReadTask]:
        """Read tasks of every file whole, grouped as Ray groups them: Ray's
        own on local disk or with a shuffle; on a cairn filesystem over an
        object store, cairn's, which open each file with its listed size
        (:func:`_sized_fragment`) and number ``row_hash`` from the file's
        first row, as Ray's reader does for a whole file."""
        fragments = self._pq_fragments
        if (
            self._shuffle is not None
            or not fragments
            or _object_store_handler(fragments[0].original.filesystem) is None
        ):
            return super().get_read_tasks(parallelism, per_task_row_limit, data_context)
        pieces = []
        for listed in fragments:
            fragment = listed.original
            pieces.append(
                _Piece(
                    fragment.format,
                    fragment.path,
                    fragment.filesystem,
                    fragment.partition_expression,
                    None,
                    0,
                    0,
                    listed.file_size,
                    listed.file_size,
                )
            )
        return self._tasks_for(pieces, parallelism, per_task_row_limit)

    def _tasks_for(
        self, pieces: List[_Piece], parallelism: int, per_task_row_limit: Optional[int]
    ) -> List[ReadTask]:
        target_schema = self._derive_schema(
            self._read_schema,
            file_schema=self._file_schema,
            partition_schema=self._partition_schema,
            projected_columns=self.get_current_projection(),
            _block_udf=self._block_udf,
            include_paths=self._include_paths,
            include_row_hash=self._include_row_hash,
        )
        filter_expr = None
        filter_columns = None
        if self._predicate_expr is not None:
            filter_expr = self._predicate_expr.to_pyarrow()
            filter_columns = get_column_references(self._predicate_expr)
        ratio = self._encoding_ratio
        arguments = (
            self._block_udf,
            self._scanner_kwargs,
            self._get_data_columns(),
            self._get_partition_columns(),
            self._read_schema,
            self._include_paths,
            self._include_row_hash,
            self._partitioning,
            filter_expr,
            filter_columns,
            per_task_row_limit,
        )
        tasks = []
        for group in np.array_split(np.arange(len(pieces)), max(1, parallelism)):
            if len(group) == 0:
                continue
            chosen = [pieces[i] for i in group]
            meta = BlockMetadata(
                num_rows=None,
                size_bytes=round(sum(p.compressed_bytes for p in chosen) * ratio),
                input_files=sorted({p.path for p in chosen}),
                exec_stats=None,
            )
            tasks.append(
                ReadTask(
                    lambda chosen=chosen: _read_pieces(chosen, *arguments),
                    meta,
                    schema=target_schema,
                    per_task_row_limit=per_task_row_limit,
                )
            )
        return tasks


def read_parquet(
    paths: Any,
    *,
    filesystem: Optional[pafs.FileSystem] = None,
    columns: Optional[List[str]] = None,
    include_row_hash: bool = False,
    include_paths: bool = False,
    partitioning: Optional[Partitioning] = Partitioning("hive"),
    partition_filter: Optional[PathPartitionFilter] = None,
    file_extensions: Optional[List[str]] = None,
    schema: Optional[pa.Schema] = None,
    shuffle: Any = None,
    **read_args: Any,
) -> Dataset:
    """``ray.data.read_parquet`` that skips committed row groups on a
    resumed job (see the module's text): the same rows, columns and
    ``row_hash`` IDs as Ray 2.60's reader, with its checkpoint filter still
    dropping the committed rows of what is read. Keyword arguments of
    ``ray.data.read_datasource`` (``parallelism``, ``override_num_blocks``,
    ``concurrency``, ``num_cpus``, ``memory``, ``ray_remote_args``, ...)
    go there; others are pyarrow's batch-reading options, as for Ray.

    Example (``cairn.ray.checkpoint_config`` set on the data context)::

        ds = cairn.ray.read_parquet("s3://bucket/in", filesystem=fs, include_row_hash=True)
    """
    import inspect

    if "filter" in read_args:
        raise ValueError(
            "cairn.ray.read_parquet(filter=...) is not supported, as Ray 2.60's read_parquet "
            "refuses it: use cairn.ray.read_parquet(path).filter(expr=...), which gives the "
            "row_hash IDs Ray's reader gives after the same filter"
        )
    accepted = set(inspect.signature(ray.data.read_datasource).parameters)
    datasource_args = {k: v for k, v in read_args.items() if k in accepted}
    to_batch_kwargs = {k: v for k, v in read_args.items() if k not in accepted}
    datasource = SkippingParquetDatasource(
        paths,
        columns=columns,
        to_batch_kwargs=to_batch_kwargs,
        filesystem=filesystem,
        schema=schema,
        partition_filter=partition_filter,
        partitioning=partitioning,
        shuffle=shuffle,
        include_paths=include_paths,
        include_row_hash=include_row_hash,
        file_extensions=(
            file_extensions if file_extensions is not None else ParquetDatasource._FILE_EXTENSIONS
        ),
    )
    if (
        datasource_args.get("override_num_blocks") is None
        and datasource_args.get("parallelism", -1) == -1
        and ray.is_initialized()
    ):
        # No block split after the read: Ray's read operator for a
        # datasource cuts each read task's output until the block count
        # reaches its default parallelism (200, or twice the CPUs), and
        # every block becomes a write task, so a unit with its checkpoint
        # requests and ID file (a file of 100,000 rows was two units).
        # Asking for at most one block a file gives one read task a file
        # below that count, and Ray's grouping of files into tasks above
        # it, unchanged; blocks larger than the target size are still cut.
        datasource_args["override_num_blocks"] = max(
            1, min(len(datasource._pq_fragments), default_read_blocks(datasource))
        )
    return ray.data.read_datasource(datasource, **datasource_args)
