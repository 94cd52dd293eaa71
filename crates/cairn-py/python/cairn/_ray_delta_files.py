"""A unit's rows as a Delta data file not yet in the table: one Parquet
file in the table's directory and the ``add`` action (with Delta's file
statistics) a commit names it by. What cairn's Delta sink stages for its
group commits, on tables whose appends need nothing of deltalake's writer
(:func:`why_not_staged` says when they do)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
import time
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: The name of a data file cairn stages: Spark's and delta-rs's pattern,
#: a new UUID each.
DATA_FILE = re.compile(
    r"part-00000-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-c000\.snappy\.parquet"
)

#: Writer features (Delta protocol 7) an append of plain Parquet files
#: honours as deltalake's writer would; the checks of invariants and
#: constraints are made by :func:`why_not_staged`. Any other feature
#: (generated or identity columns, column mapping, row tracking, ...)
#: needs deltalake's own writer.
_PLAIN_WRITER_FEATURES = {"appendOnly", "timestampNtz", "invariants", "checkConstraints"}

#: Delta's default number of leading columns that get file statistics
#: (``delta.dataSkippingNumIndexedCols``).
_INDEXED_COLUMNS = 32


@dataclasses.dataclass
class StagedFile:
    """A data file written into the table's directory and in no commit:
    its path relative to the table (its name) and the ``add`` action's
    fields."""

    path: str
    size: int
    modification_time: int
    stats: str
    #: The columns the statistics give bounds and null counts for (None:
    #: the row count alone).
    indexed: Optional[List[str]] = None

    def add_action(self) -> Any:
        """deltalake's ``AddAction`` of the file (no partition values)."""
        from deltalake.transaction import AddAction

        return AddAction(self.path, self.size, {}, self.modification_time, True, self.stats)


def why_not_staged(table: Any, partition_by: Optional[List[str]]) -> Optional[str]:
    """Why a unit of the sink cannot be staged as plain Parquet files for
    the Delta table ``table`` (a ``DeltaTable``; None: it can): a
    partitioned table (the sink's ``partition_by`` or the table's own), a
    protocol feature an append must honour that only deltalake's writer
    does, a CHECK constraint or a column invariant (which deltalake checks
    each row against)."""
    metadata = table.metadata()
    if partition_by or metadata.partition_columns:
        return "it is partitioned"
    protocol = table.protocol()
    features = set(protocol.writer_features or [])
    if protocol.min_writer_version == 7:
        extra = features - _PLAIN_WRITER_FEATURES
        if extra:
            return f"its writer features {sorted(extra)} need deltalake's writer"
    elif protocol.min_writer_version > 2:
        return f"its writer version {protocol.min_writer_version} needs deltalake's writer"
    configuration = metadata.configuration or {}
    if any(key.startswith("delta.constraints.") for key in configuration):
        return "it has CHECK constraints"
    # Invariants live in a field's metadata, nested fields' too.
    if "delta.invariants" in table.schema().to_json():
        return "a column has an invariant"
    return None


def reads_files_of(current: str, staged: str) -> bool:
    """Whether a Delta table whose schema is ``current`` (its JSON) reads
    files written in the schema ``staged`` (the table's when they were
    written) as they are: each staged column is in it with the same type,
    nullable or non-null in both (the rows were checked against a
    non-null column), and the columns it added since take nulls (Delta
    reads a column a file lacks as nulls)."""
    now = {f["name"]: f for f in json.loads(current)["fields"]}
    then = json.loads(staged)["fields"]
    for field in then:
        kept = now.get(field["name"])
        if kept is None or kept["type"] != field["type"]:
            return False
        if not kept["nullable"] and field["nullable"]:
            return False
    written = {f["name"] for f in then}
    return all(f["nullable"] for name, f in now.items() if name not in written)


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` are taken into ``target`` as they are
    (a safe cast then checks each value): the same type, integers into
    integers, float32 into float64, strings into strings, binaries into
    binaries, timestamps of the same zone into timestamps, lists and
    structs of such; not a parse (a string into a number) nor a narrowing
    of floats."""
    if source == target:
        return True
    for kind in (pa.types.is_integer, pa.types.is_binary, pa.types.is_large_binary):
        if kind(source) and kind(target):
            return True
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(a(source) for a in strings) and any(b(target) for b in strings):
        return True
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return source.tz == target.tz
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    if any(a(source) for a in lists) and any(b(target) for b in lists):
        return not pa.types.is_fixed_size_list(target) and _castable(
            source.value_type, target.value_type
        )
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        names = [target.field(i).name for i in range(target.num_fields)]
        if [source.field(i).name for i in range(source.num_fields)] != names:
            return False
        return all(_castable(source.field(i).type, target.field(i).type) for i in range(len(names)))
    return False


def _nullable_inside(kind: pa.DataType) -> bool:
    """Whether every field nested in ``kind`` takes nulls (a non-null one
    is checked row by row by deltalake's writer only)."""
    if pa.types.is_struct(kind):
        return all(
            kind.field(i).nullable and _nullable_inside(kind.field(i).type)
            for i in range(kind.num_fields)
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return kind.value_field.nullable and _nullable_inside(kind.value_type)
    if pa.types.is_map(kind):
        return kind.item_field.nullable and _nullable_inside(kind.item_type)
    return True


def fitted(rows: pa.Table, schema: pa.Schema) -> Optional[pa.Table]:
    """``rows`` in the table's Arrow ``schema`` (its columns, their order
    and types), or None when they do not fit as they are: a column the
    table lacks or one it has that the rows lack (a schema change, left to
    deltalake's writer and its ``schema_mode``), a value the table's type
    cannot hold exactly or a type it is not taken from as it is
    (:func:`_castable`), a null in a column the table says has none, a
    nested field the table says has no nulls."""
    if set(rows.column_names) != set(schema.names) or len(rows.column_names) != len(schema):
        return None
    for field in schema:
        if not _castable(rows.schema.field(field.name).type, field.type):
            return None
        if not _nullable_inside(field.type):
            return None
    try:
        cast = rows.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
        return None
    for field in schema:
        if not field.nullable and cast[field.name].null_count:
            return None
    return cast


def stats_columns(schema: pa.Schema, configuration: Dict[str, Any]) -> Optional[List[str]]:
    """The columns Delta keeps file statistics for: those
    ``delta.dataSkippingStatsColumns`` names, else the first
    ``delta.dataSkippingNumIndexedCols`` (32; -1: all); None when they
    cannot be told without counting a nested column's leaves (a nested
    column among them, a nested name), or the setting is not a number."""
    named = configuration.get("delta.dataSkippingStatsColumns")
    if named:
        wanted = [name.strip().strip("`") for name in named.split(",") if name.strip()]
        fields = {f.name: f for f in schema}
        if any("." in name or name not in fields for name in wanted):
            return None
        chosen = [fields[name] for name in wanted]
    else:
        try:
            count = int(configuration.get("delta.dataSkippingNumIndexedCols", _INDEXED_COLUMNS))
        except ValueError:
            return None
        chosen = list(schema) if count < 0 else list(schema)[:count]
    if any(pa.types.is_nested(field.type) for field in chosen):
        return None
    return [field.name for field in chosen]


#: Milliseconds in one unit of an Arrow timestamp: Delta's statistics of
#: a timestamp are in milliseconds.
_MILLIS_PER = {"s": 1000, "ms": 1, "us": Fraction(1, 1000), "ns": Fraction(1, 1_000_000)}

_EPOCH = datetime.datetime(1970, 1, 1)


def _timestamp_bounds(column: pa.ChunkedArray) -> Optional[tuple]:
    """A timestamp column's bounds in whole milliseconds, as Delta's
    statistics write them (``2024-01-02T03:04:05.123Z`` for a timestamp,
    ``2024-01-02 03:04:05.123`` without a time zone): the min rounded down,
    the max rounded up (deltalake's writer cuts both to the millisecond, so
    its own max may be below the column's: its readers allow for that; a
    max rounded up needs no allowance from any reader). None past Python's
    calendar (years 1-9999)."""
    kind = column.type
    counts = pc.min_max(column.cast(pa.int64()))
    per = _MILLIS_PER[kind.unit]
    low = math.floor(counts["min"].as_py() * per)
    high = math.ceil(counts["max"].as_py() * per)
    try:
        low_at = _EPOCH + datetime.timedelta(milliseconds=low)
        high_at = _EPOCH + datetime.timedelta(milliseconds=high)
    except OverflowError:
        return None
    if kind.tz is None:
        return tuple(at.isoformat(" ", "milliseconds") for at in (low_at, high_at))
    # Values with a zone are instants counted from the epoch in UTC.
    return tuple(at.isoformat("T", "milliseconds") + "Z" for at in (low_at, high_at))


@dataclasses.dataclass(frozen=True)
class _Number:
    """A JSON number written as this text: a decimal's digits as they are
    (Python's JSON writes a float in exponent form, ``1e-05``, which
    deltalake's reader takes for no bound)."""

    text: str


def _decimal_bounds(column: pa.ChunkedArray) -> Optional[tuple]:
    """A decimal column's exact bounds as JSON numbers in positional form
    (``0.00001``, as deltalake's writer writes them), or None when a bound
    has more digits than a double holds (readers parse the number as one:
    its value would not be the decimal's)."""
    bounds = pc.min_max(column)
    values = (bounds["min"].as_py(), bounds["max"].as_py())
    if any(Decimal(repr(float(value))) != value for value in values):
        return None
    return tuple(_Number(format(value, "f")) for value in values)


def _json(value: Any) -> str:
    """``value`` as JSON, a :class:`_Number` as its text."""
    if isinstance(value, _Number):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _bounds(column: pa.ChunkedArray) -> Optional[tuple]:
    """A column's exact (min, max) of its values that are not null, as
    Delta's statistics write them, or None when it cannot be given:
    integers, booleans, strings (whole: a prefix is no upper bound), dates,
    timestamps (in milliseconds, widened: :func:`_timestamp_bounds`) and
    decimals a double holds exactly; floats only when every value is
    finite (a NaN is in no min or max and yet matches ``!=``; JSON has no
    infinity). Binary, nested and the rest: None."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        return _timestamp_bounds(column)
    if pa.types.is_decimal(kind):
        return _decimal_bounds(column)
    numeric = pa.types.is_integer(kind) and kind != pa.uint64()
    if pa.types.is_floating(kind):
        if not pc.all(pc.is_finite(column)).as_py():
            return None
        numeric = True
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if not (numeric or text or pa.types.is_boolean(kind) or pa.types.is_date32(kind)):
        return None
    bounds = pc.min_max(column)
    try:
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    except (ValueError, OverflowError):
        return None  # a date Python's calendar does not hold (years 1-9999)
    if pa.types.is_date32(kind):
        return low.isoformat(), high.isoformat()
    if pa.types.is_floating(kind):
        # Zero's sign: readers ordering floats totally (arrow-rs) have
        # -0.0 < 0.0, so a zero bound is widened as Parquet's rule says.
        if low == 0.0:
            low = -0.0
        if high == 0.0:
            high = 0.0
    return low, high


def file_stats(rows: pa.Table, columns: Optional[List[str]]) -> str:
    """Delta's statistics of a file of ``rows`` (JSON), computed from the
    rows: the row count, and for ``columns`` (:func:`stats_columns`) the
    null counts and min and max (:func:`_bounds`: exact, timestamps
    widened to whole milliseconds), or the row count alone when one of
    them has values without bounds. All or nothing:
    deltalake's reader takes a column missing from a file's bounds for a
    column of nulls and skips the file for any filter on it; a file with
    no bounds at all it reads for every filter."""
    return _statistics(rows, columns)[0]


def _statistics(rows: pa.Table, columns: Optional[List[str]]) -> Tuple[str, Optional[List[str]]]:
    """:func:`file_stats`, and the columns it gives bounds and null counts
    for (None: the row count alone)."""
    count = {"numRecords": rows.num_rows}
    if columns is None:
        return json.dumps(count), None
    low: Dict[str, Any] = {}
    high: Dict[str, Any] = {}
    nulls: Dict[str, int] = {}
    for name in columns:
        column = rows[name]
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue  # only nulls: no bounds, as Delta writes it
        bounds = _bounds(column)
        if bounds is None:
            return json.dumps(count), None
        low[name], high[name] = bounds
    stats = _json({**count, "minValues": low, "maxValues": high, "nullCount": nulls})
    return stats, columns


def stats_hold(
    staged: StagedFile, written: List[str], schema: pa.Schema, configuration: Dict[str, Any]
) -> bool:
    """Whether a staged file's statistics still serve the table's readers
    under its current ``schema`` and settings: they give the row count
    alone (read for every filter), or bounds for every column the table
    now indexes that the file has (``written``, its columns: a reader
    takes an indexed column without bounds for one of nulls and skips the
    file for any filter on it, which is right for a column added since,
    and wrong for one of the file's)."""
    if staged.indexed is None:
        return True
    # The file's own columns, in the table's order: a column added since
    # (Delta appends it, maybe nested) is not in the file, and a reader
    # taking it for nulls there is right. Leaving the others out can only
    # make more of the file's columns count as indexed: never fewer.
    kept = set(written)
    own = pa.schema([field for field in schema if field.name in kept])
    named = configuration.get("delta.dataSkippingStatsColumns")
    if named:
        wanted = [name.strip().strip("`") for name in named.split(",") if name.strip()]
        # A name whose column is not in the file (one added since) is
        # no column of the file's; a nested or unknown one of the file's
        # stays, and then nothing can be told (refused).
        mine = [name for name in wanted if name.split(".")[0] in kept]
        if not mine:
            return True
        configuration = {**configuration, "delta.dataSkippingStatsColumns": ",".join(mine)}
    now = stats_columns(own, configuration)
    return now is not None and set(now) <= set(staged.indexed)


def write_staged(
    rows: pa.Table, filesystem: Any, table_path: str, configuration: Dict[str, Any]
) -> StagedFile:
    """Writes ``rows`` (already in the table's schema) as one Parquet file
    in the table's directory (``table_path`` on the pyarrow
    ``filesystem``) under a new name no commit names yet."""
    # The statistics first: nothing is written for rows they fail on.
    stats, indexed = _statistics(rows, stats_columns(rows.schema, configuration))
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    with filesystem.open_output_stream(f"{table_path.rstrip('/')}/{name}") as out:
        pq.write_table(rows, out, compression="snappy")
        size = out.tell()
    return StagedFile(name, size, int(time.time() * 1000), stats, indexed)
