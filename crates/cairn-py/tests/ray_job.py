"""A Ray Data job as users write it (read_parquet -> map_batches ->
write_parquet with job-level checkpointing), run as its own driver process
by test_ray.py so the test can kill it with SIGKILL. One JSON argument:

    input, output, checkpoint   URLs
    storage_options             s3 options (flat)
    id_column                   "uid" or "row_hash" (read with include_row_hash)
    manager                     "cairn" (cairn.ray.checkpoint_config) or "ray"
                                (Ray's own manager and filter over cairn's filesystem)
    sleep                       seconds per batch in the transform (so a kill lands midway)
    delete_checkpoint_on_success
    sink                        "parquet" (default), "json", "csv" or "numpy" (the uid column)
    bare_output                 give the output as `bucket/path` (pyarrow's form, no scheme)
"""

import json
import sys
import time

import ray
from ray.data import DataContext
from ray.data.checkpoint import CheckpointConfig

import cairn
import cairn.ray


def main() -> None:
    spec = json.loads(sys.argv[1])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    options = spec["storage_options"]
    data_fs = cairn.build_checkpoint_filesystem(spec["input"], options)
    keep = {"delete_checkpoint_on_success": spec.get("delete_checkpoint_on_success", True)}
    if spec["manager"] == "cairn":
        config = cairn.ray.checkpoint_config(spec["id_column"], spec["checkpoint"], options, **keep)
    else:
        config = CheckpointConfig(
            id_column=spec["id_column"],
            checkpoint_path=spec["checkpoint"],
            override_filesystem=cairn.build_checkpoint_filesystem(spec["checkpoint"], options),
            **keep,
        )
    DataContext.get_current().checkpoint_config = config
    ds = ray.data.read_parquet(
        spec["input"],
        filesystem=data_fs,
        include_row_hash=spec["id_column"] == "row_hash",
    )
    pause = float(spec.get("sleep", 0))

    def transform(batch):
        time.sleep(pause)
        batch["text"] = [t.upper() for t in batch["text"]]
        return batch

    ds = ds.map_batches(transform, batch_format="numpy", batch_size=None)
    output = spec["output"]
    if spec.get("bare_output"):
        output = output.split("://", 1)[1]
    sink = spec.get("sink", "parquet")
    if sink == "numpy":
        ds.write_numpy(output, column="uid", filesystem=data_fs)
    else:
        getattr(ds, f"write_{sink}")(output, filesystem=data_fs)
    print("JOB DONE", flush=True)


if __name__ == "__main__":
    main()
