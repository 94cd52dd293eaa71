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
from typing import Any, List, Optional, Sequence, Tuple, Union

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
