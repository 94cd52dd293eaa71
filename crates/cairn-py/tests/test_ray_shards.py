"""cairn.ray's committed set split over shard actors when its ID files are
larger than max_filter_memory: each shard's set within the budget, the
job's output exactly once (pyarrow alone reads input and output), and a
shard actor SIGKILLed mid-filter rebuilt by Ray from the ID files. A local
Ray instance in the test process; the multi-node version (data and
checkpoint on Garage, a shard killed on a cluster) is in test_ray.py.
Runs in the Ray virtualenv (scripts/test.sh); elsewhere the tests show as
skipped."""

import collections
import logging
import os
import signal
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import cairn.ray  # noqa: E402
from kit import shard_processes  # noqa: E402
from oracle import column_counts  # noqa: E402

FILES = 20
ROWS_PER_FILE = 10_000
COMMITTED_FILES = 15
BUDGET = 512 * 1024


def random_uids(kind="int"):
    x = np.arange(FILES * ROWS_PER_FILE, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    uids = (x >> np.uint64(1)).astype(np.int64)
    if kind == "string":
        return np.char.mod("doc-%d", uids).astype(object)
    return uids


def write_job(root, kind="int"):
    """The input, and the committed units of its first files (their ID files
    in Ray's layout, their data files in the output)."""
    for d in ("in", "ckpt", "out"):
        os.makedirs(f"{root}/{d}")
    uids = random_uids(kind)
    for f in range(FILES):
        part = uids[f * ROWS_PER_FILE : (f + 1) * ROWS_PER_FILE]
        table = pa.table({"uid": part, "text": [str(u) for u in part]})
        pq.write_table(table, f"{root}/in/part-{f:03}.parquet")
        if f < COMMITTED_FILES:
            pq.write_table(table.select(["uid"]), f"{root}/ckpt/w_{f:06}.parquet")
            pq.write_table(table, f"{root}/out/w_{f:06}-0.parquet")
    return uids


def assert_exactly_once(out, uids):
    """Every input uid once in the output, counted by the oracle (pyarrow
    on local disk)."""
    counts = column_counts(pafs.LocalFileSystem(), out, "uid")
    expected = collections.Counter(np.asarray(uids).tolist())
    assert counts == expected, (
        f"{sum(counts.values())} rows written for {len(uids)} input rows; "
        f"{len(set(expected) - set(counts))} uids missing, "
        f"{sum(1 for n in counts.values() if n != 1)} written more than once"
    )


@pytest.mark.parametrize("kind,budget", [("int", BUDGET), ("string", 3 * BUDGET)])
def test_a_set_over_the_budget_is_split_over_shards(
    local_ray, no_checkpoint, tmp_path, caplog, kind, budget
):
    """Integer IDs by their bit pattern, string IDs by their fingerprint
    (their ID files are larger: a larger budget keeps the shard count, and
    the test's worker processes, down)."""
    root = str(tmp_path)
    uids = write_job(root, kind)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{root}/ckpt", max_filter_memory=budget
    )
    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        ray.data.read_parquet(f"{root}/in").write_parquet(f"{root}/out")
    [record] = [r for r in caplog.records if "shards of at most" in r.msg]
    ids, loaded, shards, logged_budget, set_sizes, growth = record.args
    assert ids == loaded == COMMITTED_FILES * ROWS_PER_FILE
    assert shards >= 2 and len(set_sizes) == shards and logged_budget == budget
    assert max(set_sizes) <= budget, set_sizes
    assert_exactly_once(f"{root}/out", uids)


def test_an_unsharded_set_stays_on_the_filter_nodes(local_ray, no_checkpoint, tmp_path, caplog):
    """Under the budget (or with max_filter_memory=None), the set is loaded
    on the driver and shared with the filter actors, as before."""
    root = str(tmp_path)
    uids = write_job(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{root}/ckpt", max_filter_memory=None
    )
    with caplog.at_level(logging.INFO, logger="cairn.ray"):
        ray.data.read_parquet(f"{root}/in").write_parquet(f"{root}/out")
    assert "shards of at most" not in caplog.text
    assert "committed IDs in 15 units loaded" in caplog.text, caplog.text
    assert_exactly_once(f"{root}/out", uids)


class _Loaded(logging.Handler):
    """Set once the manager has loaded the shards."""

    def __init__(self):
        super().__init__()
        self.event = threading.Event()

    def emit(self, record):
        if "shards of at most" in record.msg:
            self.event.set()


def test_a_shard_killed_mid_filter_is_rebuilt(local_ray, no_checkpoint, tmp_path):
    """A shard actor's process SIGKILLed as soon as the shards are loaded,
    when the filter starts asking them: Ray restarts it, it reloads its
    range from the ID files, the filter's calls are retried, and the job
    ends exactly once."""
    root = str(tmp_path)
    uids = write_job(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{root}/ckpt", max_filter_memory=BUDGET
    )
    loaded = _Loaded()
    logging.getLogger("cairn.ray").addHandler(loaded)
    logging.getLogger("cairn.ray").setLevel(logging.INFO)
    killed = {}

    # Shard actors of earlier tests may still be alive: kill one of this job's.
    earlier = set(shard_processes())

    def kill_one_shard_when_loaded():
        if loaded.event.wait(timeout=120):
            killed["pid"] = [p for p in shard_processes() if p not in earlier][0]
            os.kill(killed["pid"], signal.SIGKILL)

    watcher = threading.Thread(target=kill_one_shard_when_loaded, daemon=True)
    watcher.start()
    try:
        ray.data.read_parquet(f"{root}/in").write_parquet(f"{root}/out")
    finally:
        logging.getLogger("cairn.ray").removeHandler(loaded)
    watcher.join(timeout=5)
    assert "pid" in killed, "no shard was killed while the job ran"
    assert_exactly_once(f"{root}/out", uids)
    # Ray restarted it and it reloaded its range (its worker's log says so;
    # the worker's stderr reaches its file in its own time, so a while is
    # given for it on a loaded machine).
    logs = ray._private.worker._global_node.get_logs_dir_path()
    deadline = time.monotonic() + 30
    while True:
        reloaded = []
        for name in os.listdir(logs):
            if name.startswith("worker-") and name.endswith(".err"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    reloaded += [line for line in f if "restarted; reloading its range" in line]
        if reloaded or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(reloaded) == 1, (logs, killed, reloaded)


def test_routing_keys_are_the_sets_keys_for_integers():
    """Rust's routing keys and the NumPy ones the shards use for integers
    agree (an ID's bit pattern as uint64, narrower signed IDs widened, a
    null 0); equal strings route alike."""
    from cairn._native import routing_keys

    from cairn._ray_shards import routed

    for ids in (
        pa.array([-1, 0, 5, None, 2**62], pa.int64()),
        pa.array([-7, 3, None], pa.int32()),
        pa.array([2**64 - 1, 0, None], pa.uint64()),
    ):
        rust = routing_keys(ids).to_numpy(zero_copy_only=False)
        _, ours = routed(ids)
        assert rust.tolist() == ours.tolist(), ids.type
    assert routed(pa.array([-1], pa.int32()))[1].tolist() == [2**64 - 1]
    keys = routing_keys(pa.array(["doc-1", "doc-2", "doc-1", None])).to_numpy(zero_copy_only=False)
    assert keys[0] == keys[2] != keys[1] and keys[3] == 0
