"""cairn.ray on a cluster too small for its filter: actors no node can hold
are refused before anything starts, with the numbers and what to change
(Ray itself would keep them pending for ever), and a shard that cannot be
placed for now fails the job after shard_timeout, naming it. A local Ray
instance of its own whose nodes offer 16 MiB of the memory resource; a
SIGALRM turns a hang into a failure. Runs in the Ray virtualenv
(scripts/test.sh); elsewhere the tests show as skipped."""

import os
import signal

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import cairn.ray  # noqa: E402

MIB = 1 << 20


@pytest.fixture(scope="module")
def small_ray():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _memory=16 * MIB,
    )
    yield
    ray.shutdown()


@pytest.fixture
def bounded():
    """Fails the test, instead of hanging, after 120 s."""

    def fail(*_):
        raise TimeoutError("the job waited for actors that can never start")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def job(root, ids):
    """One input file of `ids` (uid, text); all of them but the last
    thousand committed, in Ray's layout, their data in the output."""
    for d in ("in", "ckpt", "out"):
        os.makedirs(f"{root}/{d}")
    table = pa.table({"uid": pa.array(ids, pa.int64()), "text": [str(u) for u in ids]})
    pq.write_table(table, f"{root}/in/part-0.parquet")
    committed = table.slice(0, len(ids) - 1000)
    pq.write_table(committed.select(["uid"]), f"{root}/ckpt/w_000001.parquet")
    pq.write_table(committed, f"{root}/out/w_000001-0.parquet")


def random_ids(count):
    x = np.arange(count, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return (x >> np.uint64(1)).astype(np.int64)


def run(root, **config):
    context = ray.data.DataContext.get_current()
    actor_memory = config.pop("checkpoint_actor_memory_bytes", None)
    context.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{root}/ckpt", delete_checkpoint_on_success=False, **config
    )
    if actor_memory is not None:
        context.checkpoint_config.checkpoint_actor_memory_bytes = actor_memory
    try:
        ray.data.read_parquet(f"{root}/in").write_parquet(f"{root}/out")
    finally:
        context.checkpoint_config = None


def test_filter_actors_no_node_can_hold_are_refused(small_ray, bounded, tmp_path):
    """Ray's filter actors ask for 1 GiB each by default; the nodes have 16 MiB."""
    job(str(tmp_path), random_ids(20_000))
    with pytest.raises(Exception, match=r"1024 MiB.*16 MiB.*checkpoint_actor_memory_bytes"):
        run(str(tmp_path))


def test_shards_no_cluster_can_hold_are_refused_with_the_numbers(small_ray, bounded, tmp_path):
    """8 MB of committed ID files over a 4 MiB budget: 6 shards of 4 MiB,
    more than the 16 MiB the nodes have."""
    job(str(tmp_path), random_ids(1_000_000))
    with pytest.raises(Exception, match=r"6 shard actors of 4 MiB.*max_filter_memory"):
        run(str(tmp_path), max_filter_memory=4 * MIB, checkpoint_actor_memory_bytes=MIB)


def test_a_shard_that_cannot_be_placed_for_now_fails_after_its_bound(small_ray, bounded, tmp_path):
    """The shards fit the nodes, but something else holds 12 of their 16
    MiB: the shards left pending fail the job after shard_timeout, named."""

    @ray.remote(num_cpus=0)
    class Holder:
        def ready(self):
            return True

    holder = Holder.options(memory=12 * MIB).remote()
    ray.get(holder.ready.remote())
    try:
        job(str(tmp_path), random_ids(200_000))
        with pytest.raises(Exception, match=r"shard \d of the committed set .* did not answer"):
            run(
                str(tmp_path),
                max_filter_memory=MIB + MIB // 2,
                checkpoint_actor_memory_bytes=MIB,
                shard_timeout=5,
            )
    finally:
        ray.kill(holder)
