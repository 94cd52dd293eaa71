"""One Ray Data job (read_parquet -> map_batches -> write), timed into each
output on local disk, in one run:

- Parquet files with cairn's checkpoint (cairn.ray.checkpoint_config);
- a Delta table, an Iceberg table (SQLite catalog) and a Lance dataset
  through cairn.ray's DeltaDatasink, IcebergDatasink and LanceDatasink with
  cairn's checkpoint, exactly once (group commits, one commit, snapshot
  or version per interval, and "delta-cairn-unit", "iceberg-cairn-unit",
  "lance-cairn-unit" with one per write task, max_units_per_commit=1);
- Ray's own write_delta, write_iceberg and write_lance without a
  checkpoint (one commit at the end; Ray 2.60 with a checkpoint loses rows
  there, so cairn refuses them);
- Ray's own write_parquet without a checkpoint (the floor).

Run in the ray-venv (scripts/tools.sh) with the wheel installed:

    RAY_ADDRESS=local ~/.cache/cairn-tools/ray-venv/bin/python scripts/bench/ray_tables.py [ROWS] [FILES]

Each input file is one read task and one write task (a unit): Ray's
bin-packing of small files is turned down. A warm-up write runs first
(Ray's worker pool). Prints one line per output: seconds, rows written,
table commits and the table's metadata bytes (Delta's log, Iceberg's
metadata files and SQLite catalog, Lance's manifests and transactions: what
grows with each commit). WAYS=parquet-cairn,iceberg-cairn (comma-separated)
runs some of the outputs only.

The same job at 500 units (issue 44, item 5: the figures before batched
commits): `... ray_tables.py 500000 500`."""

import os

# Small files packed into few read tasks (64 KiB: files of 1,000 rows two
# to a task); RAY_DATA_PARQUET_BIN_PACKING_BYTES=1024 makes one unit a file.
os.environ.setdefault("RAY_DATA_PARQUET_BIN_PACKING_BYTES", str(64 * 1024))

import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from ray.data import DataContext

import cairn.ray

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "../../crates/cairn-py/tests")
)
from oracle import write_uid_files  # noqa: E402
from test_ray_tables import iceberg_catalog_kwargs as iceberg_catalog  # noqa: E402
from test_ray_tables import recorded_units  # noqa: E402


def write_input(directory, rows, files):
    os.makedirs(directory)
    write_uid_files(pafs.LocalFileSystem(), directory, files, rows // files)


def upper(batch):
    batch["text"] = batch["text"].astype(str)
    return batch


#: The parts of a table that are its metadata, by directory or file name.
_METADATA_PARTS = ("_delta_log", "metadata", "_versions", "_transactions", "catalog.db")


def metadata_bytes(out):
    """Bytes of the table metadata under `out` (0 for Parquet files)."""
    total = 0
    for directory, _, names in os.walk(out):
        parts = directory.split(os.sep)
        for name in names:
            if name in _METADATA_PARTS or any(p in _METADATA_PARTS for p in parts):
                total += os.path.getsize(os.path.join(directory, name))
    return total


def run(name, root, write):
    out = f"{root}/{name}"
    ckpt = f"{root}/ckpt-{name}"
    started = time.monotonic()

    def dataset():
        # Built after the way set its checkpoint config: Ray Data takes
        # the context a dataset is made in, and a config set later is not
        # seen (the job then writes no checkpoint).
        return ray.data.read_parquet(f"{root}/in").map_batches(
            upper, batch_format="pandas"
        )

    write(dataset, out, ckpt)
    seconds = time.monotonic() - started
    DataContext.get_current().checkpoint_config = None
    return out, seconds


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    from deltalake import DeltaTable

    root = tempfile.mkdtemp(prefix="cairn-bench-delta-")
    try:
        write_input(f"{root}/in", rows, files)

        def with_cairn(ckpt):
            DataContext.get_current().checkpoint_config = cairn.ray.checkpoint_config(
                "uid", ckpt
            )

        def parquet_cairn(dataset, out, ckpt):
            with_cairn(ckpt)
            dataset().write_parquet(out)

        def delta_cairn(dataset, out, ckpt):
            with_cairn(ckpt)
            dataset().write_datasink(cairn.ray.DeltaDatasink(out))

        def delta_cairn_unit(dataset, out, ckpt):
            with_cairn(ckpt)
            dataset().write_datasink(
                cairn.ray.DeltaDatasink(out, max_units_per_commit=1)
            )

        def delta_ray(dataset, out, ckpt):
            dataset().write_delta(out)

        def iceberg_table(out):
            """A fresh Iceberg table in a SQLite catalog under `out`: its
            catalog's arguments."""
            from pyiceberg.catalog import load_catalog

            os.makedirs(out)
            kwargs = iceberg_catalog(out)
            catalog = load_catalog(kwargs.pop("name"), **kwargs)
            catalog.create_namespace("db")
            catalog.create_table(
                "db.t", schema=pa.schema([("uid", pa.int64()), ("text", pa.string())])
            )
            return iceberg_catalog(out)

        def iceberg_cairn(dataset, out, ckpt):
            catalog = iceberg_table(out)
            with_cairn(ckpt)
            dataset().write_datasink(cairn.ray.IcebergDatasink("db.t", catalog))

        def iceberg_cairn_unit(dataset, out, ckpt):
            catalog = iceberg_table(out)
            with_cairn(ckpt)
            dataset().write_datasink(
                cairn.ray.IcebergDatasink("db.t", catalog, max_units_per_commit=1)
            )

        def iceberg_ray(dataset, out, ckpt):
            dataset().write_iceberg("db.t", catalog_kwargs=iceberg_table(out))

        def lance_cairn(dataset, out, ckpt):
            with_cairn(ckpt)
            dataset().write_datasink(cairn.ray.LanceDatasink(out))

        def lance_cairn_unit(dataset, out, ckpt):
            with_cairn(ckpt)
            dataset().write_datasink(
                cairn.ray.LanceDatasink(out, max_units_per_commit=1)
            )

        def lance_ray(dataset, out, ckpt):
            dataset().write_lance(out)

        def parquet_ray(dataset, out, ckpt):
            dataset().write_parquet(out)

        print(f"{rows} rows in {files} files, local disk, {os.cpu_count()} cores")
        run("warm-up", root, parquet_ray)
        wanted = os.environ.get("WAYS")
        for name, write in [
            ("parquet-cairn", parquet_cairn),
            ("delta-cairn", delta_cairn),
            ("delta-cairn-unit", delta_cairn_unit),
            ("delta-ray", delta_ray),
            ("iceberg-cairn", iceberg_cairn),
            ("iceberg-cairn-unit", iceberg_cairn_unit),
            ("iceberg-ray", iceberg_ray),
            ("lance-cairn", lance_cairn),
            ("lance-cairn-unit", lance_cairn_unit),
            ("lance-ray", lance_ray),
            ("parquet-ray", parquet_ray),
        ]:
            if wanted and name not in wanted.split(","):
                continue
            try:
                out, seconds = run(name, root, write)
            except (
                Exception
            ) as e:  # a write Ray itself cannot do is reported, not fatal
                DataContext.get_current().checkpoint_config = None
                print(f"{name:18} failed: {str(e).strip().splitlines()[-1][:160]}")
                if os.environ.get("BENCH_TRACE"):
                    print(str(e)[-4000:])
                continue
            if name.startswith("delta"):
                table = DeltaTable(out)
                written = table.to_pyarrow_table(columns=["uid"]).num_rows
                history = table.history()
                units = sum(len(recorded_units(entry)) for entry in history)
                commits = f"{table.version() + 1} ({units} units)"
            elif name.startswith("iceberg"):
                from pyiceberg.catalog import load_catalog

                kwargs = iceberg_catalog(out)
                catalog = load_catalog(kwargs.pop("name"), **kwargs)
                table = catalog.load_table("db.t")
                written = table.scan(selected_fields=("uid",)).to_arrow().num_rows
                commits = len(table.snapshots())
                # A group snapshot names no unit: it says how many it carries.
                units = sum(
                    int((s.summary or {}).get("cairn.group-size") or 0)
                    or len(recorded_units(s.summary))
                    for s in table.snapshots()
                )
                commits = f"{commits} ({units} units)"
            elif name.startswith("lance"):
                import lance

                dataset = lance.dataset(out)
                written = dataset.count_rows()
                transactions = [
                    dataset.read_transaction(v) for v in range(1, dataset.version + 1)
                ]
                units = sum(
                    len(recorded_units(t.transaction_properties or {}))
                    for t in transactions
                    if t is not None
                )
                commits = f"{dataset.version} ({units} units)"
            else:
                written = pq.read_table(out, columns=["uid"]).num_rows
                # One file a write task: the units.
                commits = f"- ({len(os.listdir(out))} files)"
            print(
                f"{name:18} {seconds:7.2f} s  {written} rows  table commits {commits}  "
                f"metadata {metadata_bytes(out) / 1e6:.2f} MB"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
