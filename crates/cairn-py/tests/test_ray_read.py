"""cairn.ray.read_parquet with Ray Data 2.60: the rows, columns and row_hash
IDs of Ray's own read_parquet; on a resumed job, the row groups whose IDs
are all committed are left out (proved by row_hash positions or by integer
statistics) and the rest still goes through the checkpoint filter.

The expected rows come from pyarrow and from the test's own row_hash (the
formula of shared/reference/ray-checkpoint.md, with hashlib and NumPy),
never from cairn. Runs in the Ray virtualenv (scripts/test.sh); elsewhere
the tests show as skipped."""

import logging
import os

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import cairn.ray  # noqa: E402
from oracle import row_hashes  # noqa: E402

ROWS_PER_FILE = 3000
ROW_GROUP = 500
#: Hive-partitioned: (directory, first uid) of each input file.
FILES = [("kind=a/f0", 0), ("kind=a/f1", 3000), ("kind=b/f0", 6000), ("kind=b/f1", 9000)]


def test_the_test_row_hash_matches_the_reference_vectors():
    assert row_hashes("/data/in/part-0001.parquet", 0, 2).tolist() == [
        13557062875977446881,
        12385235595624141131,
    ]
    assert row_hashes("my-bucket/input/part-0001.parquet", 1000000, 1).tolist() == [
        12895775054419180647
    ]


def write_input(root):
    """The input (uid, text), each file in row groups of ROW_GROUP rows,
    under hive partition directories; with each file's path and first uid."""
    written = []
    for name, first in FILES:
        path = os.path.join(root, f"{name}.parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        uids = range(first, first + ROWS_PER_FILE)
        table = pa.table({"uid": pa.array(uids, pa.int64()), "text": [f"row {i}" for i in uids]})
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        written.append((path, first))
    return written


def expected_rows(written):
    """What Ray's read_parquet(include_row_hash=True) gives, from pyarrow:
    the file's columns, the partition column (a string), row_hash."""
    tables = []
    for path, _ in written:
        table = pq.read_table(path, partitioning=None)
        kind = os.path.basename(os.path.dirname(path)).split("=", 1)[1]
        table = table.append_column("kind", pa.array([kind] * table.num_rows, pa.string()))
        table = table.append_column(
            "row_hash", pa.array(row_hashes(path, 0, table.num_rows), pa.uint64())
        )
        tables.append(table)
    return pa.concat_tables(tables).sort_by("row_hash")


def collect(ds):
    return pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("row_hash")


def test_the_rows_columns_and_row_hashes_of_rays_reader(local_ray, no_checkpoint, tmp_path):
    written = write_input(str(tmp_path / "in"))
    ours = collect(cairn.ray.read_parquet(str(tmp_path / "in"), include_row_hash=True))
    rays = collect(ray.data.read_parquet(str(tmp_path / "in"), include_row_hash=True))
    assert ours.equals(rays), f"{ours.schema} != {rays.schema}"
    assert ours.equals(expected_rows(written))


def written_rows(out, leave_out=()):
    """The rows of the Parquet files in `out` (but `leave_out`), by pyarrow."""
    names = sorted(n for n in os.listdir(out) if n.endswith(".parquet") and n not in leave_out)
    tables = [pq.read_table(os.path.join(out, n), partitioning=None) for n in names]
    return pa.concat_tables(tables).sort_by("row_hash") if tables else None


def plant_committed_unit(tmp_path, id_column, rows):
    """A committed unit in Ray's layout: its ID file in the checkpoint
    (one Parquet column of IDs) and its data file in the output. Returns
    the checkpoint and output directories."""
    checkpoint, out = tmp_path / "ckpt", tmp_path / "out"
    checkpoint.mkdir()
    out.mkdir()
    pq.write_table(rows.select([id_column]), str(checkpoint / "w_000001.parquet"))
    pq.write_table(rows, str(out / "w_000001-0.parquet"))
    return str(checkpoint), str(out)


@pytest.mark.parametrize("sharded", [False, True], ids=["one-set", "sharded"])
@pytest.mark.parametrize("id_column", ["uid", "row_hash"])
def test_a_resume_leaves_out_the_row_groups_all_committed(
    local_ray, no_checkpoint, tmp_path, caplog, id_column, sharded
):
    """Committed: row groups 0, 1 and 3 of the first file, all of the last,
    and every 7th row of the second file's first group (not a whole group:
    read, and its committed rows dropped by the filter). 9 of 24 row groups
    are left out; the rows after a left-out group keep their row_hash.
    Sharded: the set is over max_filter_memory and split over three shard
    actors by key range; the same row groups are left out, each shard
    answering for its own IDs."""
    written = write_input(str(tmp_path / "in"))
    expected = expected_rows(written)
    (first, _), (second, _), _, (last, _) = written
    committed_rows = (
        [(first, p) for p in [*range(0, 1000), *range(1500, 2000)]]
        + [(second, p) for p in range(0, ROW_GROUP, 7)]
        + [(last, p) for p in range(ROWS_PER_FILE)]
    )
    uid_of = {path: start for path, start in written}
    uids = pa.array([uid_of[path] + p for path, p in committed_rows], pa.int64())
    committed = expected.filter(pc.is_in(expected["uid"], value_set=uids))
    left = expected.filter(pc.invert(pc.is_in(expected["uid"], value_set=uids)))
    assert left.num_rows == 12000 - len(committed_rows)
    checkpoint, out = plant_committed_unit(tmp_path, id_column, committed)
    extra = {}
    if sharded:
        # Three shards: the budget just under the ID file's size (a shard
        # takes 0.35 of the budget in ID files' bytes).
        extra["max_filter_memory"] = (
            os.path.getsize(os.path.join(checkpoint, "w_000001.parquet")) - 1
        )
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        id_column, checkpoint, delete_checkpoint_on_success=False, **extra
    )

    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        cairn.ray.read_parquet(str(tmp_path / "in"), include_row_hash=True).write_parquet(out)
    assert "leaves out 9 of 24 row groups (4500 of 12000 rows" in caplog.text, caplog.text
    shard_logs = [r for r in caplog.records if "shards of at most" in r.msg]
    if sharded:
        [record] = shard_logs
        assert record.args[2] == 3, record.args
    else:
        assert not shard_logs
    assert written_rows(out, ["w_000001-0.parquet"]).equals(left)
    assert written_rows(out).equals(expected), "every row once"


def test_rays_reader_on_the_same_checkpoint_reads_everything(
    local_ray, no_checkpoint, tmp_path, caplog
):
    """The side-by-side baseline: Ray's read_parquet and the same committed
    unit give the same rows, with nothing left out of the read."""
    written = write_input(str(tmp_path / "in"))
    expected = expected_rows(written)
    committed = expected.filter(pc.less(expected["uid"], 6000))
    checkpoint, out = plant_committed_unit(tmp_path, "uid", committed)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", checkpoint, delete_checkpoint_on_success=False
    )
    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        ray.data.read_parquet(str(tmp_path / "in"), include_row_hash=True).write_parquet(out)
    assert "leaves out" not in caplog.text
    assert written_rows(out).equals(expected)


def test_statistics_prove_nothing_for_ids_that_are_not_dense(
    local_ray, no_checkpoint, tmp_path, caplog
):
    """A row group's min..max holds IDs the group does not have: only a
    range the set holds whole proves the group committed."""
    root = tmp_path / "in"
    root.mkdir()
    uids = np.arange(0, 4000, 2, dtype=np.int64)  # even uids only
    table = pa.table({"uid": uids, "text": [str(u) for u in uids]})
    pq.write_table(table, str(root / "f.parquet"), row_group_size=ROW_GROUP)
    # The first group's whole range [0, 998] (its even uids and the odd
    # ones between) and every other uid of the second group's range.
    committed = pa.table({"uid": pa.array([*range(0, 999), *range(1000, 1500, 4)], pa.int64())})
    committed = committed.append_column("text", pc.cast(committed["uid"], pa.string()))
    checkpoint, out = plant_committed_unit(tmp_path, "uid", committed)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", checkpoint, delete_checkpoint_on_success=False
    )
    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        cairn.ray.read_parquet(str(root)).write_parquet(out)
    assert "leaves out 1 of 4 row groups" in caplog.text, caplog.text
    new = [
        pq.read_table(os.path.join(out, n)) for n in os.listdir(out) if n != "w_000001-0.parquet"
    ]
    got = sorted(pa.concat_tables(new)["uid"].to_pylist())
    assert got == sorted(set(range(1000, 4000, 2)) - set(range(1000, 1500, 4)))


def test_a_read_without_cairns_manager_reads_everything(local_ray, no_checkpoint, tmp_path, caplog):
    written = write_input(str(tmp_path / "in"))
    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        ours = collect(cairn.ray.read_parquet(str(tmp_path / "in"), include_row_hash=True))
    assert ours.num_rows == len(written) * ROWS_PER_FILE
    assert "leaves out" not in caplog.text


def test_a_filter_given_to_the_reader_is_refused(local_ray, no_checkpoint, tmp_path):
    """As Ray 2.60's read_parquet refuses it: its row_hash would be numbered
    in a way neither of Ray's readers uses."""
    import pyarrow.dataset as pds

    write_input(str(tmp_path / "in"))
    with pytest.raises(ValueError, match=r"filter=.*\.filter\(expr=\.\.\.\)"):
        cairn.ray.read_parquet(str(tmp_path / "in"), filter=pds.field("uid") > 5)


def filtered_input(root):
    """The issue's file: 300 rows (uid 0..299, keep = uid >= 50, and a
    second file the same), row groups of 100."""
    os.makedirs(root)
    paths = []
    for name, first in (("a", 0), ("b", 300)):
        uids = np.arange(first, first + 300, dtype=np.int64)
        table = pa.table({"uid": uids, "keep": (uids % 300) >= 50})
        path = os.path.join(root, f"{name}.parquet")
        pq.write_table(table, path, row_group_size=100)
        paths.append(path)
    return paths


def filtered_rows(paths, by_row_group):
    """(uid, row_hash) of the rows `keep` selects, numbered as Ray numbers
    them after a filter: by its V2 datasource from each row group's first
    row, counting kept rows; by its V1 one from the file's first row."""
    rows = []
    for path in paths:
        table = pq.read_table(path)
        kept = np.nonzero(table["keep"].to_numpy())[0]
        if by_row_group:
            positions = [
                100 * (r // 100) + sum(1 for k in kept if k // 100 == r // 100 and k < r)
                for r in kept
            ]
        else:
            positions = range(len(kept))
        uids = table["uid"].to_numpy()
        for row, position in zip(kept, positions):
            rows.append((int(uids[row]), int(row_hashes(path, position, 1)[0])))
    return sorted(rows)


@pytest.mark.parametrize("v2", [True, False], ids=["ray-v2-reader", "ray-v1-reader"])
def test_a_filtered_read_numbers_row_hash_as_rays_reader(local_ray, no_checkpoint, tmp_path, v2):
    """cairn.ray.read_parquet(...).filter(expr) and Ray's own
    read_parquet(...).filter(expr) give the same row_hash, bit for bit,
    with each of the two datasources Ray 2.60 reads Parquet with."""
    from ray.data.expressions import col

    paths = filtered_input(str(tmp_path / "in"))
    no_checkpoint.use_datasource_v2 = v2
    try:
        ours = collect(
            cairn.ray.read_parquet(str(tmp_path / "in"), include_row_hash=True).filter(
                expr=col("keep")
            )
        )
        rays = collect(
            ray.data.read_parquet(str(tmp_path / "in"), include_row_hash=True).filter(
                expr=col("keep")
            )
        )
    finally:
        no_checkpoint.use_datasource_v2 = True
    pairs = lambda t: sorted(zip(t["uid"].to_pylist(), t["row_hash"].to_pylist()))  # noqa: E731
    assert pairs(ours) == pairs(rays)
    assert pairs(ours) == filtered_rows(paths, by_row_group=v2)


@pytest.mark.parametrize("v2", [True, False], ids=["ray-v2-reader", "ray-v1-reader"])
@pytest.mark.parametrize("id_column", ["row_hash", "uid"])
def test_a_filtered_resume_is_exactly_once(local_ray, no_checkpoint, tmp_path, v2, id_column):
    """The issue's case: a committed unit holds the rows of uids 50..149 and
    250..299 of the first file as the filtered read numbers them; the
    resume with the same filter writes every other kept row once."""
    from ray.data.expressions import col

    paths = filtered_input(str(tmp_path / "in"))
    rows = filtered_rows(paths, by_row_group=v2)
    committed = [(u, h) for u, h in rows if 50 <= u < 150 or 250 <= u < 300]
    table = pa.table(
        {
            "uid": pa.array([u for u, _ in committed], pa.int64()),
            "keep": pa.array([True] * len(committed)),
            "row_hash": pa.array([h for _, h in committed], pa.uint64()),
        }
    )
    checkpoint, out = plant_committed_unit(tmp_path, id_column, table)
    no_checkpoint.use_datasource_v2 = v2
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        id_column, checkpoint, delete_checkpoint_on_success=False
    )
    try:
        cairn.ray.read_parquet(str(tmp_path / "in"), include_row_hash=True).filter(
            expr=col("keep")
        ).write_parquet(out)
    finally:
        no_checkpoint.use_datasource_v2 = True
    written = written_rows(out)
    got = sorted(zip(written["uid"].to_pylist(), written["row_hash"].to_pylist()))
    assert got == rows, f"{len(got)} rows written, {len(set(got))} distinct, for {len(rows)}"


def test_an_offer_never_taken_reaches_no_later_planning(local_ray, no_checkpoint, tmp_path):
    """Two plannings under one DataContext: the first offers the committed
    set and its read never takes it; by the second, the checkpoint commits
    nothing. The second planning's read must read every row. (Ray 2.60's
    writes deep-copy the context for each execution, so two of them never
    share one: this drives the manager and the datasource as one planning
    after another would, under the same context object.)"""
    written = write_input(str(tmp_path / "in"))
    expected = expected_rows(written)
    committed = expected.filter(pc.less(expected["uid"], 6000))
    checkpoint, out = plant_committed_unit(tmp_path, "uid", committed)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", checkpoint, delete_checkpoint_on_success=False
    )
    datasource = cairn.ray.SkippingParquetDatasource(
        str(tmp_path / "in"), include_row_hash=True, file_extensions=["parquet"]
    )

    def planning():
        manager = cairn.ray.CheckpointManager(
            checkpoint_config=no_checkpoint.checkpoint_config, data_context=no_checkpoint
        )
        return manager.load_checkpoint(out, None)

    ref, _ = planning()
    assert ref is not None, "the first planning offers the set; nothing takes it"
    # The unit is dropped (its ID file and its data), as a user starting
    # the output over would; the checkpoint directory stays.
    os.remove(os.path.join(checkpoint, "w_000001.parquet"))
    os.remove(os.path.join(out, "w_000001-0.parquet"))
    assert planning() == (None, 0)
    tasks = datasource.get_read_tasks(4, data_context=no_checkpoint)
    got = pa.concat_tables([block for task in tasks for block in task()]).sort_by("row_hash")
    assert got.num_rows == expected.num_rows, "every row, none left out by a stale offer"


def test_a_cached_listing_hides_no_partitioned_unit_from_roll_back(
    local_ray, no_checkpoint, target
):
    """The driver listed the output through its CairnFileSystem (listing
    cache on) while it was flat; a partitioned write then died in other
    processes, leaving a unit's file under k=1/ and its pending record. The
    next run's settle, through the same filesystem object, must see the
    partition directory and roll the unit back: the store decides, never
    the cache. pyarrow alone plants the files and reads what is left."""
    import pyarrow.fs as pafs

    from conftest import garage_options
    from oracle import pyarrow_s3

    fs, base = target
    if fs._protocol == "file":
        raw, options, scheme = pafs.LocalFileSystem(), None, ""
    else:
        raw, options, scheme = pyarrow_s3(garage_options()), {"s3": garage_options()}, "s3://"
    checkpoint, out = f"{base}/ckpt", f"{base}/out"
    raw.create_dir(checkpoint)
    raw.create_dir(out)
    kept = pa.table({"uid": pa.array([1], pa.int64())})
    pq.write_table(kept, f"{checkpoint}/w_000001.parquet", filesystem=raw)
    pq.write_table(kept, f"{out}/w_000001-0.parquet", filesystem=raw)
    assert len(fs.ls(out)) == 1, "listed, and cached, while flat"
    raw.create_dir(f"{out}/k=1")
    dead = pa.table({"uid": pa.array([2, 3], pa.int64())})
    pq.write_table(dead, f"{checkpoint}/w_000002.pending.parquet", filesystem=raw)
    pq.write_table(dead, f"{out}/k=1/w_000002-0.parquet", filesystem=raw)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{scheme}{checkpoint}", options, delete_checkpoint_on_success=False
    )
    manager = cairn.ray.CheckpointManager(
        checkpoint_config=no_checkpoint.checkpoint_config, data_context=no_checkpoint
    )
    manager.load_checkpoint(out, pafs.PyFileSystem(pafs.FSSpecHandler(fs)))
    left = raw.get_file_info(pafs.FileSelector(out, recursive=True))
    names = sorted(i.path[len(out) + 1 :] for i in left if i.type == pafs.FileType.File)
    assert names == ["w_000001-0.parquet"], names
    pending = raw.get_file_info(f"{checkpoint}/w_000002.pending.parquet")
    assert pending.type == pafs.FileType.NotFound


def test_rays_reader_through_cairn_fetches_what_pyarrows_own_s3_does(
    local_ray, no_checkpoint, monkeypatch
):
    """Ray's read_parquet with row_hash, through build_checkpoint_filesystem
    (its files pyarrow's S3 client's, and cairn's own with
    CAIRN_PYARROW_S3=0) and through pyarrow's own S3FileSystem, bytes on the
    wire counted by a proxy in front of Garage: cairn's within 5% of
    pyarrow's (Ray reads each footer several times either way: planning,
    sampling, the read task). Through fsspec's read-ahead, each row group's
    read fetched its whole file again: 5.6x the input."""
    import pyarrow.fs as pafs
    from conftest import fresh, garage_options
    from counting_proxy import CountingProxy

    options = garage_options()
    base = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    writer = cairn.build_checkpoint_filesystem(f"s3://{base}", options)
    rows, files, total = 60_000, 4, 0
    for n in range(files):
        uids = range(n * rows, (n + 1) * rows)
        table = pa.table(
            {"uid": pa.array(uids, pa.int64()), "text": [f"row {i:09d}" for i in uids]}
        )
        path = f"{base}/in/part-{n}.parquet"
        pq.write_table(table, path, filesystem=writer, row_group_size=rows // 10)
        total += writer.get_file_info(path).size
    fetched = {}
    with CountingProxy(options["endpoint_url"]) as proxy:
        with monkeypatch.context() as switched_off:
            switched_off.setenv("CAIRN_PYARROW_S3", "0")
            own_files = cairn.build_checkpoint_filesystem(
                f"s3://{base}", dict(options, endpoint_url=proxy.endpoint)
            )
        through = {
            "cairn": cairn.build_checkpoint_filesystem(
                f"s3://{base}", dict(options, endpoint_url=proxy.endpoint)
            ),
            "cairn's own files": own_files,
            "pyarrow": pafs.S3FileSystem(
                access_key=options["key"],
                secret_key=options["secret"],
                endpoint_override=proxy.endpoint,
                region=options["region"],
                scheme="http",
            ),
        }
        for name, filesystem in through.items():
            proxy.reset()
            frame = ray.data.read_parquet(
                f"{base}/in", filesystem=filesystem, include_row_hash=True
            ).to_pandas()
            assert sorted(frame["uid"]) == list(range(files * rows)), name
            fetched[name] = (proxy.get_bytes, proxy.gets)
    native_bytes, native_gets = fetched["pyarrow"]
    assert native_bytes >= total, f"pyarrow read {native_bytes} bytes of {total}"
    for name in ("cairn", "cairn's own files"):
        cairn_bytes, cairn_gets = fetched[name]
        assert cairn_bytes <= native_bytes * 1.05 + 64 * 1024, (
            f"{name} read {cairn_bytes} bytes in {cairn_gets} GETs, pyarrow's S3FileSystem "
            f"{native_bytes} in {native_gets}, for {total} bytes of input"
        )


def test_a_95_percent_resume_fetches_what_is_left_and_each_footer_exactly(
    local_ray, no_checkpoint, tmp_path
):
    """19 of 20 files committed; the input on Garage behind a counting
    proxy, the checkpoint and output on local disk. On the wire: the file
    left (its read task's footer read included), each file's footer read
    by cairn's planning by exact range (at most 16 KiB a file, where
    pyarrow's read takes the last 64 KiB), and what Ray's read_parquet reads
    before any checkpoint is known: the first file's footer (the schema)
    and, to estimate sizes, the first row group and footer of the first
    and the last file."""
    from conftest import fresh, garage_options
    from counting_proxy import FOOTER_READ, CountingProxy, needed_bytes

    options = garage_options()
    base = f"{fresh(os.environ['CAIRN_TEST_GARAGE_BUCKET'])}/in"
    writer = cairn.build_checkpoint_filesystem(f"s3://{base}", options)
    checkpoint, out = tmp_path / "ckpt", tmp_path / "out"
    checkpoint.mkdir()
    out.mkdir()
    files, rows, sizes, sampled = 20, 10_000, [], []
    for n in range(files):
        uids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
        table = pa.table({"uid": uids, "text": [os.urandom(50).hex() for _ in range(rows)]})
        path = f"{base}/part-{n:02}.parquet"
        pq.write_table(table, path, filesystem=writer, row_group_size=rows // 10)
        sizes.append(writer.get_file_info(path).size)
        if n in (0, files - 1):
            metadata = pq.ParquetFile(writer.open_input_file(path)).metadata
            sampled.append(needed_bytes(metadata, sizes[-1], [0], {"uid", "text"}))
        if n < files - 1:
            pq.write_table(table.select(["uid"]), str(checkpoint / f"w_{n:06}.parquet"))
            pq.write_table(table.slice(0, 0), str(out / f"w_{n:06}-0.parquet"))
    assert min(sizes) > 8 * FOOTER_READ, "files too small for footers to matter"
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", str(checkpoint), delete_checkpoint_on_success=False
    )
    with CountingProxy(options["endpoint_url"]) as proxy:
        through = cairn.build_checkpoint_filesystem(
            f"s3://{base}", dict(options, endpoint_url=proxy.endpoint)
        )
        cairn.ray.read_parquet(base, filesystem=through).write_parquet(str(out))
    written = pa.concat_tables(
        pq.read_table(str(out / n)) for n in sorted(os.listdir(out)) if n.endswith(".parquet")
    )
    assert sorted(written["uid"].to_pylist()) == list(range((files - 1) * rows, files * rows))
    planning = sum(min(s, 16 << 10) for s in sizes)
    rays_own = FOOTER_READ + sum(sampled)
    listings = 16 << 10
    bound = sizes[-1] + FOOTER_READ + planning + rays_own + listings
    assert proxy.get_bytes <= bound, (
        f"{proxy.get_bytes} bytes in {proxy.gets} GETs for {sizes[-1]} left of {sum(sizes)}: "
        + "; ".join(f"{p.rsplit('/', 1)[-1]} {r} {n}" for p, r, n in proxy.get_log)
    )


def test_a_read_task_opens_each_file_once_with_its_listed_size(no_checkpoint):
    """cairn.ray.read_parquet's read tasks on Garage behind a counting
    proxy, run in this process: a file of at most 64 KiB is fetched whole
    in one GET, and so is a larger one (up to 8 MiB) when the read takes
    every column; with a projection the larger one is read by ranges (a
    footer GET, then the data's) with no HEAD (its size is the listing's),
    where Ray's read task HEADs and fetches each file twice (its schema,
    then its batches). The rows, the ``path`` column, the hive partition
    column and ``row_hash`` are pyarrow's and the test's own, through
    pyarrow's S3 client and through cairn's own (CAIRN_PYARROW_S3=0)."""
    from conftest import fresh, garage_options
    from urllib.parse import unquote

    from counting_proxy import CountingProxy

    options = garage_options()
    base = f"{fresh(os.environ['CAIRN_TEST_GARAGE_BUCKET'])}/in"
    writer = cairn.build_checkpoint_filesystem(f"s3://{base}", options)
    sizes, expected = {}, []
    for n, (directory, rows) in enumerate([("kind=a", 500), ("kind=a", 800), ("kind=b", 60_000)]):
        uids = pa.array(range(n * 100_000, n * 100_000 + rows), pa.int64())
        table = pa.table({"uid": uids, "text": [os.urandom(8).hex() for _ in range(rows)]})
        path = f"{base}/{directory}/part-{n}.parquet"
        pq.write_table(table, path, filesystem=writer, row_group_size=10_000)
        sizes[path] = writer.get_file_info(path).size
        hashes = row_hashes(path, 0, rows)
        expected.append(
            table.append_column("kind", pa.array([directory[-1]] * rows))
            .append_column("path", pa.array([path] * rows))
            .append_column("row_hash", pa.array(hashes, pa.uint64()))
        )
    small = [p for p, s in sizes.items() if s <= 64 << 10]
    assert len(small) == 2 and len(sizes) == 3, sizes
    assert max(sizes.values()) <= 8 << 20, sizes
    want = pa.concat_tables(expected).sort_by("uid")
    for columns, pyarrow_s3 in [(None, "1"), (None, "0"), (["uid"], "1"), (["uid"], "0")]:
        os.environ["CAIRN_PYARROW_S3"] = pyarrow_s3
        try:
            with CountingProxy(options["endpoint_url"]) as proxy:
                through = cairn.build_checkpoint_filesystem(
                    f"s3://{base}", dict(options, endpoint_url=proxy.endpoint)
                )
                datasource = cairn.ray.SkippingParquetDatasource(
                    base,
                    filesystem=through,
                    include_paths=True,
                    include_row_hash=True,
                    file_extensions=["parquet"],
                    columns=columns,
                )
                tasks = datasource.get_read_tasks(3, data_context=no_checkpoint)
                proxy.reset()
                got = pa.concat_tables([b for task in tasks for b in task()])
                log = list(proxy.log)
        finally:
            del os.environ["CAIRN_PYARROW_S3"]
        case = f"columns={columns} CAIRN_PYARROW_S3={pyarrow_s3}"
        if columns is None:
            got = got.select(want.column_names).cast(want.schema).sort_by("uid")
            assert got.equals(want), case
        else:
            assert "uid" in got.column_names and "text" not in got.column_names, case
            assert got.sort_by("uid").column("uid").equals(want.column("uid")), case
        by_file = {}
        for method, key, _ in log:
            path = unquote(key.split("?", 1)[0].lstrip("/"))
            by_file.setdefault(path, []).append(method)
        for path in sizes:
            sent = by_file.get(path, [])
            assert "HEAD" not in sent, (case, path, sent, log)
            if path in small or columns is None:
                assert sent == ["GET"], (case, path, sent)
            else:
                # The footer, then the column's chunks (one a row group at
                # most: 6 here), never the whole file.
                assert 2 <= sent.count("GET") <= 7, (case, path, sent)
        assert set(by_file) <= set(sizes), log
