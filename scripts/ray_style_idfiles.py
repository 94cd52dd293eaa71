"""Writes and reads checkpoint ID files the way Ray Data 2.60 does (pyarrow,
one column named like the ID column, default snappy compression), for the
layout-compatibility tests of cairn-checkpoint.

  ray_style_idfiles.py write DIR COLUMN   -> prints the unit base names written
  ray_style_idfiles.py read FILE COLUMN   -> prints the IDs as a JSON list
"""

import json
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

command, target, column = sys.argv[1:4]
if command == "write":
    dataset, write = uuid.uuid4().hex, uuid.uuid4().hex
    bases = [f"{dataset}_{write}_{i:06}" for i in range(3)]
    pq.write_table(
        pa.table({column: pa.array(range(0, 1000), pa.int64())}),
        f"{target}/{bases[0]}.parquet",
    )
    pq.write_table(
        pa.table({column: pa.array(range(1000, 1500), pa.int64())}),
        f"{target}/{bases[1]}.parquet",
    )
    pq.write_table(
        pa.table({column: pa.array(range(1500, 1600), pa.int64())}),
        f"{target}/{bases[2]}.pending.parquet",
    )
    print(json.dumps(bases))
elif command == "read":
    table = pq.read_table(target)
    assert table.column_names == [column], table.column_names
    print(json.dumps(table.column(column).to_pylist()))
else:
    sys.exit(f"unknown command {command}")
