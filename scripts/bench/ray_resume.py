"""Ray Data 2.60 resume: Ray's default checkpoint manager and filter against
cairn.ray's, on the same checkpoint in the same run.

A checkpoint of N committed IDs (100 Ray-layout ID files on local disk, each
with its data file in the output), then for each implementation:
  load     manager.load_checkpoint(...) on the driver (wall clock);
  memory   growth of a fresh Ray actor that builds the filter and filters
           with it, per committed ID: private (what each filter actor holds
           alone) and resident (also counting the pages of Ray's shared
           object store it maps: Ray's NumPy array is shared there by the
           actors of a node, cairn's set is copied into each actor);
  filter   time to filter N input rows (blocks of 100k, half of them
           committed) inside that actor.
Prints one JSON line per (ID kind, implementation). Run by ray_resume.sh.
"""

import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from ray.data.checkpoint import CheckpointConfig
from ray.data.checkpoint.checkpoint_filter import (
    IdColumnCheckpointManager,
    NumpyArrayBasedCheckpointFilter,
)
from ray.data.context import DataContext

import cairn.ray

FILES = 100
BLOCK = 100_000


def ids_of(kind, start, stop):
    if kind == "int64-sequential":
        return pa.array(np.arange(start, stop, dtype=np.int64))
    if kind == "int64-random":
        # Random-looking 64-bit IDs: the hard case for cairn's set.
        x = np.arange(start, stop, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return pa.array((x >> np.uint64(1)).astype(np.int64))
    return pa.array([f"{i:032x}" for i in range(start, stop)])


def make_checkpoint(root, kind, n):
    ckpt, out = os.path.join(root, "ckpt"), os.path.join(root, "out")
    os.makedirs(ckpt)
    os.makedirs(out)
    per = n // FILES
    for f in range(FILES):
        name = f"w_{f:06}"
        pq.write_table(
            pa.table({"id": ids_of(kind, f * per, (f + 1) * per)}),
            f"{ckpt}/{name}.parquet",
        )
        open(f"{out}/{name}-0.parquet", "wb").close()
    return ckpt, out


@ray.remote(num_cpus=0)
class FilterActor:
    def memory(self):
        """(private bytes, resident bytes): what this process alone holds, and
        what it has resident including pages of Ray's shared object store."""
        fields = {}
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
        return fields["Private_Clean"] + fields["Private_Dirty"], fields["Rss"]

    def build(self, which, config, refs):
        # The ref comes in a list: Ray resolves top-level ref arguments.
        (ref,) = refs
        import gc

        gc.collect()
        self.before = self.memory()
        started = time.perf_counter()
        cls = (
            cairn.ray.CheckpointFilter
            if which == "cairn"
            else NumpyArrayBasedCheckpointFilter
        )
        self.filter = cls(config, ref)
        return time.perf_counter() - started

    def run(self, kind, n):
        # Input: IDs n/2 .. 3n/2, so half of the rows are committed.
        kept = 0
        spent = 0.0
        for start in range(n // 2, n // 2 + n, BLOCK):
            block = pa.table({"id": ids_of(kind, start, start + BLOCK)})
            t = time.perf_counter()
            kept += self.filter.filter_rows_for_block(block).num_rows
            spent += time.perf_counter() - t
        # Measured after filtering: every page of the set has been touched.
        import gc

        gc.collect()
        private, resident = self.memory()
        return kept, spent, private - self.before[0], resident - self.before[1]


def measure(kind, n, which, ckpt, out):
    manager_cls = (
        cairn.ray.CheckpointManager if which == "cairn" else IdColumnCheckpointManager
    )
    fs = (
        cairn.build_checkpoint_filesystem(ckpt)
        if which == "cairn"
        else pafs.LocalFileSystem()
    )
    config = CheckpointConfig(
        id_column="id",
        checkpoint_path=ckpt,
        override_filesystem=fs,
        delete_checkpoint_on_success=False,
    )
    manager = manager_cls(
        checkpoint_config=config, data_context=DataContext.get_current()
    )
    started = time.perf_counter()
    ref, size = manager.load_checkpoint(out, pafs.LocalFileSystem())
    load = time.perf_counter() - started
    actor = FilterActor.remote()
    init = ray.get(actor.build.remote(which, config, [ref]))
    kept, spent, private, resident = ray.get(actor.run.remote(kind, n))
    ray.kill(actor)
    del ref
    return {
        "ids": kind,
        "n": n,
        "impl": which,
        "load_s": round(load, 2),
        "filter_init_s": round(init, 2),
        "private_bytes_per_id": round(private / n, 2),
        "resident_bytes_per_id": round(resident / n, 2),
        "reported_size_mib": round(size / 2**20, 1),
        "filter_s": round(spent, 2),
        "rows_kept": kept,
    }


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    for kind in ("int64-sequential", "int64-random", "string32"):
        root = tempfile.mkdtemp(prefix="ray-resume-bench-")
        try:
            ckpt, out = make_checkpoint(root, kind, n)
            for which in ("ray", "cairn"):
                print(json.dumps(measure(kind, n, which, ckpt, out)), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
