"""The package beyond fsspec's suite: pyarrow through
build_checkpoint_filesystem, pickling into another process, fsspec's entry
point for cos, and bad input as the Python exceptions callers catch."""

import os
import pickle
import subprocess
import sys

import pytest

import cairn
from cairn.fsspec import CairnFileSystem
from conftest import fresh, garage_options


def test_pyarrow_dataset_through_build_checkpoint_filesystem_on_garage():
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    pafs = pytest.importorskip("pyarrow.fs")
    options = garage_options()
    root = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    fs = cairn.build_checkpoint_filesystem(f"s3://{root}", {"s3": options})
    assert isinstance(fs, pafs.FileSystem)
    table = pa.table({"uid": list(range(1000)), "part": [i % 3 for i in range(1000)]})
    ds.write_dataset(
        table,
        root,
        format="parquet",
        filesystem=fs,
        partitioning=["part"],
        partitioning_flavor="hive",
    )
    back = ds.dataset(root, format="parquet", filesystem=fs, partitioning="hive").to_table()
    assert sorted(back.column("uid").to_pylist()) == list(range(1000))
    # Flat options (the protocol's own) work too.
    flat = cairn.build_checkpoint_filesystem(f"s3://{root}", options)
    assert len(flat.get_file_info(pafs.FileSelector(root, recursive=True))) >= 3


def test_a_filesystem_pickled_in_one_process_works_in_another(tmp_path):
    fs = CairnFileSystem("file")
    target = tmp_path / "a.txt"
    fs.pipe_file(str(target), b"from the parent")
    blob = pickle.dumps(fs)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pickle, sys; fs = pickle.loads(sys.stdin.buffer.read()); "
            f"sys.stdout.buffer.write(fs.cat_file({str(target)!r}))",
        ],
        input=blob,
        capture_output=True,
        check=True,
    )
    assert child.stdout == b"from the parent"


def test_fsspec_routes_cos_to_cairn_through_its_entry_point():
    import fsspec

    cls = fsspec.get_filesystem_class("cos")
    assert issubclass(cls, CairnFileSystem)
    with pytest.raises(ValueError, match="cos needs a region or an endpoint"):
        fsspec.filesystem("cos", key="k", secret="s")


def test_bad_input_is_a_clear_python_exception():
    with pytest.raises(ValueError, match="unknown option s3.bogus"):
        CairnFileSystem("s3", bogus=1)
    with pytest.raises(ValueError, match="nosuch"):
        CairnFileSystem("nosuch")
    with pytest.raises(ValueError, match="needs a protocol"):
        CairnFileSystem()
    with pytest.raises(FileNotFoundError, match="memory:///nope"):
        CairnFileSystem("memory").cat_file("/nope")


def test_wrong_secret_and_missing_bucket_on_garage():
    options = garage_options()
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    wrong = CairnFileSystem("s3", **dict(options, secret="not-the-secret"))
    with pytest.raises(PermissionError) as caught:
        wrong.ls(bucket)
    assert "not-the-secret" not in str(caught.value)
    good = CairnFileSystem("s3", **options)
    with pytest.raises(FileNotFoundError, match="no-such-bucket-cairn"):
        good.ls("no-such-bucket-cairn/x")


def test_s3fs_keyword_arguments_are_accepted():
    fs = CairnFileSystem(
        "s3",
        key="k",
        secret="s",
        endpoint_url="http://127.0.0.1:1",
        use_ssl=True,
        requester_pays=True,
        default_block_size=2**20,
        default_fill_cache=True,
        default_cache_type="readahead",
        version_aware=False,
        s3_additional_kwargs={"ServerSideEncryption": "AES256"},
        session=object(),
        cache_regions=False,
        asynchronous=False,
        loop=object(),
        max_concurrency=10,
        fixed_upload_size=False,
        local_expiry_check=False,
        skip_instance_cache=True,
    )
    assert fs.blocksize == 2**20
    with pytest.raises(ValueError, match="version_aware"):
        CairnFileSystem("s3", version_aware=True)
