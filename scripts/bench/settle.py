"""Settling the pending units of one crashed group commit (issue 61 item 3):
UNITS units committed to a table in one group commit whose job died before
it committed them in the checkpoint (the ``table-after-commit`` failpoint
of the sinks' own group commit), then the recovery a resume runs
(``open_checkpoint`` with the sink's unit log), timed.

    settle.py make FORMAT ROOT HISTORY UNITS   the table and the checkpoint:
                                               delta: HISTORY commits before the
                                               units (one row each); iceberg:
                                               HISTORY data files before them (in
                                               appends of 100 files)
    settle.py measure FORMAT ROOT              one JSON line: the recovery's wall
                                               time and how many units it committed
                                               from the table (the checkpoint is
                                               put back as it was after)

Local disk; run `measure` with the cairn under test importable (before and
after a change: the same `make`, then a `measure` with each).
"""

import json
import os
import shutil
import sys
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

ROWS_PER_UNIT = 10


def catalog_kwargs(root):
    return {
        "name": "bench",
        "type": "sql",
        "uri": f"sqlite:///{root}/catalog.db",
        "warehouse": f"file://{root}/warehouse",
    }


def sink_of(table_format, root):
    import cairn.ray

    if table_format == "delta":
        return cairn.ray.DeltaDatasink(f"{root}/table")
    return cairn.ray.IcebergDatasink("db.t", catalog_kwargs(root))


def make(table_format, root, history, units):
    os.makedirs(f"{root}/ckpt")
    schema = pa.schema([("uid", pa.int64()), ("text", pa.string())])
    if table_format == "delta":
        from deltalake import write_deltalake

        for i in range(history):
            write_deltalake(
                f"{root}/table",
                pa.table({"uid": pa.array([-1 - i], pa.int64()), "text": ["-"]}),
                mode="append",
            )
    else:
        from pyiceberg.catalog import load_catalog

        kwargs = catalog_kwargs(root)
        catalog = load_catalog(kwargs.pop("name"), **kwargs)
        catalog.create_namespace("db")
        table = catalog.create_table(
            "db.t", schema=schema, location=f"file://{root}/table"
        )
        os.makedirs(f"{root}/history")
        for start in range(0, history, 100):
            paths = []
            for i in range(start, min(start + 100, history)):
                path = f"{root}/history/h{i:06}.parquet"
                pq.write_table(
                    pa.table(
                        {"uid": pa.array([-1 - i], pa.int64()), "text": ["-"]},
                        schema=schema,
                    ),
                    path,
                )
                paths.append(f"file://{path}")
            table.add_files(paths)
    crash_group(table_format, root, units, schema)


def crash_group(table_format, root, units, schema):
    """UNITS units staged and handed to the sink's group commit, which dies
    after the table commit (the failpoint raises there)."""
    from cairn._ray_committer import Submission
    from cairn._ray_table import UnitFence, id_record

    sink = sink_of(table_format, root)
    group = sink.group_commit()
    local = pafs.LocalFileSystem()
    ckpt = f"{root}/ckpt"
    table = sink.unit_log()._table() if table_format == "delta" else None
    submissions = []
    for u in range(units):
        unit = f"unit-{u:05}"
        first = u * ROWS_PER_UNIT
        rows = pa.table(
            {
                "uid": pa.array(range(first, first + ROWS_PER_UNIT), pa.int64()),
                "text": ["x"] * ROWS_PER_UNIT,
            },
            schema=schema,
        )
        pending = f"{ckpt}/{unit}.pending.parquet"
        with open(pending, "wb") as f:
            f.write(id_record(rows["uid"], "uid", None))
        fence = UnitFence(
            unit,
            "t",
            local,
            [pending],
            "uid",
            rows["uid"],
            [f"{ckpt}/{unit}.parquet"],
            None,
            False,
        )
        staged = (
            sink._stage(table, rows, fence)
            if table_format == "delta"
            else sink._stage(rows, fence)
        )
        submissions.append(Submission(unit, staged))
    os.environ["CAIRN_PY_FAILPOINT"] = f"table-after-commit:raise:{root}/crashed"
    try:
        group.commit_batch(submissions)
    except RuntimeError:
        pass
    finally:
        del os.environ["CAIRN_PY_FAILPOINT"]
    left = sum(n.endswith(".pending.parquet") for n in os.listdir(ckpt))
    if not os.path.exists(f"{root}/crashed") or left != units:
        raise SystemExit(
            f"the group commit did not stop after its table commit ({left} pending)"
        )


def measure(table_format, root):
    from cairn import _native
    from cairn.fsspec import CairnFileSystem

    # Settling changes the checkpoint only (every unit is in the table):
    # it is put back after, so each measure starts from the same state.
    saved = f"{root}/ckpt-saved"
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(f"{root}/ckpt", saved)
    try:
        sink = sink_of(table_format, root)
        fs = CairnFileSystem(protocol="file")._native
        started = time.perf_counter()
        _, report = _native.open_checkpoint(
            fs,
            f"file://{root}/ckpt",
            "uid",
            fs,
            f"{root}/table",
            read_ids=False,
            unit_log=sink.unit_log(),
        )
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(f"{root}/ckpt")
        os.rename(saved, f"{root}/ckpt")
    return {
        "format": table_format,
        "seconds": round(seconds, 2),
        "committed_from_table": len(report.get("committed_from_table", [])),
        "rolled_back": len(report.get("rolled_back", [])),
    }


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        print(json.dumps(measure(sys.argv[2], sys.argv[3])), flush=True)


if __name__ == "__main__":
    main()
