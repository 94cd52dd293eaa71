"""Writes beyond fsspec's suite: `wb` streams in parts and appears only at
close; a discarded writer, or an exception in its `with` block, leaves
nothing; `pipe` of many files runs concurrently. On local disk and Garage."""

import os

import pytest


BLOCK = 5 * 2**20


def test_a_streaming_write_appears_whole_at_close(target):
    fs, root = target
    path = f"{root}/big.bin"
    chunk = bytes(range(256)) * 4096  # 1 MiB
    with fs.open(path, "wb", block_size=BLOCK) as f:
        for _ in range(12):  # 12 MiB: several parts of 5 MiB
            f.write(chunk)
        assert not fs.exists(path), "visible before close"
    assert fs.info(path)["size"] == 12 * len(chunk)
    assert fs.cat_file(path, 11 * len(chunk), 11 * len(chunk) + 256) == chunk[:256]


def test_a_discarded_or_failed_write_leaves_nothing(target):
    fs, root = target
    f = fs.open(f"{root}/discarded.bin", "wb", block_size=BLOCK)
    f.write(b"x" * (BLOCK + 1))  # one part already uploaded
    f.flush()
    f.discard()
    with pytest.raises(RuntimeError):
        with fs.open(f"{root}/failed.bin", "wb", block_size=BLOCK) as f:
            f.write(b"y" * (BLOCK + 1))
            raise RuntimeError("the transform failed")
    for name in ("discarded.bin", "failed.bin"):
        assert not fs.exists(f"{root}/{name}")
    if fs.protocol == ("file",):
        assert os.listdir(root) == [], "a temporary file was left behind"


def test_pipe_of_many_files(target):
    fs, root = target
    files = {f"{root}/many/{i:04}": f"file {i}".encode() for i in range(300)}
    fs.pipe(files)
    assert fs.cat(list(files)) == files
    with pytest.raises(ValueError):
        fs.pipe(["not", "a", "dict"])
