"""Exactly-once oracle for the tests, independent of cairn: reads the ID
column of every Parquet file under an input and an output directory (local
paths or s3:// URLs) with pyarrow (s3fs for S3) and prints one JSON line:
input rows, output rows, distinct output IDs, and how many input IDs are
missing, duplicated, or present in the output but not in the input.

    python oracle_ids.py INPUT OUTPUT ID_COLUMN
S3 settings come from ORACLE_S3_ENDPOINT, ORACLE_S3_KEY, ORACLE_S3_SECRET.
"""

import collections
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def filesystem(url):
    if url.startswith("s3://"):
        import s3fs

        return s3fs.S3FileSystem(
            key=os.environ["ORACLE_S3_KEY"],
            secret=os.environ["ORACLE_S3_SECRET"],
            client_kwargs={
                "endpoint_url": os.environ["ORACLE_S3_ENDPOINT"],
                "region_name": "us-east-1",
            },
        ), url[len("s3://") :]
    import fsspec

    return fsspec.filesystem("file"), url


def ids(url, column):
    fs, path = filesystem(url)
    values = []
    for name in sorted(fs.find(path)):
        base = name.rsplit("/", 1)[-1]
        if not base.endswith(".parquet") or base.startswith((".", "_")):
            continue
        table = pq.read_table(pa.BufferReader(fs.cat_file(name)), columns=[column])
        values.extend(table.column(column).to_pylist())
    return values


def main():
    source, output, column = sys.argv[1:4]
    want = collections.Counter(ids(source, column))
    got = collections.Counter(ids(output, column))
    print(
        json.dumps(
            {
                "input_rows": sum(want.values()),
                "output_rows": sum(got.values()),
                "distinct_output": len(got),
                "missing": sum(1 for k, n in want.items() if got[k] < n),
                "duplicated": sum(1 for k, n in want.items() if got[k] > n),
                "unknown": sum(1 for k in got if k not in want),
            }
        )
    )
    sys.stdout.flush()
    # s3fs's and pyarrow's threads can abort the interpreter's teardown
    # ("terminate called without an active exception"); the answer is out.
    os._exit(0)


main()
