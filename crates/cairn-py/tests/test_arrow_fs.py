"""The pyarrow filesystem cairn hands out (``build_checkpoint_filesystem``)
and the fsspec ``CairnFile`` read what they are asked for and no more:
bytes and requests on the wire counted by a proxy in front of Garage,
against the byte ranges the Parquet metadata says a reader needs. A
read-ahead of whole blocks (fsspec's 5 MiB) would fetch the whole file for
one column chunk; a size lookup per read would double the requests."""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.fs  # noqa: F401 - pa.fs
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import fresh, garage_options
from counting_proxy import FOOTER_READ, CountingProxy, needed_bytes

import cairn
from cairn.fsspec import CairnFileSystem

ROWS = 200_000
ROW_GROUP = 20_000


@pytest.fixture(scope="module")
def garage_file():
    """A Parquet file on Garage of 10 row groups and 3 columns (about
    3 MB), written through cairn: its URL, size and metadata."""
    options = garage_options()
    path = f"{fresh(os.environ['CAIRN_TEST_GARAGE_BUCKET'])}/data.parquet"
    table = pa.table(
        {
            "uid": pa.array(range(ROWS), pa.int64()),
            "a": pa.array([(i * 7919) % 1_000_003 for i in range(ROWS)], pa.int64()),
            "b": pa.array([f"row-{i * 31 % 99991:08d}" for i in range(ROWS)]),
        }
    )
    filesystem = cairn.build_checkpoint_filesystem(f"s3://{path}", options)
    pq.write_table(table, path, filesystem=filesystem, row_group_size=ROW_GROUP)
    size = filesystem.get_file_info(path).size
    with filesystem.open_input_file(path) as f:
        metadata = pq.ParquetFile(f).metadata
    return options, path, size, metadata


@pytest.fixture(params=["pyarrow's S3 file", "cairn's file"])
def proxied(request, monkeypatch, garage_file):
    """(pyarrow filesystem through a counting proxy, proxy, path, size,
    metadata), its random-access files pyarrow's own S3 client's (built
    from cairn's settings) or cairn's (``CAIRN_PYARROW_S3=0``)."""
    if request.param == "cairn's file":
        monkeypatch.setenv("CAIRN_PYARROW_S3", "0")
    options, path, size, metadata = garage_file
    with CountingProxy(options["endpoint_url"]) as proxy:
        through = dict(options, endpoint_url=proxy.endpoint)
        yield (
            cairn.build_checkpoint_filesystem(f"s3://{path}", through),
            proxy,
            path,
            size,
            metadata,
        )


def test_one_column_of_one_row_group_fetches_that_chunk_and_the_footer(proxied):
    filesystem, proxy, path, size, metadata = proxied
    assert metadata.num_row_groups == ROWS // ROW_GROUP
    with filesystem.open_input_file(path) as f:
        table = pq.ParquetFile(f).read_row_group(3, columns=["a"])
    assert table.column("a").to_pylist()[:2] == [
        (i * 7919) % 1_000_003 for i in (3 * ROW_GROUP, 3 * ROW_GROUP + 1)
    ]
    needed = needed_bytes(metadata, size, [3], {"a"})
    assert needed < size / 4, "the file is too small for the test to mean anything"
    assert proxy.get_bytes <= needed * 1.05 + 4096, (
        f"read {proxy.get_bytes} bytes in {proxy.gets} GETs for {needed} needed (file of {size})"
    )
    # The size is looked up once, when the file is opened; no read asks again.
    assert proxy.requests["HEAD"] <= 1, dict(proxy.requests)


def test_a_dataset_read_fetches_the_file_once(proxied):
    filesystem, proxy, path, size, metadata = proxied
    table = ds.dataset(path, filesystem=filesystem, format="parquet").to_table()
    assert table.num_rows == ROWS
    assert proxy.get_bytes <= size * 1.05 + FOOTER_READ, (
        f"read {proxy.get_bytes} bytes in {proxy.gets} GETs for a file of {size}"
    )


def test_a_projected_dataset_read_fetches_the_column_chunks(proxied):
    filesystem, proxy, path, size, metadata = proxied
    table = ds.dataset(path, filesystem=filesystem, format="parquet").to_table(columns=["uid"])
    assert table.column("uid").to_pylist() == list(range(ROWS))
    needed = needed_bytes(metadata, size, range(metadata.num_row_groups), {"uid"})
    assert needed < size / 2
    assert proxy.get_bytes <= needed * 1.05 + 4096, (
        f"read {proxy.get_bytes} bytes in {proxy.gets} GETs for {needed} needed (file of {size})"
    )


def test_reads_past_the_end_and_of_missing_files(proxied):
    filesystem, proxy, path, size, metadata = proxied
    with filesystem.open_input_file(path) as f:
        assert f.size() == size
        f.seek(size - 4)
        assert f.read(100) == b"PAR1"
        assert f.read(10) == b""
        assert f.read_at(4, 0) == b"PAR1"
    with pytest.raises(FileNotFoundError):
        filesystem.open_input_file(path + ".missing")
    directory = path.rsplit("/", 1)[0]
    with pytest.raises(OSError):
        filesystem.open_input_file(directory)


def test_random_access_files_are_pyarrows_own_s3_files(garage_file):
    """Where pyarrow's S3 client reads the objects as cairn does (static
    keys here), the files are that client's, whose reads of one file run
    at once; a pickled filesystem (as Ray ships it) builds its own."""
    import pickle

    options, path, size, metadata = garage_file
    filesystem = cairn.build_checkpoint_filesystem(f"s3://{path}", options)
    # The handler's file as pyarrow gets it (pyarrow wraps every file its
    # filesystem returns in a plain NativeFile).
    with filesystem.handler.open_input_file(path) as f:
        assert not isinstance(f, pa.PythonFile), type(f)
        assert f.size() == size
        assert f.read_at(4, size - 4) == b"PAR1"
    shipped = pickle.loads(pickle.dumps(filesystem))
    table = ds.dataset(path, filesystem=shipped, format="parquet").to_table(columns=["uid"])
    assert table.column("uid").to_pylist() == list(range(ROWS))
    with pytest.raises(FileNotFoundError, match="s3://"):
        filesystem.open_input_file(path + ".missing")
    with pytest.raises(IsADirectoryError, match="s3://"):
        filesystem.open_input_file(path.rsplit("/", 1)[0])


def test_with_a_proxy_or_switched_off_the_files_are_cairns(monkeypatch, garage_file):
    """With a proxy in the environment (which cairn's client honours and
    pyarrow's would not), or CAIRN_PYARROW_S3=0, the file is cairn's. (A
    credential chain is too: s3_read_settings is None without static keys,
    a cairn-fs unit test.)"""
    options, path, size, _ = garage_file
    filesystem = cairn.build_checkpoint_filesystem(f"s3://{path}", options)
    for name, value in (("CAIRN_PYARROW_S3", "0"), ("https_proxy", "http://127.0.0.1:9")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            m.setenv("NO_PROXY", "127.0.0.1,localhost")
            fresh_fs = cairn.build_checkpoint_filesystem(f"s3://{path}", options)
            with fresh_fs.handler.open_input_file(path) as f:
                assert isinstance(f, pa.PythonFile), name
                assert f.read_at(4, size - 4) == b"PAR1"
    with filesystem.handler.open_input_file(path) as f:
        assert not isinstance(f, pa.PythonFile)


def test_a_file_pyarrows_client_cannot_open_is_read_by_cairn(monkeypatch, garage_file):
    """pyarrow's client refused (a wrong secret here, standing for any way
    it does not reach the store as cairn does): the file is cairn's, read
    whole and right, and the handler stops asking pyarrow's client."""
    import cairn._arrow_fs as arrow_fs

    options, path, size, _ = garage_file
    refused = arrow_fs._new_pyarrow_s3
    monkeypatch.setattr(
        arrow_fs,
        "pyarrow_s3",
        lambda settings: refused(dict(settings, secret="not-the-secret")),
    )
    filesystem = cairn.build_checkpoint_filesystem(f"s3://{path}", options)
    with filesystem.handler.open_input_file(path) as f:
        assert isinstance(f, pa.PythonFile)
        assert f.read_at(4, size - 4) == b"PAR1"
    assert filesystem.handler._pyarrow_s3() is None
    table = ds.dataset(path, filesystem=filesystem, format="parquet").to_table(columns=["uid"])
    assert table.column("uid").to_pylist() == list(range(ROWS))


def test_a_read_longer_than_a_part_is_fetched_in_parallel_pieces(monkeypatch, garage_file):
    monkeypatch.setenv("CAIRN_PYARROW_S3", "0")
    options, path, size, _ = garage_file
    part = 5 << 20
    # A file of three parts and a bit: one read_at of all of it.
    big = path.replace("data.parquet", "big.bin")
    payload = os.urandom(3 * part + 12345)
    CairnFileSystem("s3", **options).pipe_file(big, payload)
    with CountingProxy(options["endpoint_url"]) as proxy:
        through = dict(options, endpoint_url=proxy.endpoint, part_size=part)
        filesystem = cairn.build_checkpoint_filesystem(f"s3://{big}", through)
        with filesystem.open_input_file(big) as f:
            proxy.reset()
            assert f.read_at(len(payload) - 100, 50) == payload[50:-50]
    assert proxy.get_bytes == len(payload) - 100
    assert proxy.requests["GET"] == 4 and proxy.requests["HEAD"] == 0, dict(proxy.requests)


def test_a_whole_large_file_is_fetched_in_parallel_pieces_without_a_head(garage_file):
    options, path, _, _ = garage_file
    part = 5 << 20
    big = path.replace("data.parquet", "whole.bin")
    payload = os.urandom(3 * part + 12345)
    CairnFileSystem("s3", **options).pipe_file(big, payload)
    with CountingProxy(options["endpoint_url"]) as proxy:
        fs = CairnFileSystem("s3", **dict(options, endpoint_url=proxy.endpoint, part_size=part))
        proxy.reset()
        assert fs.cat_file(big) == payload
        # The last part (which names the size), then the other three and
        # a bit as three ranges; each byte once.
        assert proxy.get_bytes == len(payload), proxy.get_log
        assert proxy.requests["GET"] == 4 and proxy.requests["HEAD"] == 0, dict(proxy.requests)
        proxy.reset()
        small = big + ".small"
        fs.pipe_file(small, b"abc")
        proxy.reset()
        assert fs.cat_file(small) == b"abc"
        assert proxy.requests["GET"] == 1 and proxy.requests["HEAD"] == 0, dict(proxy.requests)


@pytest.fixture
def fsspec_proxied(garage_file):
    """(CairnFileSystem through a counting proxy, proxy, path, size, the file's bytes)."""
    options, path, size, _ = garage_file
    whole = CairnFileSystem("s3", **options).cat_file(path)
    with CountingProxy(options["endpoint_url"]) as proxy:
        through = dict(options, endpoint_url=proxy.endpoint)
        yield CairnFileSystem("s3", **through), proxy, path, size, whole


def test_an_fsspec_file_reads_ahead_in_order_and_exactly_out_of_order(fsspec_proxied):
    fs, proxy, path, size, whole = fsspec_proxied
    block = 1 << 20
    with fs.open(path, "rb", block_size=block) as f:
        proxy.reset()
        # Random access: a footer, then one chunk in the middle.
        f.seek(size - 8)
        assert f.read(8) == whole[-8:]
        f.seek(size // 2)
        assert f.read(1000) == whole[size // 2 : size // 2 + 1000]
        assert proxy.get_bytes == 1008, dict(proxy.requests)
        # Reads in order: the first after a jump is exact, the one that
        # follows on from it reads a block ahead, the rest are served from it.
        proxy.reset()
        f.seek(0)
        assert b"".join(f.read(4096) for _ in range(16)) == whole[: 16 * 4096]
        assert proxy.requests["GET"] == 2 and proxy.get_bytes == 2 * 4096 + block
        # A read inside bytes already held fetches nothing.
        f.seek(5000)
        assert f.read(100) == whole[5000:5100]
        assert proxy.requests["GET"] == 2
    assert proxy.requests["HEAD"] == 0, dict(proxy.requests)


def test_cat_ranges_fetches_each_range_exactly(fsspec_proxied):
    fs, proxy, path, size, whole = fsspec_proxied
    paths = [path] * 5
    starts = [0, size - 8, size // 3, size - 10, -4]
    ends = [100, None, size // 3 + 5000, size + 50, None]
    proxy.reset()
    got = fs.cat_ranges(paths, starts, ends)
    assert got == [
        whole[:100],
        whole[-8:],
        whole[size // 3 : size // 3 + 5000],
        whole[-10:],
        b"PAR1",
    ]
    # Each range once, nothing read ahead; one size lookup for the file
    # and one for the negative start.
    assert proxy.get_bytes == 100 + 8 + 5000 + 10 + 4, dict(proxy.requests)
    assert proxy.requests["GET"] == 5 and proxy.requests["HEAD"] == 2, dict(proxy.requests)
    missing = path + ".missing"
    got = fs.cat_ranges([path, missing], [0, 0], [4, 10])
    assert got[0] == b"PAR1" and isinstance(got[1], FileNotFoundError), got
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([missing], [0], [10], on_error="raise")


def test_a_move_of_a_file_is_a_copy_and_a_delete(garage_file):
    """pyarrow's ``move`` of a file on an object store (Ray's commit of a
    checkpoint unit) sends OpenDAL's checked copy (a HEAD for the source's
    size and ETag, the copy made on that ETag) and a delete: no directory
    checks or listings first (fsspec's ``mv`` sent ten requests).
    A directory still moves whole, and a missing source is an error that
    changes nothing."""
    options, path, _, _ = garage_file
    root = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    with CountingProxy(options["endpoint_url"]) as proxy:
        through = dict(options, endpoint_url=proxy.endpoint)
        filesystem = cairn.build_checkpoint_filesystem(f"s3://{root}", through)
        with filesystem.open_output_stream(f"{root}/u1.pending.parquet") as f:
            f.write(b"ids")
        proxy.reset()
        filesystem.move(f"{root}/u1.pending.parquet", f"{root}/u1.parquet")
        sent = [(method, copies) for method, _, copies in proxy.log]
        assert sent == [("HEAD", False), ("PUT", True), ("DELETE", False)], proxy.log
        with filesystem.open_input_stream(f"{root}/u1.parquet") as f:
            assert f.read() == b"ids"
        gone = filesystem.get_file_info(f"{root}/u1.pending.parquet")
        assert gone.type == pa.fs.FileType.NotFound

        for name in ("a", "b/c"):
            with filesystem.open_output_stream(f"{root}/dir/{name}") as f:
                f.write(name.encode())
        filesystem.move(f"{root}/dir", f"{root}/moved")
        moved = filesystem.get_file_info(pa.fs.FileSelector(f"{root}/moved", recursive=True))
        assert sorted(i.path for i in moved if i.type == pa.fs.FileType.File) == [
            f"{root}/moved/a",
            f"{root}/moved/b/c",
        ]
        before = sorted(
            i.path for i in filesystem.get_file_info(pa.fs.FileSelector(root, recursive=True))
        )
        with pytest.raises(FileNotFoundError):
            filesystem.move(f"{root}/missing", f"{root}/u1.parquet")
        after = sorted(
            i.path for i in filesystem.get_file_info(pa.fs.FileSelector(root, recursive=True))
        )
        assert after == before


def test_a_local_file_is_pyarrows_own(tmp_path):
    table = pa.table({"uid": pa.array(range(1000), pa.int64())})
    path = str(tmp_path / "data.parquet")
    filesystem = cairn.build_checkpoint_filesystem(f"file://{tmp_path}")
    pq.write_table(table, path, filesystem=filesystem, row_group_size=100)
    with filesystem.handler.open_input_file(path) as f:
        # Not a Python file, whose reads pyarrow takes one at a time.
        assert not isinstance(f, pa.PythonFile), type(f)
        assert f.size() == os.path.getsize(path)
    read = ds.dataset(path, filesystem=filesystem, format="parquet").to_table()
    assert read.equals(table)
    with pytest.raises(FileNotFoundError):
        filesystem.open_input_file(path + ".missing")
    with pytest.raises(OSError):
        filesystem.open_input_file(str(tmp_path))


EXIT_SCRIPT = """
import json, os, sys
import pyarrow.dataset as ds
import cairn
options = json.loads(os.environ["READ_AND_EXIT_OPTIONS"])
filesystem = cairn.build_checkpoint_filesystem("s3://", options)
for columns in (None, ["a"], ["a"]):
    ds.dataset(sys.argv[1], filesystem=filesystem, format="parquet").to_table(columns=columns)
"""


def test_a_script_that_ends_right_after_a_read_exits_cleanly(tmp_path):
    """pyarrow releases a Python file's buffers on its I/O threads, possibly
    after the script ends; released during Python's shutdown, that aborts
    the process (exit 134, apache/arrow#39162: 3 runs in 4 here before
    cairn waited for its reads at exit). Five runs, each must exit 0."""
    options = garage_options()
    base = f"{fresh(os.environ['CAIRN_TEST_GARAGE_BUCKET'])}/exit"
    filesystem = cairn.build_checkpoint_filesystem(f"s3://{base}", options)
    rows = 400_000
    for n in range(4):
        table = pa.table(
            {
                "uid": pa.array(range(n * rows, (n + 1) * rows), pa.int64()),
                "a": pa.array(range(rows), pa.float64()),
                "noise": pa.array([os.urandom(16) for _ in range(rows)], pa.binary(16)),
            }
        )
        pq.write_table(
            table, f"{base}/part-{n}.parquet", filesystem=filesystem, row_group_size=rows // 8
        )
    script = tmp_path / "read_and_exit.py"
    script.write_text(EXIT_SCRIPT)
    # cairn's own file: pyarrow's S3 file holds no Python buffers.
    env = dict(os.environ, READ_AND_EXIT_OPTIONS=json.dumps(options), CAIRN_PYARROW_S3="0")
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, str(script), base],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
