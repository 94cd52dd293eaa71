"""cairn's Delta sink stages a unit's rows as a Parquet file with Delta's
file statistics, which readers prune files by: drawn tables of integer,
string, date, float, boolean, timestamp (with and without a time zone)
and decimal columns with nulls, staged and committed as the sink's
committer commits them, then read back by deltalake's two readers with
drawn filters (its pyarrow dataset and its SQL engine both prune files by
those statistics) and compared with the same filter evaluated in Python
over the rows drawn;
the statistics the log holds are checked against the file's own values
read by pyarrow. And the tables a unit is not staged for (no table yet,
partitioned, a CHECK constraint, rows that do not fit the schema) go
through deltalake's writer, each unit a commit of its own. Runs in the
Ray virtualenv (scripts/test.sh); elsewhere the tests show as skipped."""

import datetime
import decimal
import json
import os
import tempfile
import types

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")
deltalake = pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake")
pytest.importorskip("hypothesis", reason="scripts/test.sh installs hypothesis in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cairn._ray_committer import COMMITTED, Submission  # noqa: E402
from cairn._ray_delta import ORPHAN_CLEAN_UP, DeltaDatasink  # noqa: E402

SCHEMA = pa.schema(
    [
        ("uid", pa.int64()),
        ("small", pa.int32()),
        ("text", pa.string()),
        ("day", pa.date32()),
        ("score", pa.float64()),
        ("flag", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("local", pa.timestamp("us")),
        ("price", pa.decimal128(24, 6)),
    ]
)

#: A column cairn writes no bounds for: files of a table with it get
#: their row count alone.
BLOB = pa.field("blob", pa.binary())

UTC = datetime.timezone.utc
#: Instants from 1900 to 2100 to the microsecond, some on a millisecond.
STAMPS = st.one_of(
    st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2100, 1, 1)),
    st.datetimes(datetime.datetime(1969, 12, 31), datetime.datetime(1970, 1, 2)).map(
        lambda at: at.replace(microsecond=at.microsecond // 1000 * 1000)
    ),
)
#: Decimals of the column's scale: prices, values below 1e-4 and from
#: 1e16 (which Python writes in exponent form), each one a double holds
#: (more digits give the row count alone: the edge cases).
PRICES = st.one_of(
    st.decimals(min_value=-(10**9), max_value=10**9, places=3),
    st.decimals(min_value="-0.0001", max_value="0.0001", places=6),
    st.sampled_from([10**16, -(10**16), 2**53, 3 * 10**17]).map(decimal.Decimal),
)

DAYS = st.dates(min_value=datetime.date(1970, 1, 1), max_value=datetime.date(2100, 1, 1))
#: Strings around Delta's 32-character bound, with characters beyond ASCII.
TEXTS = st.text(alphabet=st.sampled_from("ab\u00e9\u4e2d\U0001f600 "), max_size=40)


@st.composite
def unit_rows(draw, first_uid, schema):
    """A unit's rows: each column may be null anywhere (uid never); floats
    may be NaN or infinite."""
    count = draw(st.integers(min_value=1, max_value=30))

    def column(values):
        return [draw(st.one_of(st.none(), values)) for _ in range(count)]

    return pa.table(
        {
            "uid": pa.array(range(first_uid, first_uid + count), pa.int64()),
            "small": pa.array(column(st.integers(-(2**31), 2**31 - 1)), pa.int32()),
            "text": pa.array(column(TEXTS), pa.string()),
            "day": pa.array(column(DAYS), pa.date32()),
            "score": pa.array(column(st.floats(allow_nan=True)), pa.float64()),
            "flag": pa.array(column(st.booleans()), pa.bool_()),
            "at": pa.array(
                column(STAMPS.map(lambda at: at.replace(tzinfo=UTC))), pa.timestamp("us", tz="UTC")
            ),
            "local": pa.array(column(STAMPS), pa.timestamp("us")),
            "price": pa.array(column(PRICES), pa.decimal128(24, 6)),
            "blob": pa.array(column(st.binary(max_size=4)), pa.binary()),
        },
    ).select(schema.names)


#: A filter a reader prunes by: a column, an operator, a value of its type.
FILTERS = st.one_of(
    st.tuples(
        st.just("small"),
        st.sampled_from(["<", "<=", ">", ">=", "="]),
        st.integers(-(2**31), 2**31 - 1),
    ),
    st.tuples(st.just("text"), st.sampled_from(["<", ">=", "="]), TEXTS),
    st.tuples(st.just("day"), st.sampled_from(["<", ">", "="]), DAYS),
    st.tuples(st.just("uid"), st.sampled_from(["<", ">=", "!="]), st.integers(0, 200)),
    st.tuples(st.just("score"), st.sampled_from(["<", ">", "!=", "="]), st.floats(allow_nan=False)),
    st.tuples(st.just("flag"), st.sampled_from(["=", "!="]), st.booleans()),
    st.tuples(
        st.just("at"),
        st.sampled_from(["<", "<=", ">", ">=", "="]),
        STAMPS.map(lambda at: at.replace(tzinfo=UTC)),
    ),
    st.tuples(st.just("local"), st.sampled_from(["<", "<=", ">", ">=", "="]), STAMPS),
    st.tuples(st.just("price"), st.sampled_from(["<", "<=", ">", ">=", "="]), PRICES),
)


def sql_literal(column, value):
    """``value`` as a literal of ``column``'s type in deltalake's SQL."""
    if column in ("small", "uid"):
        return str(value)
    if column == "day":
        return f"DATE '{value.isoformat()}'"
    if column == "at":
        return f"TIMESTAMP '{value.astimezone(UTC).replace(tzinfo=None).isoformat()}Z'"
    if column == "local":
        return f"TIMESTAMP '{value.isoformat()}'"
    if column == "price":
        return f"CAST('{value:f}' AS DECIMAL(24, 6))"
    return None  # strings, floats, booleans: the pyarrow dataset's filters only


OPERATORS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


class LetThrough:
    """A unit's fence that lets its commit through (no checkpoint)."""

    id_column = "uid"
    carried_entry = None

    def __init__(self):
        self.entries = []

    def __call__(self, entry, landed=False):
        self.entries.append(entry)

    def commit_record(self, entry, record=None):
        pass


def staged_group(uri, tables):
    """Each table staged as the sink's task stages it, then the group
    committed as its committer commits it."""
    sink = DeltaDatasink(uri)
    group = []
    for n, rows in enumerate(tables):
        staged = sink._stage(sink.unit_log()._table(), rows, LetThrough())
        assert staged is not None, "the rows were not staged"
        group.append(Submission(f"u{n}", staged))
    outcomes = sink.group_commit().commit_batch(group)
    assert set(outcomes.values()) == {(COMMITTED, "")}, outcomes
    return group


@settings(
    max_examples=int(os.environ.get("CAIRN_DELTA_STATS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_staged_files_statistics_never_make_a_reader_skip_a_matching_row(data):
    with tempfile.TemporaryDirectory() as root:
        uri = f"{root}/t"
        blobs = data.draw(st.booleans())
        schema = SCHEMA.append(BLOB) if blobs else SCHEMA
        deltalake.write_deltalake(uri, schema.empty_table())
        tables, first = [], 0
        for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
            rows = data.draw(unit_rows(first, schema))
            tables.append(rows)
            first += rows.num_rows
        group = staged_group(uri, tables)
        table = deltalake.DeltaTable(uri)
        everything = pa.concat_tables(tables).to_pylist()
        assert sorted(table.to_pyarrow_table()["uid"].to_pylist()) == list(range(first))

        # Each file's statistics, as deltalake reads them from the log,
        # against the file's own values read by pyarrow.
        actions = pa.table(table.get_add_actions(flatten=False)).to_pylist()
        assert len(actions) == len(group)
        for action in actions:
            written = pq.read_table(f"{uri}/{action['path']}").to_pylist()
            assert action["num_records"] == len(written), action
            bounded = {
                name for name in schema.names if (action.get("min") or {}).get(name) is not None
            }
            if blobs and any(row["blob"] is not None for row in written):
                assert not bounded, action
            elif bounded:
                # All or nothing: every column with a value has bounds.
                assert bounded == {
                    name for name in schema.names if any(row[name] is not None for row in written)
                }, action
            for name in schema.names:
                nulls = (action.get("null_count") or {}).get(name)
                assert nulls is None or nulls == sum(row[name] is None for row in written), (
                    name,
                    action,
                )
                low = (action.get("min") or {}).get(name)
                high = (action.get("max") or {}).get(name)
                assert (low is None) == (high is None), (name, action)
                if low is not None:
                    values = [row[name] for row in written if row[name] is not None]
                    if name in ("at", "local"):
                        # Whole milliseconds, widened.
                        low, high = as_written(low, name), as_written(high, name)
                        assert low <= min(values) < low + MILLISECOND, (name, action)
                        assert high - MILLISECOND < max(values) <= high, (name, action)
                    else:
                        assert (low, high) == (min(values), max(values)), (name, action)

        # A reader's filter, pruning files by those statistics, finds
        # every matching row.
        for column, operator, value in data.draw(st.lists(FILTERS, min_size=1, max_size=4)):
            expected = sorted(
                row["uid"]
                for row in everything
                if row[column] is not None and OPERATORS[operator](row[column], value)
            )
            read = table.to_pyarrow_table(columns=["uid"], filters=[(column, operator, value)])
            assert sorted(read["uid"].to_pylist()) == expected, (column, operator, value)
            literal = sql_literal(column, value)
            if literal is not None:
                query = f"SELECT uid FROM t WHERE {column} {operator} {literal}"
                found = deltalake.QueryBuilder().register("t", table).execute(query).read_all()
                assert sorted(pa.table(found)["uid"].to_pylist()) == expected, query


MILLISECOND = datetime.timedelta(milliseconds=1)


def as_written(bound, column):
    """A timestamp bound as deltalake's add actions give it, as the
    column's Python values are (aware for ``at``, naive for ``local``)."""
    if isinstance(bound, str):
        bound = datetime.datetime.fromisoformat(bound.replace("Z", "+00:00"))
    if column == "at":
        return bound if bound.tzinfo else bound.replace(tzinfo=UTC)
    return bound.replace(tzinfo=None) if bound.tzinfo else bound


def test_a_unit_goes_through_deltalakes_writer_where_the_table_needs_it(tmp_path):
    """A partitioned table, a CHECK constraint, rows with a column the
    table lacks (schema_mode="merge") or without one it has, a null in a
    non-null column: the sink stages nothing, and its append commits the
    unit itself (write_deltalake: one commit recording the unit, its
    application transaction), the constraint checked, the partition values
    and the merged schema as deltalake writes them. No table yet, with one
    unit a commit: the unit makes it (empty, version 0) and commits after."""
    rows = pa.table({"uid": pa.array([1, 2], pa.int64()), "part": ["a", "b"]})

    def not_staged(uri, rows, unit, **options):
        sink = DeltaDatasink(uri, **options)
        table = sink.unit_log()._table()
        assert table is None or sink._stage(table, rows, LetThrough()) is None
        assert sink.append(rows, unit, LetThrough()) is None
        table = deltalake.DeltaTable(uri)
        (latest,) = table.history(1)
        assert latest.get("cairn.unit") == unit, latest
        assert table.transaction_version(f"cairn:{unit}") == 1
        return table

    # No table yet: the unit (the job's elected creator) makes it empty
    # first, version 0, then commits (here itself: one unit a commit).
    created = not_staged(f"{tmp_path}/new", rows, "created", max_units_per_commit=1)
    assert created.version() == 1
    assert created.history(2)[1]["version"] == 0

    parted = f"{tmp_path}/parted"
    deltalake.write_deltalake(parted, rows, partition_by=["part"])
    table = not_staged(parted, rows.set_column(0, "uid", pa.array([3, 4], pa.int64())), "parted")
    assert table.to_pyarrow_table(filters=[("part", "=", "a")])["uid"].to_pylist() in (
        [1, 3],
        [3, 1],
    )

    checked = f"{tmp_path}/checked"
    deltalake.write_deltalake(checked, rows)
    deltalake.DeltaTable(checked).alter.add_constraint({"positive": "uid > 0"})
    not_staged(checked, rows, "checked")
    with pytest.raises(Exception, match="failed validation check"):
        DeltaDatasink(checked).append(
            rows.set_column(0, "uid", pa.array([-1, 5], pa.int64())), "bad", LetThrough()
        )

    merged = f"{tmp_path}/merged"
    deltalake.write_deltalake(merged, rows)
    wider = rows.append_column("extra", pa.array([1.5, 2.5]))
    table = not_staged(merged, wider, "wider", schema_mode="merge")
    assert "extra" in pa.schema(table.schema().to_arrow()).names
    # A column the table has that the rows lack.
    not_staged(merged, rows, "narrower", schema_mode="merge")

    strict = f"{tmp_path}/strict"
    deltalake.write_deltalake(
        strict,
        pa.table(
            {"uid": pa.array([1], pa.int64())},
            schema=pa.schema([pa.field("uid", pa.int64(), nullable=False)]),
        ),
    )
    with pytest.raises(Exception):
        DeltaDatasink(strict).append(
            pa.table({"uid": pa.array([None, 2], pa.int64())}), "nulls", LetThrough()
        )
    assert deltalake.DeltaTable(strict).to_pyarrow_table()["uid"].to_pylist() == [1]


def test_a_plain_table_takes_staged_files_of_rows_cast_to_its_schema(tmp_path):
    """Rows whose types differ from the table's but cast exactly (int32 to
    int64, columns in another order) are staged in the table's schema;
    the committed file reads back as the table's schema."""
    uri = f"{tmp_path}/t"
    deltalake.write_deltalake(uri, pa.table({"uid": pa.array([0], pa.int64()), "text": ["x"]}))
    rows = pa.table({"text": ["a", None], "uid": pa.array([1, 2], pa.int32())})
    (submission,) = staged_group(uri, [rows])
    (name,) = submission.payload.paths
    assert pq.read_schema(f"{uri}/{name}").field("uid").type == pa.int64()
    read = deltalake.DeltaTable(uri).to_pyarrow_table().sort_by("uid")
    assert read.to_pydict() == {"uid": [0, 1, 2], "text": ["x", "a", None]}


def test_statistics_at_the_edges(tmp_path):
    """Exact bounds of a plain file; zero's sign widened (-0.0 the min, 0.0
    the max, as Parquet's rule); a date beyond Python's calendar or a
    float NaN gives the row count alone, never a failed task."""
    import math

    from cairn._ray_delta_files import file_stats, stats_columns

    rows = pa.table(
        {
            "uid": pa.array([3, 1, 2], pa.int64()),
            "text": ["b", None, "a"],
            "zero": pa.array([0.0, -0.0, 0.0]),
        }
    )
    stats = json.loads(file_stats(rows, stats_columns(rows.schema, {})))
    assert stats["numRecords"] == 3
    assert stats["minValues"]["uid"] == 1 and stats["maxValues"]["uid"] == 3
    assert stats["minValues"]["text"] == "a" and stats["maxValues"]["text"] == "b"
    assert stats["nullCount"] == {"uid": 0, "text": 1, "zero": 0}
    assert math.copysign(1, stats["minValues"]["zero"]) == -1
    assert math.copysign(1, stats["maxValues"]["zero"]) == 1
    far = pa.table({"day": pa.array([2_932_897 * 2], pa.date32())})  # past year 9999
    assert json.loads(file_stats(far, ["day"])) == {"numRecords": 1}
    nan = pa.table({"score": pa.array([1.0, float("nan")])})
    assert json.loads(file_stats(nan, ["score"])) == {"numRecords": 2}
    # Timestamps in whole milliseconds, widened (the max rounded up, into
    # the next second or day); before the epoch too; seconds and
    # nanoseconds alike.
    late = datetime.datetime(2024, 1, 1, 23, 59, 59, 999_500)
    early = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    stamps = pa.table(
        {
            "at": pa.array([late, early], pa.timestamp("us", tz="UTC")),
            "local": pa.array([late, early], pa.timestamp("ns")),
            "whole": pa.array([late.replace(microsecond=0)] * 2, pa.timestamp("s")),
        }
    )
    stats = json.loads(file_stats(stamps, ["at", "local", "whole"]))
    assert stats["minValues"] == {
        "at": "1969-12-31T23:59:59.999Z",
        "local": "1969-12-31 23:59:59.999",
        "whole": "2024-01-01 23:59:59.000",
    }
    assert stats["maxValues"] == {
        "at": "2024-01-02T00:00:00.000Z",
        "local": "2024-01-02 00:00:00.000",
        "whole": "2024-01-01 23:59:59.000",
    }
    # Past year 9999 once rounded up: the row count alone.
    end = pa.table({"at": pa.array([datetime.datetime(9999, 12, 31, 23, 59, 59, 999_999)])})
    assert json.loads(file_stats(end, ["at"])) == {"numRecords": 1}
    # A decimal a double holds exactly is a JSON number; one with more
    # digits gives the row count alone.
    from decimal import Decimal

    held = pa.table({"price": pa.array([Decimal("0.300"), Decimal("-12.5")], pa.decimal128(12, 3))})
    stats = json.loads(file_stats(held, ["price"]))
    assert (stats["minValues"]["price"], stats["maxValues"]["price"]) == (-12.5, 0.3)
    wide = pa.table({"price": pa.array([Decimal("1.0000000000000000001")], pa.decimal128(38, 19))})
    assert json.loads(file_stats(wide, ["price"])) == {"numRecords": 1}
    # Positional digits, never an exponent (deltalake's reader takes
    # ``1e-05`` for no bound).
    tiny = pa.table(
        {"price": pa.array([Decimal("0.00001"), Decimal("1E+16")], pa.decimal128(24, 5))}
    )
    text = file_stats(tiny, ["price"])
    assert '"price": 0.00001' in text and '"price": 10000000000000000.00000' in text, text
    # A nested column among the indexed ones: no bounds can be told.
    nested = pa.schema([("uid", pa.int64()), ("tags", pa.list_(pa.string()))])
    assert stats_columns(nested, {}) is None
    assert stats_columns(nested, {"delta.dataSkippingNumIndexedCols": "1"}) == ["uid"]
    assert stats_columns(nested, {"delta.dataSkippingStatsColumns": "uid"}) == ["uid"]


def test_rows_fit_a_table_only_as_they_are():
    """float64 into a float32 column, a string into an integer column, a
    struct with other fields: not staged (deltalake's writer decides);
    int32 into int64, strings into large strings, a list of another item
    name: staged in the table's types."""
    from cairn._ray_delta_files import fitted

    def fits(values, source, target):
        rows = pa.table({"c": pa.array(values, source)})
        return fitted(rows, pa.schema([("c", target)]))

    assert fits([1.5], pa.float64(), pa.float32()) is None
    assert fits(["1"], pa.string(), pa.int64()) is None
    assert fits([{"a": 1}], pa.struct([("a", pa.int64())]), pa.struct([("b", pa.int64())])) is None
    assert fits([1], pa.int32(), pa.int64()).schema.field("c").type == pa.int64()
    assert fits(["x"], pa.string(), pa.large_string()) is not None
    listed = pa.list_(pa.field("element", pa.float32()))
    assert fits([[1.0]], pa.list_(pa.float32()), listed).schema.field("c").type == listed
    strict = pa.list_(pa.field("element", pa.float32(), nullable=False))
    assert fits([[1.0]], pa.list_(pa.float32()), strict) is None


def test_a_unit_the_committer_committed_is_not_written_again_by_its_retry(tmp_path):
    """An attempt's unit committed by the job's committer; the task's retry,
    whose rows no longer fit the table (a column more: it would go through
    write_deltalake), finds the unit's application transaction and
    commits nothing. A constraint added to the table after a unit was
    staged: the committer commits no plain file (the unit fails, its
    staged file deleted)."""
    uri = f"{tmp_path}/t"
    deltalake.write_deltalake(uri, pa.table({"uid": pa.array([0], pa.int64())}))
    (first,) = staged_group(uri, [pa.table({"uid": pa.array([1, 2], pa.int64())})])
    retry = pa.table({"uid": pa.array([1, 2], pa.int64()), "extra": [1, 2]})
    sink = DeltaDatasink(uri, schema_mode="merge")
    assert sink.append(retry, first.unit, LetThrough()) is True
    assert sorted(deltalake.DeltaTable(uri).to_pyarrow_table()["uid"].to_pylist()) == [0, 1, 2]

    sink = DeltaDatasink(uri)
    staged = sink._stage(
        sink.unit_log()._table(), pa.table({"uid": pa.array([5], pa.int64())}), LetThrough()
    )
    deltalake.DeltaTable(uri).alter.add_constraint({"small": "uid < 3"})
    outcomes = sink.group_commit().commit_batch([Submission("late", staged)])
    assert outcomes["late"][0] == "failed" and "changed while the job ran" in outcomes["late"][1]
    assert not any(os.path.exists(f"{uri}/{name}") for name in staged.paths)
    assert sorted(deltalake.DeltaTable(uri).to_pyarrow_table()["uid"].to_pylist()) == [0, 1, 2]


def test_a_unit_staged_before_the_tables_schema_changed_is_committed_only_if_it_reads_as_is(
    tmp_path,
):
    """Columns added to the table after a unit was staged (nullable, one
    of them nested): its file is committed and reads nulls there. A column whose type changed
    (the table overwritten with a new schema): the unit fails, its staged
    file deleted, the table as the overwrite left it."""
    uri = f"{tmp_path}/t"
    deltalake.write_deltalake(uri, pa.table({"uid": pa.array([0], pa.int64())}))
    sink = DeltaDatasink(uri)

    def stage(rows):
        staged = sink._stage(sink.unit_log()._table(), rows, LetThrough())
        assert staged is not None, "the rows were not staged"
        return staged

    staged = stage(pa.table({"uid": pa.array([1], pa.int64())}))
    assert staged.files[0].indexed == ["uid"]
    # A nested column among the indexed ones now: no count of the table's
    # indexed columns can be told, but none of the file's is affected.
    wider = pa.table({"uid": pa.array([2], pa.int64()), "note": ["n"], "tags": [["t"]]})
    deltalake.write_deltalake(uri, wider, mode="append", schema_mode="merge")
    outcomes = sink.group_commit().commit_batch([Submission("early", staged)])
    assert outcomes == {"early": (COMMITTED, "")}, outcomes
    read = deltalake.DeltaTable(uri).to_pyarrow_table().sort_by("uid").to_pylist()
    assert read == [
        {"uid": 0, "note": None, "tags": None},
        {"uid": 1, "note": None, "tags": None},
        {"uid": 2, "note": "n", "tags": ["t"]},
    ]

    staged = stage(pa.table({"uid": pa.array([3], pa.int64()), "note": ["m"], "tags": [["u"]]}))
    other = pa.table({"uid": pa.array(["x"], pa.string())})
    deltalake.write_deltalake(uri, other, mode="overwrite", schema_mode="overwrite")
    outcomes = sink.group_commit().commit_batch([Submission("stale", staged)])
    assert outcomes["stale"][0] == "failed" and "no longer reads" in outcomes["stale"][1]
    assert not any(os.path.exists(f"{uri}/{name}") for name in staged.paths)
    assert deltalake.DeltaTable(uri).to_pyarrow_table()["uid"].to_pylist() == ["x"]


def test_a_table_reads_staged_files_as_they_are_only_when_their_columns_kept_their_types():
    from cairn._ray_delta_files import reads_files_of

    def schema(*fields):
        return json.dumps(
            {
                "type": "struct",
                "fields": [
                    {"name": n, "type": t, "nullable": null, "metadata": {}}
                    for n, t, null in fields
                ],
            }
        )

    staged = schema(("uid", "long", False), ("text", "string", True))
    assert reads_files_of(staged, staged)
    # A nullable column added; the columns in another order.
    assert reads_files_of(
        schema(("text", "string", True), ("uid", "long", False), ("note", "string", True)), staged
    )
    # A non-null column added: the staged file has none of its values.
    assert not reads_files_of(
        schema(("uid", "long", False), ("text", "string", True), ("n", "long", False)), staged
    )
    # A column dropped, a type changed, a nullable column made non-null.
    assert not reads_files_of(schema(("uid", "long", False)), staged)
    assert not reads_files_of(schema(("uid", "integer", False), ("text", "string", True)), staged)
    assert not reads_files_of(schema(("uid", "long", False), ("text", "string", False)), staged)
    # A non-null column made nullable: its files have no nulls to misread.
    assert reads_files_of(schema(("uid", "long", True), ("text", "string", True)), staged)


def test_a_unit_staged_before_the_table_indexed_more_columns_is_not_committed(tmp_path):
    """Statistics staged for the first column only; the table then
    indexes two: a reader would take the second column of the staged file
    for nulls and skip it for any filter on it, so the unit fails and its
    file is deleted. Fewer columns indexed since is fine."""
    uri = f"{tmp_path}/t"
    rows = pa.table({"uid": pa.array([0], pa.int64()), "n": pa.array([7], pa.int64())})
    deltalake.write_deltalake(uri, rows, configuration={"delta.dataSkippingNumIndexedCols": "1"})
    sink = DeltaDatasink(uri)

    def stage(uid):
        rows = pa.table({"uid": pa.array([uid], pa.int64()), "n": pa.array([7], pa.int64())})
        staged = sink._stage(sink.unit_log()._table(), rows, LetThrough())
        assert staged is not None and staged.files[0].indexed == ["uid"], staged
        return staged

    staged = stage(1)
    table = deltalake.DeltaTable(uri)
    table.alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "2"})
    outcomes = sink.group_commit().commit_batch([Submission("narrow", staged)])
    assert outcomes["narrow"][0] == "failed" and "indexes columns" in outcomes["narrow"][1]
    assert not any(os.path.exists(f"{uri}/{name}") for name in staged.paths)

    deltalake.DeltaTable(uri).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "1"})
    staged = stage(2)
    deltalake.DeltaTable(uri).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "0"})
    outcomes = sink.group_commit().commit_batch([Submission("wide", staged)])
    assert outcomes == {"wide": (COMMITTED, "")}, outcomes
    # Named columns: one the file has not (added since) is no matter.
    deltalake.DeltaTable(uri).alter.set_table_properties({"delta.dataSkippingStatsColumns": "uid"})
    staged = stage(3)
    deltalake.DeltaTable(uri).alter.set_table_properties(
        {"delta.dataSkippingStatsColumns": "uid,later"}
    )
    outcomes = sink.group_commit().commit_batch([Submission("named", staged)])
    assert outcomes == {"named": (COMMITTED, "")}, outcomes
    read = deltalake.DeltaTable(uri).to_pyarrow_table(filters=[("n", "=", 7)])
    assert sorted(read["uid"].to_pylist()) == [0, 2, 3]


def test_staging_loads_a_table_once_a_run_and_a_while(monkeypatch):
    """A write task's process loads the table it stages against once per
    run and at most STAGING_SECONDS: another run loads its own; a table
    not there yet is asked again; loads past their time are let go."""
    from cairn import _ray_table

    loads = []

    def load(value):
        def loaded():
            loads.append(value)
            return value

        return loaded

    monkeypatch.setattr(_ray_table, "_STAGING", {})
    now = [1000.0]
    monkeypatch.setattr(_ray_table, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    assert _ray_table.staging_table("run-a", "t", load("a1")) == "a1"
    assert _ray_table.staging_table("run-a", "t", load("a2")) == "a1"
    assert _ray_table.staging_table("run-b", "t", load("b1")) == "b1"
    assert _ray_table.staging_table("", "t", load("c")) == "c"
    assert _ray_table.staging_table("", "t", load("d")) == "d"
    assert _ray_table.staging_table("run-a", "none", load(None)) is None
    assert _ray_table.staging_table("run-a", "none", load(None)) is None
    assert loads == ["a1", "b1", "c", "d", None, None]
    now[0] += _ray_table.STAGING_SECONDS
    assert _ray_table.staging_table("run-a", "t", load("a3")) == "a3"
    # run-b's load is past its time: let go.
    assert set(_ray_table._STAGING) == {("run-a", "t")}


def test_the_orphan_warnings_advice_removes_an_orphan_and_keeps_every_row(tmp_path):
    """The advice the warning about a rolled-back unit's files gives, run
    as written: a Parquet file no version references (what a unit killed
    before its commit leaves) is removed, the table's rows are not (the
    advice given before, vacuum(full=True), removed nothing: it is a dry
    run, and spares files younger than 7 days)."""
    import deltalake
    from deltalake import write_deltalake

    uri = str(tmp_path / "table")
    rows = pa.table({"uid": pa.array(range(100), pa.int64())})
    write_deltalake(uri, rows)
    orphan = os.path.join(uri, "part-00000-orphan.parquet")
    pq.write_table(pa.table({"uid": pa.array([1000], pa.int64())}), orphan)
    call = ORPHAN_CLEAN_UP.split(", run once")[0]
    eval(call, {"deltalake": deltalake, "uri": uri})
    assert not os.path.exists(orphan)
    left = deltalake.DeltaTable(uri).to_pyarrow_table()["uid"].to_pylist()
    assert sorted(left) == list(range(100))
