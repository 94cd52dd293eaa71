"""Exactly-once oracle for partitioned outputs, independent of cairn: it
writes a job's input with pyarrow, and reads input and output back with
pyarrow alone (the output through pyarrow's hive-partitioned dataset
reader), local paths or s3:// URLs (s3fs for S3).

    python partition_oracle.py make INPUT ROWS FILES
    python partition_oracle.py check INPUT OUTPUT FORMAT

`make` writes ROWS rows in FILES Parquet files: `uid` (int64, 0..ROWS),
`source` (text with '/', '=', '%', spaces, non-ASCII, an empty string and
nulls: uid % 9 picks one), `bucket` (int64, uid % 4) and `text`. `check`
prints one JSON line: input rows, output rows, and how many input uids are
missing from the output, written more than once, written under other
partition values than their own (`misplaced`), or not inputs at all
(`unknown`); FORMAT is parquet or json.

S3 settings come from ORACLE_S3_ENDPOINT, ORACLE_S3_KEY, ORACLE_S3_SECRET.
"""

import collections
import json
import os
import sys

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

SOURCES = ["web", "a/b=c%d", "é x", None, "", "~.-_", "news", "plus+&?#", "web"]


def filesystem(url):
    if url.startswith("s3://"):
        import s3fs

        fs = s3fs.S3FileSystem(
            key=os.environ["ORACLE_S3_KEY"],
            secret=os.environ["ORACLE_S3_SECRET"],
            client_kwargs={
                "endpoint_url": os.environ["ORACLE_S3_ENDPOINT"],
                "region_name": "us-east-1",
            },
        )
        return fs, url[len("s3://") :]
    import fsspec

    return fsspec.filesystem("file"), url


def make(url, rows, files):
    fs, path = filesystem(url)
    fs.makedirs(path, exist_ok=True)
    per_file = -(-rows // files)
    for n in range(files):
        uids = list(range(n * per_file, min(rows, (n + 1) * per_file)))
        table = pa.table(
            {
                "uid": pa.array(uids, pa.int64()),
                "source": pa.array(
                    [SOURCES[u % len(SOURCES)] for u in uids], pa.string()
                ),
                "bucket": pa.array([u % 4 for u in uids], pa.int64()),
                "text": pa.array([f"row {u}" for u in uids], pa.string()),
            }
        )
        with fs.open(f"{path}/part-{n:05}.parquet", "wb") as f:
            pq.write_table(table, f, row_group_size=1000)


def key(source, bucket):
    # Directory values come back as text or as the reader's inferred type.
    return (None if source is None else str(source), str(bucket))


def check(input_url, output_url, fmt):
    in_fs, in_path = filesystem(input_url)
    want = {}
    for name in sorted(in_fs.find(in_path)):
        if name.endswith(".parquet"):
            table = pq.read_table(
                pa.BufferReader(in_fs.cat_file(name)),
                columns=["uid", "source", "bucket"],
            )
            for row in table.to_pylist():
                want[row["uid"]] = key(row["source"], row["bucket"])
    out_fs, out_path = filesystem(output_url)
    dataset = ds.dataset(out_path, filesystem=out_fs, format=fmt, partitioning="hive")
    got = collections.Counter()
    misplaced = 0
    for row in dataset.to_table(columns=["uid", "source", "bucket"]).to_pylist():
        got[row["uid"]] += 1
        if row["uid"] in want and want[row["uid"]] != key(row["source"], row["bucket"]):
            misplaced += 1
    print(
        json.dumps(
            {
                "input_rows": len(want),
                "output_rows": sum(got.values()),
                "missing": sum(1 for k in want if got[k] == 0),
                "duplicated": sum(1 for k in want if got[k] > 1),
                "misplaced": misplaced,
                "unknown": sum(1 for k in got if k not in want),
            }
        )
    )
    sys.stdout.flush()
    # s3fs's threads can abort the interpreter's teardown; the answer is out.
    os._exit(0)


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}: give make or check")


if __name__ == "__main__":
    main()
