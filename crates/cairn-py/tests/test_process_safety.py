"""A filesystem used before ``os.fork()`` works in the child at once, on
local disk and Garage: a forked child, and a fork-started pool (what
multiprocessing and PyTorch DataLoader workers do)."""

import multiprocessing
import os

import pytest


def _list_and_write(fs, root, name):
    """What a forked worker does with the parent's filesystem."""
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
    fs.pipe_file(f"{root}/{name}", name.encode())
    return names


def test_a_filesystem_used_before_fork_works_in_the_child(target):
    fs, root = target
    fs.pipe_file(f"{root}/parent", b"p")
    assert fs.cat_file(f"{root}/parent") == b"p", "used (connections open) before the fork"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's exit handlers
        status = 1
        try:
            names = _list_and_write(fs, root, "child")
            os.write(write, ",".join(names).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    # A child that works at once takes well under a second; one stuck on
    # the parent's connections waits for a timeout first.
    waited = _wait(pid, 10)
    seen = os.read(read, 4096).decode()
    os.close(read)
    assert waited == 0, f"the child failed or hung (status {waited})"
    assert seen == "parent"
    assert fs.cat_file(f"{root}/child") == b"child"
    assert fs.cat_file(f"{root}/parent") == b"p", "the parent's filesystem still works"


#: The filesystem a forked pool's workers inherit (not pickled to them).
_INHERITED = {}


def _inherited_list_and_write(root, name):
    return _list_and_write(_INHERITED["fs"], root, name)


def test_a_fork_pool_uses_the_parents_filesystem(target):
    fs, root = target
    fs.pipe_file(f"{root}/seed", b"s")
    _INHERITED["fs"] = fs
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        result = pool.starmap_async(_inherited_list_and_write, [(root, f"w{i}") for i in range(4)])
        listed = result.get(timeout=10)
    assert all("seed" in names for names in listed)
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)) == [
        "seed",
        "w0",
        "w1",
        "w2",
        "w3",
    ]


def _wait(pid, seconds):
    """The child's exit status, or kills it and fails after `seconds`."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish within {seconds} s")
