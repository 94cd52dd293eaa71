"""A Ray Data job as users write it (read_parquet -> map_batches ->
write_parquet with job-level checkpointing), run as its own driver process
by test_ray.py so the test can kill it with SIGKILL. One JSON argument:

    input, output, checkpoint   URLs (input: a directory, or a list of files)
    reader                      "ray" (ray.data.read_parquet, the default) or "cairn"
                                (cairn.ray.read_parquet, which skips committed row groups)
    read_tasks                  optional: the read's override_num_blocks
    storage_options             s3 options (flat)
    id_column                   "uid" or "row_hash" (read with include_row_hash)
    manager                     "cairn" (cairn.ray.checkpoint_config), "cairn-by-hand"
                                (Ray's CheckpointConfig with cairn's manager, filter and
                                filesystem, built by hand) or "ray" (Ray's own manager and
                                filter over cairn's filesystem)
    sleep                       seconds per batch in the transform (so a kill lands midway)
    delete_checkpoint_on_success
    sink                        "parquet" (default), "json", "csv" or "numpy" (the uid column)
    bare_output                 give the output as `bucket/path` (pyarrow's form, no scheme)
    cluster                     run on a local multi-node cluster (ray.cluster_utils.Cluster:
                                a head with no CPUs, two worker nodes of one CPU) started
                                by this driver, instead of a single node
    remove_node_after_units     with cluster: once this many units are committed, remove a
                                worker node (its raylet and workers killed, as a preempted
                                machine) and add a new one; prints "NODE REMOVED" and
    replaced_flag               a local file it then writes the committed count to
    max_filter_memory           cairn.ray.checkpoint_config's (bytes; shards the set when
                                its ID files are larger)
    kill_shard_after_units      once this many units are committed, SIGKILL one shard
                                actor's process (prints "SHARD KILLED")
    partition_cols              with the parquet sink: the transform adds `source` (one of
                                PARTITION_SOURCES by uid % 4) and `write_parquet` partitions
                                by these columns (hive-style directories)
    existing_output             cairn.ray.checkpoint_config's ("skip" or "append")
    exact_ids                   cairn.ray.checkpoint_config's (IDs' bytes, not fingerprints)
    mode                        the file sink's save mode (Ray's: "append", "overwrite", ...)
    die_after_done              once the write has returned, the driver dies at once (exit
                                137, no exit handlers run), as one killed then
    model_pool                  the transform runs as a model does: a class on an actor pool
                                of `size` actors, each asking `num_cpus` (Ray's default: 1),
                                `num_gpus` and custom `resources`, batches of `batch_size`
                                rows (Ray's map_batches args; Ray wants one with GPUs)
    node                        the single node's resources: `num_cpus` (default 2),
                                `num_gpus`, custom `resources`
    ray_address, worker_env     join this running Ray instance (the tests' shared one) and
                                give its workers these environment variables, instead of
                                starting a local instance
    retried_map_errors          Ray Data's DataContext.retried_map_errors (true: a map
                                task's chain that raises runs again inside its attempt, up
                                to max_map_retries, set to 3)
    explode                     a 1:N job instead of the transform: each input row becomes
                                `fanout[uid % len(fanout)]` shots (uid, video "v<uid>",
                                shot_idx, n_shots), then cairn.ray.skip_committed, then the expensive
                                stage (`pool`: "tasks" or "actors"; batches of `batch_size`
                                rows, `sleep` each), which writes the keys of each call to a
                                file of its own under `calls_dir`/<`run`>/; blocks of at most
                                `block_bytes` (so one video's shots span several units);
                                each explode call makes a file under `calls_dir`/explode-<run>/;
                                with `lineage`, source_column="uid" (the id_column must be
                                ["uid", "shot_idx"]) and
                                fan_out_column="n_shots", and a video with no shots is one
                                row of shot_idx -1 and n_shots 0
    drop_by_attempt             the transform keeps a row by its uid and the task's attempt
                                (uid + attempt) % 3 != 0: a retried task makes other rows,
                                as a transform that is not deterministic does

The sink "delta" appends to the Delta table at `output` through
cairn.ray.DeltaDatasink (`delta_options`: deltalake's storage options;
`write_concurrency`: write tasks at once; `commit_interval`,
`max_units_per_commit`: its group commits); "iceberg" to the existing
Iceberg table `iceberg_table` of the catalog `iceberg_catalog` (pyiceberg's
load_catalog arguments) through cairn.ray.IcebergDatasink (`commit_interval`,
`max_units_per_commit`: its group commits); "lance" to the
Lance dataset at `output` through cairn.ray.LanceDatasink (`lance_options`:
Lance's storage options; `commit_interval`, `max_units_per_commit` too). Paths without a
scheme are on local disk (input, output and checkpoint alike).
"""

import json
import logging
import os
import signal
import sys
import threading
import time

import ray
from ray.data import DataContext
from ray.data.checkpoint import CheckpointConfig

import cairn
import cairn.ray
from kit import shard_processes


# Partition values that need escaping in a directory name ('/', '=', '%',
# a space, non-ASCII) beside a plain one.
PARTITION_SOURCES = ["web", "a/b=c", "100%", "é x"]


def start_cluster():
    """A head with no CPUs and two worker nodes of one CPU each: every task
    and actor runs on a worker node."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster, workers


def replace_a_node_when(cluster, worker, committed, units, flag):
    """Removes `worker` once `committed()` reaches `units`, then adds a
    new node: what a preempted machine and its replacement do to a job.
    Then writes the count at the removal to the file `flag`."""

    def watch():
        while committed() < units:
            time.sleep(0.2)
        cluster.remove_node(worker, allow_graceful=False)
        at = committed()
        print(f"NODE REMOVED after {at} committed units", flush=True)
        cluster.add_node(num_cpus=1, wait=False)
        print("NODE ADDED", flush=True)
        with open(flag, "w") as f:
            f.write(str(at))

    threading.Thread(target=watch, daemon=True).start()


def kill_a_shard_when(committed, units):
    """SIGKILLs one shard actor's process once `committed()` reaches `units`."""

    def watch():
        while committed() < units or not shard_processes():
            time.sleep(0.2)
        pid = shard_processes()[0]
        os.kill(pid, signal.SIGKILL)
        print(f"SHARD KILLED (pid {pid}) after {committed()} committed units", flush=True)

    threading.Thread(target=watch, daemon=True).start()


def explode_then_skip(ds, explode, pause):
    """The 1:N job of the `explode` spec (see the module's doc)."""
    import uuid

    fanout = explode["fanout"]
    calls = os.path.join(explode["calls_dir"], str(explode["run"]))
    DataContext.get_current().target_max_block_size = explode["block_bytes"]

    explodes = os.path.join(explode["calls_dir"], f"explode-{explode['run']}")
    lineage = explode.get("lineage", False)

    def shots(row):
        n = fanout[row["uid"] % len(fanout)]
        video = f"v{row['uid']:06}"
        os.makedirs(explodes, exist_ok=True)
        with open(os.path.join(explodes, f"{video}-{uuid.uuid4().hex}"), "w"):
            pass
        uid = row["uid"]
        if n == 0 and lineage:
            # The row that records a video with no shots (not written).
            return [{"uid": uid, "video": video, "shot_idx": -1, "n_shots": 0}]
        return [{"uid": uid, "video": video, "shot_idx": i, "n_shots": n} for i in range(n)]

    def expensive(batch):
        time.sleep(pause)
        os.makedirs(calls, exist_ok=True)
        keys = [
            f"{v} {i}"
            for v, i, n in zip(batch["video"], batch["shot_idx"], batch["n_shots"])
            if n > 0
        ]
        with open(os.path.join(calls, uuid.uuid4().hex), "w") as f:
            f.write("\n".join(keys))
        batch["caption"] = [f"{v} shot {i}" for v, i in zip(batch["video"], batch["shot_idx"])]
        return batch

    class Captioner:
        def __call__(self, batch):
            return expensive(batch)

    ds = cairn.ray.skip_committed(ds.flat_map(shots))
    if explode["pool"] == "actors":
        return ds.map_batches(
            Captioner,
            batch_format="numpy",
            batch_size=explode["batch_size"],
            concurrency=2,
            num_cpus=0.25,
        )
    return ds.map_batches(expensive, batch_format="numpy", batch_size=explode["batch_size"])


def main() -> None:
    spec = json.loads(sys.argv[1])
    # What cairn's manager settled and loaded, in the output a failing test shows.
    cairn_log = logging.getLogger("cairn")
    cairn_log.setLevel(logging.INFO)
    cairn_log.addHandler(logging.StreamHandler(sys.stdout))
    options = spec["storage_options"]
    if spec.get("cluster"):
        cluster, workers = start_cluster()
    elif spec.get("ray_address"):
        # The tests' shared local instance: its workers get the variables
        # the test gave this driver (failpoints among them).
        ray.init(
            address=spec["ray_address"],
            log_to_driver=False,
            runtime_env={"env_vars": spec["worker_env"]},
        )
    else:
        node = {"num_cpus": 2, **spec.get("node", {})}
        ray.init(address="local", include_dashboard=False, log_to_driver=False, **node)
    inputs = spec["input"]
    data_fs = cairn.build_checkpoint_filesystem(spec["output"], options)
    keep = {"delete_checkpoint_on_success": spec.get("delete_checkpoint_on_success", True)}
    if "max_filter_memory" in spec:
        keep["max_filter_memory"] = spec["max_filter_memory"]
    if "existing_output" in spec:
        keep["existing_output"] = spec["existing_output"]
    if "exact_ids" in spec:
        keep["exact_ids"] = spec["exact_ids"]
    if spec.get("explode", {}).get("lineage"):
        # The source column must be in the rows the read gives.
        keep["source_column"] = "uid"
        keep["fan_out_column"] = "n_shots"
    if spec["manager"] == "cairn":
        config = cairn.ray.checkpoint_config(spec["id_column"], spec["checkpoint"], options, **keep)
    elif spec["manager"] == "cairn-by-hand":
        # Ray's CheckpointConfig with cairn's classes, built by hand: no
        # directory made for it (checkpoint_config makes one).
        config = CheckpointConfig(
            id_column=spec["id_column"],
            checkpoint_path=spec["checkpoint"],
            override_filesystem=cairn.build_checkpoint_filesystem(spec["checkpoint"], options),
            checkpoint_manager_cls=cairn.ray.CheckpointManager,
            checkpoint_filter_cls=cairn.ray.CheckpointFilter,
            **keep,
        )
    else:
        config = CheckpointConfig(
            id_column=spec["id_column"],
            checkpoint_path=spec["checkpoint"],
            override_filesystem=cairn.build_checkpoint_filesystem(spec["checkpoint"], options),
            **keep,
        )
    DataContext.get_current().checkpoint_config = config
    if "retried_map_errors" in spec:
        DataContext.get_current().retried_map_errors = spec["retried_map_errors"]
        DataContext.get_current().max_map_retries = 3
    # The checkpoint preset: no listing cache, each count is fresh.
    if "://" in spec["checkpoint"]:
        checkpoint_fs = cairn.CairnFileSystem("s3", checkpoint=True, **options)
        checkpoint_dir = spec["checkpoint"].split("://", 1)[1]
    else:
        checkpoint_fs = cairn.CairnFileSystem("file", checkpoint=True)
        checkpoint_dir = spec["checkpoint"]

    def committed():
        try:
            names = checkpoint_fs.ls(checkpoint_dir, detail=False)
        except FileNotFoundError:
            return 0
        return sum(1 for n in names if n.endswith(".parquet") and ".pending." not in n)

    if spec.get("kill_shard_after_units"):
        kill_a_shard_when(committed, spec["kill_shard_after_units"])
    if spec.get("remove_node_after_units"):
        replace_a_node_when(
            cluster,
            workers[0],
            committed,
            spec["remove_node_after_units"],
            spec["replaced_flag"],
        )
    read = cairn.ray.read_parquet if spec.get("reader") == "cairn" else ray.data.read_parquet
    # A read task a file when asked (cairn's reader does not take Ray's
    # Parquet bin-packing setting).
    read_tasks = {"override_num_blocks": spec["read_tasks"]} if spec.get("read_tasks") else {}
    ds = read(
        inputs,
        filesystem=data_fs,
        include_row_hash=spec["id_column"] == "row_hash",
        **read_tasks,
    )
    pause = float(spec.get("sleep", 0))

    partition_cols = spec.get("partition_cols")

    drop_by_attempt = spec.get("drop_by_attempt", False)

    def transform(batch):
        time.sleep(pause)
        if drop_by_attempt:
            attempt = (
                ray._private.worker.global_worker.core_worker.get_current_task_attempt_number()
            )
            keep = (batch["uid"] + attempt) % 3 != 0
            batch = {k: v[keep] for k, v in batch.items()}
        batch["text"] = [t.upper() for t in batch["text"]]
        if partition_cols:
            batch["source"] = [PARTITION_SOURCES[u % len(PARTITION_SOURCES)] for u in batch["uid"]]
        return batch

    model = spec.get("model_pool")
    explode = spec.get("explode")
    if explode is not None:
        ds = explode_then_skip(ds, explode, pause)
    elif model is None:
        ds = ds.map_batches(transform, batch_format="numpy", batch_size=None)
    else:

        class Model:
            """A model's shape: loaded once per actor, called per batch."""

            def __call__(self, batch):
                return transform(batch)

        asks = {k: model[k] for k in ("num_cpus", "num_gpus", "resources") if k in model}
        ds = ds.map_batches(
            Model,
            batch_format="numpy",
            batch_size=model.get("batch_size"),
            concurrency=model["size"],
            **asks,
        )
    output = spec["output"]
    if spec.get("bare_output"):
        output = output.split("://", 1)[1]
    sink = spec.get("sink", "parquet")
    # A table on a store is seen by Ray and the manager through cairn.
    table_fs = data_fs if "://" in output else None
    if sink == "iceberg":
        ds.write_datasink(
            cairn.ray.IcebergDatasink(
                spec["iceberg_table"],
                spec["iceberg_catalog"],
                filesystem=table_fs,
                **{k: spec[k] for k in ("commit_interval", "max_units_per_commit") if k in spec},
            ),
            concurrency=spec.get("write_concurrency"),
        )
    elif sink == "lance":
        ds.write_datasink(
            cairn.ray.LanceDatasink(
                output,
                storage_options=spec.get("lance_options"),
                filesystem=table_fs,
                **{k: spec[k] for k in ("commit_interval", "max_units_per_commit") if k in spec},
            ),
            concurrency=spec.get("write_concurrency"),
        )
    elif sink == "delta":
        ds.write_datasink(
            cairn.ray.DeltaDatasink(
                output,
                storage_options=spec.get("delta_options"),
                filesystem=table_fs,
                **{k: spec[k] for k in ("commit_interval", "max_units_per_commit") if k in spec},
            ),
            concurrency=spec.get("write_concurrency"),
        )
    elif sink == "numpy":
        ds.write_numpy(output, column="uid", filesystem=data_fs)
    elif partition_cols:
        ds.write_parquet(output, filesystem=data_fs, partition_cols=partition_cols)
    else:
        write_mode = {"mode": spec["mode"]} if "mode" in spec else {}
        getattr(ds, f"write_{sink}")(output, filesystem=data_fs, **write_mode)
    print("JOB DONE", flush=True)
    after = spec.get("after_done")
    if after == "raise":
        # The driver's next step fails: the process ends with an error.
        raise RuntimeError("the step after the job failed")
    if after == "wait":
        # The driver's next step takes a while: the harness sends SIGTERM.
        print("NEXT STEP", flush=True)
        time.sleep(120)
    if spec.get("die_after_done"):
        # Killed once the job succeeded, before the driver exits.
        os._exit(137)
    if spec.get("cluster"):
        # The cluster's exit handlers trip over a node removed or still
        # starting; the test kills what this driver started. cairn's own
        # exit handler is run here: the completion marker removed.
        cairn._ray_manager._remove_markers()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
