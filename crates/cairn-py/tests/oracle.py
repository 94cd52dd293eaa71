"""The exactly-once oracle of the Python tests: pyarrow alone (its own S3
filesystem, its own Parquet reader), never cairn, writes the input and
counts what the output holds."""

import collections
import hashlib
import io

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


def pyarrow_s3(options):
    """pyarrow's own S3 filesystem for the Garage `options` of conftest."""
    return pafs.S3FileSystem(
        access_key=options["key"],
        secret_key=options["secret"],
        endpoint_override=options["endpoint_url"],
        region=options["region"],
        scheme="http",
    )


def write_uid_files(fs, directory, files, rows_per_file, row_group_size=None):
    """`files` Parquet files of `rows_per_file` rows (uid, text) in
    `directory`: uids 0 .. files * rows_per_file, in row groups of
    `row_group_size` rows (None: one a file)."""
    for f in range(files):
        start = f * rows_per_file
        table = pa.table(
            {
                "uid": pa.array(range(start, start + rows_per_file), pa.int64()),
                "text": [f"row {i}" for i in range(start, start + rows_per_file)],
            }
        )
        pq.write_table(
            table,
            f"{directory}/part-{f:04}.parquet",
            filesystem=fs,
            row_group_size=row_group_size,
        )


def files(fs, prefix):
    """Every file under `prefix`, sorted."""
    found = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return sorted(f.path for f in found if f.type == pafs.FileType.File)


def data_files(fs, prefix):
    """The files under `prefix` that pyarrow's and Ray's readers read: those
    whose names start with `_` or `.` are passed over (a finished job's
    record, `_cairn_job.json`, among them)."""
    return [p for p in files(fs, prefix) if not p.rsplit("/", 1)[-1].startswith(("_", "."))]


def column_counts(fs, prefix, column):
    """How often each value of `column` occurs in the data files under
    `prefix`: Parquet, JSON lines, CSV (each read by pyarrow), or `.npy`
    files of that one column (read by NumPy)."""
    counts = collections.Counter()
    for path in data_files(fs, prefix):
        counts.update(_column(fs, path, column))
    return counts


def _column(fs, path, column):
    if path.endswith(".parquet"):
        return pq.read_table(path, columns=[column], filesystem=fs)[column].to_pylist()
    if not path.endswith((".json", ".csv", ".npy")):
        return []
    with fs.open_input_stream(path) as f:
        data = f.read()
    if path.endswith(".npy"):
        import numpy as np

        return np.load(io.BytesIO(data)).tolist()
    if path.endswith(".json"):
        import pyarrow.json as pajson

        return pajson.read_json(pa.BufferReader(data))[column].to_pylist()
    import pyarrow.csv as pacsv

    return pacsv.read_csv(pa.BufferReader(data))[column].to_pylist()


def row_hashes(path, first, count):
    """Ray's row_hash of rows first .. first + count of the file at `path`
    (shared/reference/ray-checkpoint.md: the path's MD5 seed plus the
    position, through splitmix64's finalizer), with hashlib and NumPy."""
    seed = np.uint64(int.from_bytes(hashlib.md5(path.encode()).digest()[:8], "little"))
    k = seed + np.arange(first, first + count, dtype=np.uint64)
    k ^= k >> np.uint64(30)
    k *= np.uint64(0xBF58476D1CE4E5B9)
    k ^= k >> np.uint64(27)
    k *= np.uint64(0x94D049BB133111EB)
    k ^= k >> np.uint64(31)
    return k
