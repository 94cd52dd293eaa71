"""The pyarrow filesystem cairn hands out (``build_checkpoint_filesystem``)
reads what pyarrow asks for and no more: bytes on the wire counted by a
proxy in front of Garage, against the byte ranges the Parquet metadata
says a reader needs. A read-ahead of whole blocks (fsspec's 5 MiB) would
fetch the whole file for one column chunk."""

import os

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import fresh, garage_options
from counting_proxy import FOOTER_READ, CountingProxy, needed_bytes

import cairn

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


@pytest.fixture
def proxied(garage_file):
    """(pyarrow filesystem through a counting proxy, proxy, path, size, metadata)."""
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
