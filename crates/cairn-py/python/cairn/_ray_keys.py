"""A job's key: one ID column, or several (a composite key such as
``["video", "shot_idx"]``) that cairn encodes into one binary ID per row.

The encoding is exact and self-delimiting, so two rows get the same ID
only when every key column is equal: each column's value is a tag byte
then its bytes. Integers of any width and sign are ``+`` or ``-`` and
the value's 8 bytes (two's complement, big-endian), so ``7`` is the same
key in an int32 and a uint64 column; strings are ``s``, binaries ``b``,
each with its length in 4 bytes, big-endian, before its bytes. The
committed set then holds binary IDs, exact or fingerprinted as a string
ID's are.

A composite key's name, the column of its IDs in the checkpoint's ID files
and the name its checkpoint is bound to, is the JSON list of its columns
(``'["video","shot_idx"]'``); Ray's ``CheckpointConfig.id_column`` holds
it."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The attribute of a CheckpointConfig that holds a composite key's
#: columns (absent for one ID column).
KEY_COLUMNS = "_cairn_key_columns"


class KeyRefused(ValueError):
    """A block whose key cannot be read: a key column missing, holding a
    null, or of a type a key cannot be made of."""


def key_name(columns: Sequence[str]) -> str:
    """The name of the composite key of ``columns``: their JSON list."""
    return json.dumps(list(columns), separators=(",", ":"))


def parse_id_column(id_column: Union[str, Sequence[str]]) -> Tuple[str, Optional[List[str]]]:
    """The key's name and, for a composite key, its columns: ``id_column``
    is one column's name, or a list of two or more (a list of one is that
    column)."""
    if isinstance(id_column, str):
        if not id_column:
            raise ValueError("id_column is empty: name the column that identifies a row")
        return id_column, None
    columns = list(id_column)
    bad = [c for c in columns if not isinstance(c, str) or not c]
    if not columns or bad:
        raise ValueError(
            f"id_column={id_column!r}: give a column's name, or a list of the names of the "
            "columns whose values together identify a row, such as ['video', 'shot_idx']"
        )
    if len(set(columns)) != len(columns):
        raise ValueError(f"id_column={id_column!r} names a column twice: name each once")
    if len(columns) == 1:
        return columns[0], None
    return key_name(columns), columns


def key_columns(config: Any) -> Optional[List[str]]:
    """The columns of the composite key of ``config`` (a CheckpointConfig),
    or None when its key is one ID column."""
    return getattr(config, KEY_COLUMNS, None)


def key_of(block: pa.Table, id_column: str, columns: Optional[List[str]]) -> Any:
    """The IDs of ``block``'s rows: its column ``id_column`` when the key is
    one column, else the composite key of ``columns`` encoded."""
    if columns is None:
        if id_column not in block.column_names:
            raise KeyRefused(
                f"the ID column {id_column!r} is not in the rows here (their columns: "
                f"{block.column_names}): an ID column (and, with source lineage, the source "
                "column) must be in the rows the read gives; a key made after the read is "
                "filtered by cairn.ray.skip_committed(ds), placed after the step that makes it"
            )
        return block.column(id_column)
    return encode_key(block, columns)


def encode_key(block: pa.Table, columns: List[str]) -> pa.Array:
    """One binary ID per row of ``block``, made of ``columns`` (see the
    module's encoding). Refuses a missing column, a null and a type a key
    cannot be made of, naming the column."""
    rows = block.num_rows
    parts = []
    for name in columns:
        if name not in block.column_names:
            raise KeyRefused(
                f"the key column {name!r} of the key {columns} is not in the rows here (their "
                f"columns: {block.column_names}). If a step after the read makes it (an "
                "explode), call cairn.ray.skip_committed(ds) after that step; do not drop or "
                "rename a key column before the write"
            )
        column = block.column(name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if column.null_count:
            raise KeyRefused(
                f"the key column {name!r} holds a null ({column.null_count} of {rows} rows "
                "here): a row's key must be whole. Fill it, or filter those rows out before "
                "the write"
            )
        parts.append(_encoded(column, name))
    joined = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()))
    return joined.cast(pa.binary()) if joined.nbytes < 2**31 else joined


def _encoded(column: pa.Array, name: str) -> pa.Array:
    """One key column's values, each tagged and self-delimited, as large
    binary."""
    kind = column.type
    if pa.types.is_integer(kind):
        if pa.types.is_unsigned_integer(kind):
            values = np.asarray(column.cast(pa.uint64()))
            tags = np.full(len(values), ord("+"), dtype=np.uint8)
            body = values.astype(">u8")
        else:
            values = np.asarray(column.cast(pa.int64()))
            tags = np.where(values < 0, ord("-"), ord("+")).astype(np.uint8)
            body = values.astype(">i8")
        return _fixed(np.column_stack([tags, body.view(np.uint8).reshape(-1, 8)]))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        tag, values = ord("s"), column.cast(pa.large_binary())
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        tag, values = ord("b"), column.cast(pa.large_binary())
    elif pa.types.is_fixed_size_binary(kind):
        tag, values = ord("b"), column.cast(pa.binary()).cast(pa.large_binary())
    else:
        raise KeyRefused(
            f"the key column {name!r} is of type {kind}: a key is made of integer, string and "
            "binary columns. Cast it (to a string, for example) before the write and the "
            "skip"
        )
    lengths = np.asarray(pc.binary_length(values).cast(pa.int64()))
    if len(lengths) and lengths.max() >= 2**32:
        raise KeyRefused(f"a value of the key column {name!r} is 4 GiB or more")
    prefix = _fixed(
        np.column_stack(
            [
                np.full(len(lengths), tag, dtype=np.uint8),
                lengths.astype(">u4").view(np.uint8).reshape(-1, 4),
            ]
        )
    )
    return pc.binary_join_element_wise(prefix, values, pa.scalar(b"", pa.large_binary()))


def _fixed(matrix: np.ndarray) -> pa.Array:
    """The rows of a 2-D uint8 matrix as a large binary array."""
    matrix = np.ascontiguousarray(matrix, dtype=np.uint8)
    rows, width = matrix.shape
    array = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), rows, [None, pa.py_buffer(matrix.tobytes())]
    )
    return array.cast(pa.binary()).cast(pa.large_binary())


#: The attribute of a CheckpointConfig that holds its source lineage:
#: (the source column, the fan-out column), or absent.
LINEAGE = "_cairn_lineage"

#: The first bytes of a lineage marker: no key's ID starts with them (a
#: key's first byte is a tag: + - s b).
_MARKER = b"\x00L"


def lineage_of(config: Any) -> Optional[Tuple[str, str]]:
    """The (source column, fan-out column) of ``config``, or None."""
    return getattr(config, LINEAGE, None)


def lineage_markers(
    table: pa.Table, source_column: str, fan_out_column: str
) -> Tuple[pa.Array, pa.Table]:
    """The lineage markers of a unit's rows ``table``, and the rows to write.

    One marker per source among the rows: its source, the source's output
    count (its rows' fan-out, which must agree) and how many of its outputs
    are here. A row whose fan-out is 0 stands for a source with no outputs:
    it is recorded (a marker with a count of 0) and not written."""
    for name in (source_column, fan_out_column):
        if name not in table.column_names:
            raise KeyRefused(
                f"the lineage column {name!r} is not in the rows written (their columns: "
                f"{table.column_names}): every output row must carry its source "
                f"({source_column!r}) and its source's output count ({fan_out_column!r})"
            )
    fan_out = table.column(fan_out_column)
    if not pa.types.is_integer(fan_out.type) or fan_out.null_count:
        raise KeyRefused(
            f"the fan-out column {fan_out_column!r} must hold an integer on every row (the "
            f"number of outputs of the row's source); it is {fan_out.type} with "
            f"{fan_out.null_count} nulls"
        )
    sources = table.select([source_column, fan_out_column]).rename_columns(["source", "n"])
    grouped = sources.group_by("source").aggregate([("n", "min"), ("n", "max"), ("n", "count")])
    low = np.asarray(grouped.column("n_min").cast(pa.int64()))
    high = np.asarray(grouped.column("n_max").cast(pa.int64()))
    if (low != high).any() or (low < 0).any():
        at = int(np.argmax((low != high) | (low < 0)))
        raise KeyRefused(
            f"the source {grouped.column('source')[at].as_py()!r} has rows whose "
            f"{fan_out_column!r} disagree ({low[at]} and {high[at]}): every output row of a "
            "source must carry the same count of its outputs (0 only on the one row that "
            "stands for a source with none)"
        )
    counts = np.asarray(grouped.column("n_count").cast(pa.int64()))
    counts = np.where(high == 0, 0, counts)
    source = grouped.column("source")
    if source.null_count:
        raise KeyRefused(f"the source column {source_column!r} holds a null")
    body = _fixed(
        np.column_stack(
            [
                high.astype(">i8").view(np.uint8).reshape(-1, 8),
                counts.astype(">i8").view(np.uint8).reshape(-1, 8),
            ]
        )
    )
    part = _encoded(source.combine_chunks(), source_column)
    markers = pc.binary_join_element_wise(
        pa.array([_MARKER] * len(part), pa.large_binary()),
        part,
        body,
        pa.scalar(b"", pa.large_binary()),
    ).cast(pa.binary())
    kept = table.filter(pc.not_equal(fan_out, 0))
    return markers, kept


def complete_sources(ids: List[bytes]) -> Tuple[List[Any], int]:
    """The sources all of whose outputs the markers among ``ids`` (the IDs of
    every committed unit) count, as their values, and how many sources the
    markers name. Refuses two counts of one source's outputs."""
    expected: Dict[bytes, int] = {}
    found: Dict[bytes, int] = {}
    for marker in ids:
        if not marker.startswith(_MARKER):
            continue
        part = marker[len(_MARKER) : -16]
        n = int.from_bytes(marker[-16:-8], "big", signed=True)
        count = int.from_bytes(marker[-8:], "big", signed=True)
        if expected.setdefault(part, n) != n:
            raise KeyRefused(
                f"the source {_decoded(part)!r} was committed with two output counts "
                f"({expected[part]} and {n}): the step that makes them must give a source the "
                "same count on every run"
            )
        found[part] = found.get(part, 0) + count
    done = [_decoded(p) for p, n in expected.items() if found[p] >= n]
    return done, len(expected)


def _decoded(part: bytes) -> Any:
    """A key part's value back from its encoding."""
    tag = part[:1]
    if tag in (b"+", b"-"):
        value = int.from_bytes(part[1:9], "big", signed=tag == b"-")
        return value
    body = part[5:]
    return body.decode() if tag == b"s" else body
