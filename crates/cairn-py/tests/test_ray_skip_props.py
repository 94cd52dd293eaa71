"""A property test of cairn.ray.read_parquet's skipping, against an
independent oracle: over drawn inputs (files of uneven row groups, empty
files, integer IDs with gaps, nulls, negative and past 2^62 values, string
IDs, row_hash IDs), drawn filters and column selections, Ray's two ways of
numbering row_hash after a filter (its V1 and V2 datasources), and a drawn
committed subset (whole row groups, parts of groups, none, all, plus IDs
that are not in the input), held in one set or split by key range over
shards, a resume must read exactly the rows not yet committed, once each.

The code under test is cairn's own planning and reading
(``SkippingParquetDatasource``: footers, the questions to the set or the
shards, the read tasks) and its checkpoint filter, run in this process;
the shards are cairn's ``Shard`` class answering through Ray's object store
(the actor transport is tested in test_ray_shards.py). The oracle is
pyarrow and NumPy: the input read back, the filter applied with
pyarrow.compute, row_hash computed from its formula (oracle.row_hashes),
the committed rows removed.

``CAIRN_SKIP_PROP_EXAMPLES`` sets the number of drawn cases (300 in
scripts/test.sh; ``scripts/bench/skip_props.sh`` runs thousands). A failure
prints the falsifying case and how to reproduce it."""

import os
import tempfile
import types

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")
pytest.importorskip("hypothesis", reason="needs hypothesis: scripts/test.sh installs it")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from ray.data import DataContext  # noqa: E402
from ray.data.expressions import col  # noqa: E402

from cairn._native import NativeIdSetBuilder  # noqa: E402
from cairn._ray_read import SkippingParquetDatasource  # noqa: E402
from cairn._ray_shards import Shard, ShardedSet, _split, routed  # noqa: E402
from cairn.ray import CheckpointFilter  # noqa: E402
from oracle import row_hashes  # noqa: E402

EXAMPLES = int(os.environ.get("CAIRN_SKIP_PROP_EXAMPLES", "300"))

#: Where integer IDs start: around zero, negative, past 2^62, near both ends.
BASES = [0, -40, 1 << 62, (1 << 63) - 200, -(1 << 63), 10_000]


@st.composite
def inputs(draw):
    """Files of (f, n, uid, keep, text): each file's row groups drawn (an
    empty file now and then), uid of the drawn kind."""
    kind = draw(st.sampled_from(["int", "int", "string", "row_hash"]))
    base = draw(st.sampled_from(BASES))
    next_uid = base
    files = []
    for f in range(draw(st.integers(1, 3))):
        groups = draw(st.lists(st.integers(1, 9), min_size=0, max_size=5))
        rows = sum(groups)
        gaps = draw(st.lists(st.sampled_from([1, 1, 1, 2, 7]), min_size=rows, max_size=rows))
        uids = []
        for gap in gaps:
            uids.append(next_uid)
            next_uid += gap
        nulls = draw(st.sets(st.integers(0, max(0, rows - 1)), max_size=2)) if rows else set()
        if draw(st.booleans()):
            nulls = set()
        keep = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
        files.append({"groups": groups, "uids": uids, "nulls": nulls, "keep": keep})
    return kind, files


def write_files(root, kind, files):
    """The drawn files, each row group written as drawn; their paths."""
    paths = []
    for f, spec in enumerate(files):
        rows = sum(spec["groups"])
        uids = [None if i in spec["nulls"] else u for i, u in enumerate(spec["uids"])]
        if kind == "string":
            uid = pa.array([None if u is None else f"doc-{u}" for u in uids], pa.string())
        else:
            uid = pa.array(uids, pa.int64())
        table = pa.table(
            {
                "f": pa.array([f] * rows, pa.int64()),
                "n": pa.array(range(rows), pa.int64()),
                "uid": uid,
                "keep": pa.array(spec["keep"], pa.bool_()),
                "text": pa.array([f"row {f}/{i}" for i in range(rows)], pa.string()),
            }
        )
        path = os.path.join(root, f"part-{f}.parquet")
        with pq.ParquetWriter(path, table.schema) as writer:
            start = 0
            for size in spec["groups"]:
                writer.write_table(table.slice(start, size), row_group_size=size)
                start += size
        paths.append(path)
    return paths


def oracle_rows(paths, files, predicate, by_row_group):
    """What a read gives (f, n, uid, row_hash), from pyarrow alone: the
    rows the filter keeps, row_hash numbered as Ray numbers it (from the
    file's first row, counting kept rows; by Ray's V2 datasource, from each
    row group's first row in the file)."""
    out = []
    for path, spec in zip(paths, files):
        table = pq.read_table(path)
        kept = np.ones(table.num_rows, dtype=bool)
        if predicate is not None:
            kept = predicate(table).to_numpy(zero_copy_only=False)
        kept_rows = np.nonzero(kept)[0]
        if predicate is None:
            positions = kept_rows
        elif by_row_group:
            positions = []
            start = 0
            for size in spec["groups"]:
                inside = kept_rows[(kept_rows >= start) & (kept_rows < start + size)]
                positions.extend(start + np.arange(len(inside)))
                start += size
            positions = np.array(positions, dtype=np.int64)
        else:
            positions = np.arange(len(kept_rows))
        hashes = [
            int(row_hashes(path, int(p), 1)[0]) for p in np.asarray(positions, dtype=np.int64)
        ]
        uids = table.column("uid").to_pylist()
        for row, row_hash in zip(kept_rows, hashes):
            out.append((int(table.column("f")[row].as_py()), int(row), uids[row], row_hash))
    return out


FILTERS = {
    "none": (None, None),
    "keep": (lambda t: pc.equal(t["keep"], True), col("keep") == True),  # noqa: E712
    "n>=3": (lambda t: pc.greater_equal(t["n"], 3), col("n") >= 3),
}


class LocalShard:
    """A :class:`Shard` answering through Ray's object store, in this
    process: ``shard.method.remote(...)`` as an actor handle's."""

    def __init__(self, shard):
        self._shard = shard

    def __getattr__(self, name):
        method = getattr(self._shard, name)
        return types.SimpleNamespace(remote=lambda *args: ray.put(method(*args)))


def committed_set(ids, id_type, boundaries):
    """The committed IDs in one set, or split by key range over shards."""
    array = pa.array(ids, id_type)
    if boundaries is None:
        builder = NativeIdSetBuilder()
        builder.push(array)
        return builder.build()
    column, keys = routed(array)
    lows = [0, *[int(b) for b in boundaries]]
    highs = [*[int(b) for b in boundaries], None]
    shards = []
    for rows, low, high in zip(_split(keys, boundaries), lows, highs):
        shard = Shard([], None, "id", low, high, 1 << 16)
        if len(rows):
            shard.add(column.take(pa.array(rows)))
        shard.seal()
        shards.append(LocalShard(shard))
    return ShardedSet(boundaries, shards, len(ids), 0)


def filter_rows(block, id_column, committed):
    """cairn's checkpoint filter on ``block`` (as each filter actor runs it)."""
    checkpoint_filter = object.__new__(CheckpointFilter)
    checkpoint_filter.id_column = id_column
    if isinstance(committed, ShardedSet):
        checkpoint_filter._ids, checkpoint_filter._sharded = None, committed
    else:
        checkpoint_filter._ids = committed
    return checkpoint_filter.filter_rows_for_block(block)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    drawn=inputs(),
    filter_name=st.sampled_from(sorted(FILTERS)),
    by_row_group=st.booleans(),
    with_row_hash=st.booleans(),
    select=st.booleans(),
    parallelism=st.integers(1, 4),
    data=st.data(),
)
def test_a_resume_reads_exactly_the_rows_not_committed(
    local_ray, drawn, filter_name, by_row_group, with_row_hash, select, parallelism, data
):
    kind, files = drawn
    id_column = "row_hash" if kind == "row_hash" else "uid"
    include_row_hash = with_row_hash or kind == "row_hash"
    predicate, expression = FILTERS[filter_name]
    with tempfile.TemporaryDirectory() as root:
        paths = write_files(root, kind, files)
        rows = oracle_rows(paths, files, predicate, by_row_group)
        id_of = (lambda r: r[3]) if id_column == "row_hash" else (lambda r: r[2])

        # The committed subset: per (file, row group), all, none or a part.
        how = data.draw(st.sampled_from(["none", "all", "groups", "mixed"]), label="committed")
        committed_keys = set()
        for f, spec in enumerate(files):
            start = 0
            for size in spec["groups"]:
                group = [r for r in rows if r[0] == f and start <= r[1] < start + size]
                choice = {"none": "none", "all": "all"}.get(how) or data.draw(
                    st.sampled_from(["all", "none"] if how == "groups" else ["all", "none", "part"])
                )
                if choice == "all":
                    committed_keys.update((r[0], r[1]) for r in group)
                elif choice == "part" and group:
                    picked = data.draw(st.sets(st.sampled_from(group), max_size=len(group)))
                    committed_keys.update((r[0], r[1]) for r in picked)
                start += size
        ids = [id_of(r) for r in rows if (r[0], r[1]) in committed_keys and id_of(r) is not None]
        if kind in ("int", "row_hash") and data.draw(st.booleans(), label="foreign IDs"):
            ids += [12345, 1 << 40] if kind == "int" else [7, 1 << 63]
        if kind == "string" and ids and data.draw(st.booleans(), label="foreign IDs"):
            ids.append("not-an-input-id")
        id_type = {"int": pa.int64(), "string": pa.string(), "row_hash": pa.uint64()}[kind]
        boundaries = None
        if ids and data.draw(st.booleans(), label="sharded"):
            _, keys = routed(pa.array(ids, id_type))
            cuts = data.draw(st.lists(st.sampled_from(sorted(set(keys.tolist()))), max_size=3))
            boundaries = np.unique(np.array(cuts, dtype=np.uint64))
        committed = committed_set(ids, id_type, boundaries) if ids else None
        committed_ids = set(ids)
        expected = sorted(
            (r[0], r[1], r[3]) for r in rows if id_of(r) is None or id_of(r) not in committed_ids
        )

        context = DataContext.get_current()
        before = context.use_datasource_v2
        context.use_datasource_v2 = by_row_group
        try:
            datasource = SkippingParquetDatasource(
                root,
                columns=["f", "n", "uid", "keep"] if select else None,
                include_row_hash=include_row_hash,
                file_extensions=["parquet"],
            )
        finally:
            context.use_datasource_v2 = before
        if expression is not None:
            datasource = datasource.apply_predicate(expression)
        tasks = datasource._read_tasks_given(committed, id_column if ids else None, parallelism)
        blocks = [block for task in tasks for block in task()]
        read = sum(block.num_rows for block in blocks)
        event(f"rows left out of the read: {'some' if read < len(rows) else 'none'}")
        got = []
        for block in blocks:
            if committed is not None:
                block = filter_rows(block, id_column, committed)
            hashes = (
                block.column("row_hash").to_pylist() if include_row_hash else [None] * len(block)
            )
            got.extend(zip(block.column("f").to_pylist(), block.column("n").to_pylist(), hashes))
        if not include_row_hash:
            expected = [(f, n, None) for f, n, _ in expected]
        assert sorted(got) == expected
