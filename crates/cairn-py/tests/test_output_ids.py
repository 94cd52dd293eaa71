"""The IDs an output already holds, read back for a run over a finished
job's output (cairn._ray_output): a property test over drawn outputs
(Parquet or JSON lines, flat or hive-partitioned, integer or string IDs,
nulls, dictionary-encoded columns, files readers pass over) and drawn
input, against Python's own set of the IDs pyarrow wrote: an input row is
kept exactly when its ID is not in a file a reader of the output reads.
No Ray is started; runs in the Ray virtualenv (scripts/test.sh), which
has hypothesis."""

import json
import os
import tempfile

import pytest

pytest.importorskip("hypothesis", reason="scripts/test.sh installs hypothesis")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cairn import CairnFileSystem  # noqa: E402
from cairn._native import NativeIdSet  # noqa: E402
from cairn._ray_output import (  # noqa: E402
    RECORD_NAME,
    ExistingOutputRefused,
    HoldsRows,
    SameJob,
    committed_set,
    judge_existing_output,
    output_ids,
    write_record,
)


class ParquetDatasink:
    """Named as Ray's Parquet sink: what cairn reads IDs back from."""


class JSONDatasink:
    """Named as Ray's JSON sink."""


class CSVDatasink:
    """Named as Ray's CSV sink: cairn reads no IDs back from it."""


SINKS = {"parquet": ParquetDatasink(), "json": JSONDatasink()}

int_ids = st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=30)
str_ids = st.lists(st.one_of(st.none(), st.text("abcé", max_size=3)), max_size=30)


@st.composite
def outputs(draw):
    kind = draw(st.sampled_from(["int", "str"]))
    ids = int_ids if kind == "int" else str_ids
    files = draw(
        st.lists(
            st.tuples(
                ids,
                st.sampled_from(["", "p=a/", "p=b/q=1/"]),
                st.sampled_from(["visible", "_hidden", ".hidden"]),
                st.booleans(),
            ),
            max_size=4,
        )
    )
    return kind, files, draw(ids), draw(st.sampled_from(sorted(SINKS)))


def write_file(path, values, kind, dictionary, fmt):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    array = pa.array(values, pa.int64() if kind == "int" else pa.string())
    if fmt == "json":
        with open(path, "w") as f:
            for v in values:
                f.write(json.dumps({"uid": v, "text": "x"}) + "\n")
        return
    if dictionary:
        array = array.dictionary_encode()
    pq.write_table(pa.table({"uid": array, "text": ["x"] * len(values)}), path)


@settings(
    max_examples=int(os.environ.get("CAIRN_OUTPUT_IDS_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(outputs())
def test_rows_are_skipped_exactly_when_their_id_is_in_a_file_the_output_reads(case):
    kind, files, input_ids, fmt = case
    fs = CairnFileSystem("file")
    with tempfile.TemporaryDirectory() as root:
        out = f"{root}/out"
        os.makedirs(out)
        expected = set()
        ext = "parquet" if fmt == "parquet" else "json"
        for n, (values, directory, name, dictionary) in enumerate(files):
            if fmt == "json" and kind == "int" and all(v is None for v in values):
                # A JSON column of nulls alone has no type to unify with.
                values = values + [0]
            prefix = "" if name == "visible" else name[0]
            path = f"{out}/{directory}{prefix}f{n}.{ext}"
            write_file(path, values, kind, dictionary, fmt)
            if name == "visible":
                expected |= {v for v in values if v is not None}
        # The record of a finished job beside them, as a reader skips it.
        write_record(fs, out, "uid", "1 files, sha256 0", "file:///ckpt")
        data, count = committed_set(output_ids(SINKS[fmt], None, fs, out, "uid"))
        assert count == len(expected)
        ids = NativeIdSet.from_bytes(data.tobytes())
        given = pa.array(input_ids, pa.int64() if kind == "int" else pa.string())
        keep = ids.uncommitted(given).to_pylist() if len(given) else []
        assert keep == [v is None or v not in expected for v in input_ids]


def test_what_an_output_holds_is_judged_before_anything_is_written(tmp_path):
    """An empty output: None. The same job's record: SameJob. Another
    input's record: HoldsRows (Parquet), refused for a sink cairn reads no
    IDs back from. Files and no record: refused, naming a file and the way
    out. A record that is not cairn's: refused."""
    fs = CairnFileSystem("file")
    out = str(tmp_path / "out")
    parquet = SINKS["parquet"]
    assert judge_existing_output(parquet, None, fs, out, "uid", "d1") is None
    os.makedirs(out)
    pq.write_table(pa.table({"uid": [1, 2]}), f"{out}/part-0.parquet")
    with pytest.raises(ExistingOutputRefused, match="no cairn job recorded") as refused:
        judge_existing_output(parquet, None, fs, out, "uid", "d1")
    assert "part-0.parquet" in str(refused.value)
    assert "existing_output='append'" in str(refused.value)
    write_record(fs, out, "uid", "d1", "file:///ckpt")
    assert isinstance(judge_existing_output(parquet, None, fs, out, "uid", "d1"), SameJob)
    assert isinstance(judge_existing_output(parquet, None, fs, out, "uid", "d2"), HoldsRows)
    # Another ID column, or an input cairn could not list: its IDs are read.
    assert isinstance(judge_existing_output(parquet, None, fs, out, "other", "d1"), HoldsRows)
    assert isinstance(judge_existing_output(parquet, None, fs, out, "uid", None), HoldsRows)
    # row_hash IDs over other input: a rewritten file's rows would be skipped.
    with pytest.raises(ExistingOutputRefused, match="row_hash"):
        judge_existing_output(parquet, None, fs, out, "row_hash", "d2")
    with pytest.raises(ExistingOutputRefused, match="CSVDatasink"):
        judge_existing_output(CSVDatasink(), None, fs, out, "uid", "d2")
    with open(f"{out}/{RECORD_NAME}", "w") as f:
        f.write("not json")
    with pytest.raises(ExistingOutputRefused, match="not a finished job's record"):
        judge_existing_output(parquet, None, fs, out, "uid", "d1")


def test_each_table_formats_ids_are_read_by_its_own_reader(tmp_path):
    """The IDs a table holds, as a run over it reads them back (its own
    reader, the ID column alone): None before the table exists, every ID
    of its current version after, and a table without the column
    refused. Delta, Lance, and Iceberg in a SQLite catalog."""
    pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake")
    pytest.importorskip("lance", reason="scripts/test.sh installs pylance")
    pytest.importorskip("pyiceberg", reason="scripts/test.sh installs pyiceberg")
    import lance
    from deltalake import write_deltalake
    from pyiceberg.catalog import load_catalog

    from cairn._ray_delta import DeltaUnitLog
    from cairn._ray_iceberg import IcebergUnitLog
    from cairn._ray_lance import LanceUnitLog

    rows = pa.table({"uid": pa.array([3, 1, 2], pa.int64()), "text": ["a", "b", "c"]})
    catalog_kwargs = {
        "name": "t",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"file://{tmp_path}/warehouse",
    }
    kwargs = dict(catalog_kwargs)
    catalog = load_catalog(kwargs.pop("name"), **kwargs)
    catalog.create_namespace("db")
    logs = {
        "delta": DeltaUnitLog(str(tmp_path / "delta")),
        "lance": LanceUnitLog(str(tmp_path / "lance")),
        "iceberg": IcebergUnitLog("db.t", catalog_kwargs, f"file://{tmp_path}/iceberg"),
    }
    for name, log in logs.items():
        assert log.table_ids("uid") is None, name
    write_deltalake(str(tmp_path / "delta"), rows)
    lance.write_dataset(rows, str(tmp_path / "lance"))
    iceberg = catalog.create_table(
        "db.t", schema=rows.schema, location=f"file://{tmp_path}/iceberg"
    )
    assert list(logs["iceberg"].table_ids("uid")) == [], "an Iceberg table of no snapshot"
    iceberg.append(rows)
    for name, log in logs.items():
        found = sorted(v for chunk in log.table_ids("uid") for v in chunk.to_pylist())
        assert found == [1, 2, 3], name
        with pytest.raises(ExistingOutputRefused, match="no column 'other'"):
            log.table_ids("other")
