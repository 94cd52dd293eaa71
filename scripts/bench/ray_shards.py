"""cairn.ray's committed set on a local multi-node Ray cluster: sharded over
shard actors (max_filter_memory=BUDGET) against one set on every filter
node (max_filter_memory=None), same checkpoint, same run.

    ray_shards.py make N FILES ROOT          N IDs (KIND in the environment: int64-random,
                                             int64-sequential, string32) committed in FILES
                                             Ray-layout ID files (ray_resume.py's make)
    ray_shards.py measure IMPL N BUDGET ROOT one JSON line; IMPL is sharded or whole

`measure` starts a ray.cluster_utils.Cluster (a head without CPUs and two
worker nodes of one CPU each, all on this machine) and reports:
  load_s            the manager's load_checkpoint on the driver (wall clock);
  driver_peak_mib   the driver's peak resident set by then;
  shards, shard_set_mib, shard_growth_mib   per shard: its set, and its
                    actor's peak memory growth since it started;
  filter_growth_mib the filter actor's memory growth (building the filter,
                    then filtering): the whole set's pages for `whole`;
  filter_rows_per_s SAMPLE input rows, half of them committed, filtered in
                    blocks of 100k by one filter actor on a worker node;
  moved_bytes_per_row  keys sent to the shards and answers received, per
                    filtered row (as the filter counts them, before Ray's framing).
"""

import json
import logging
import os
import resource
import sys
import time

import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))
import ray_resume  # noqa: E402

BLOCK = 100_000
SAMPLE = 10_000_000
#: ray_resume.py's kinds: int64-random (the default), int64-sequential, string32.
KIND = os.environ.get("KIND", "int64-random")


class ShardLog(logging.Handler):
    def __init__(self):
        super().__init__()
        self.args = None

    def emit(self, record):
        if "shards of at most" in record.msg:
            self.args = record.args


def measure(impl, n, budget, root):
    import ray
    from ray.cluster_utils import Cluster
    from ray.data.context import DataContext

    import cairn.ray

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    shard_log = ShardLog()
    logging.getLogger("cairn").addHandler(shard_log)
    logging.getLogger("cairn").setLevel(logging.INFO)

    @ray.remote(num_cpus=1)
    class FilterActor:
        def growth(self):
            with open("/proc/self/status") as f:
                fields = dict(line.split(":", 1) for line in f)
            return int(fields["VmHWM"].split()[0]) * 1024

        def run(self, config, refs):
            (ref,) = refs
            before = self.growth()
            flt = cairn.ray.CheckpointFilter(config, ref)
            first = max(0, n - SAMPLE // 2)
            kept, spent = 0, 0.0
            for start in range(first, first + SAMPLE, BLOCK):
                block = pa.table({"id": ray_resume.ids_of(KIND, start, start + BLOCK)})
                t = time.perf_counter()
                kept += flt.filter_rows_for_block(block).num_rows
                spent += time.perf_counter() - t
            moved = getattr(getattr(flt, "_sharded", None), "moved_bytes", 0)
            return kept, spent, self.growth() - before, moved

    ckpt = f"{os.path.abspath(root)}/ckpt"
    config = cairn.ray.checkpoint_config(
        "id",
        ckpt,
        max_filter_memory=budget if impl == "sharded" else None,
        delete_checkpoint_on_success=False,
    )
    manager = cairn.ray.CheckpointManager(
        checkpoint_config=config, data_context=DataContext.get_current()
    )
    started = time.perf_counter()
    ref, _ = manager.load_checkpoint(f"{os.path.abspath(root)}/out", None)
    load = time.perf_counter() - started
    driver_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kept, spent, growth, moved = ray.get(FilterActor.remote().run.remote(config, [ref]))
    result = {
        "impl": impl,
        "ids": KIND,
        "n": n,
        "budget_mib": round(budget / 2**20),
        "load_s": round(load, 1),
        "driver_peak_mib": round(driver_peak),
        "filter_growth_mib": round(growth / 2**20),
        "filter_rows_per_s": round(SAMPLE / spent),
        "rows_kept": kept,
    }
    if shard_log.args is not None:
        _, _, shards, _, set_sizes, growths = shard_log.args
        result.update(
            shards=shards,
            shard_set_mib=round(max(set_sizes) / 2**20),
            shard_growth_mib=round(max(growths) / 2**20),
            moved_bytes_per_row=round(moved / SAMPLE, 2),
        )
    return result


def main():
    if sys.argv[1] == "make":
        ray_resume.make(KIND, int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        impl, n, budget, root = (
            sys.argv[2],
            int(sys.argv[3]),
            int(sys.argv[4]),
            sys.argv[5],
        )
        print(json.dumps(measure(impl, n, budget, root)), flush=True)
        os._exit(0)


if __name__ == "__main__":
    main()
