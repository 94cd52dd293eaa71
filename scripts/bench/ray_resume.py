"""Ray Data 2.60 resume: Ray's default checkpoint manager and filter against
cairn.ray's, on the same checkpoint in the same run.

    ray_resume.py make KIND N FILES ROOT       write ROOT/ckpt (N committed IDs in
                                               FILES Ray-layout ID files) and
                                               ROOT/out (an empty data file each)
    ray_resume.py measure KIND N IMPL ROOT     one JSON line for IMPL (ray | cairn)

KIND is int64-sequential, int64-random, string32 or composite. A composite
key is a video's name (24 characters, 40 shots a video) and a shot's
index: cairn keys the rows by ``["video", "shot_idx"]`` (its checkpoint
holds the encoded keys), Ray's default manager by the joined string
``video#shot_idx`` (the seed's ``shot_id``), each its own checkpoint under
ROOT/ckpt-<impl>. ROOT is a local
directory, or s3://bucket/prefix (Garage: CAIRN_TEST_GARAGE_* in the
environment, as scripts/servers.sh writes them). `measure` runs in a process
of its own (ray_resume.sh starts one per implementation, so one that runs
out of memory takes nothing else down), starting its own single-node Ray
(2 CPUs). It reports:
  load_s      manager.load_checkpoint(...) on the driver (wall clock);
  driver_peak_mib   the driver's peak resident set (VmHWM) by then;
  object_store_mib  what the manager put in Ray's object store for the filters;
  private/resident B/ID   growth of a fresh Ray actor that builds the filter
              and filters with it, per committed ID: private (what each filter
              actor holds alone) and resident (also the pages of Ray's shared
              object store it maps, shared by the actors of a node);
  filter rows/s     filtering SAMPLE input rows (blocks of 100k, half of them
              committed) inside that actor.
"""

import json
import os
import resource
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

BLOCK = 100_000
#: Input rows filtered per measure (rows/s does not need all N).
SAMPLE = 10_000_000


#: Shots a video in the composite kind.
SHOTS = 40

#: cairn's name of the composite key's ID column (a JSON list).
COMPOSITE = '["video","shot_idx"]'


def key_columns(start, stop):
    """The composite kind's key columns of rows start .. stop."""
    n = np.arange(start, stop)
    video = np.char.mod("video-%018d", n // SHOTS).astype(object)
    return pa.array(video, pa.string()), pa.array(n % SHOTS, pa.int64())


def block_of(kind, impl, start, stop):
    """Input rows start .. stop as the filter of `impl` sees them."""
    if kind != "composite":
        return pa.table({"id": ids_of(kind, start, stop)})
    video, shot = key_columns(start, stop)
    if impl == "cairn":
        return pa.table({"video": video, "shot_idx": shot})
    return pa.table(
        {"id": pc.binary_join_element_wise(video, pc.cast(shot, pa.string()), "#")}
    )


def checkpoint_dir(kind, impl):
    return f"ckpt-{impl}" if kind == "composite" else "ckpt"


def ids_of(kind, start, stop):
    if kind == "int64-sequential":
        return pa.array(np.arange(start, stop, dtype=np.int64))
    if kind == "int64-random":
        # Random-looking 64-bit IDs (an odd multiplier is a bijection): the
        # hard case for cairn's set.
        x = np.arange(start, stop, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return pa.array((x >> np.uint64(1)).astype(np.int64))
    return pa.array(np.char.mod("%032x", np.arange(start, stop)).astype(object))


def garage_options():
    env = os.environ
    return {
        "key": env["CAIRN_TEST_GARAGE_KEY"],
        "secret": env["CAIRN_TEST_GARAGE_SECRET"],
        "endpoint_url": env["CAIRN_TEST_GARAGE_ENDPOINT"],
        "region": env.get("CAIRN_TEST_GARAGE_REGION", "garage"),
    }


def store(root):
    """(pyarrow filesystem, path without scheme, cairn storage options)."""
    if root.startswith("s3://"):
        o = garage_options()
        fs = pafs.S3FileSystem(
            access_key=o["key"],
            secret_key=o["secret"],
            endpoint_override=o["endpoint_url"],
            region=o["region"],
            scheme="http",
        )
        return fs, root[len("s3://") :], {"s3": o}
    return pafs.LocalFileSystem(), os.path.abspath(root), None


def make(kind, n, files, root):
    fs, base, _ = store(root)
    fs.create_dir(f"{base}/out")
    per = n // files
    empty = pa.table({"id": pa.array([], pa.int64())})
    impls = ("cairn", "ray") if kind == "composite" else ("any",)
    for impl in impls:
        fs.create_dir(f"{base}/{checkpoint_dir(kind, impl)}")
    for f in range(files):
        name = f"w_{f:06}"
        for impl in impls:
            block = block_of(kind, impl, f * per, (f + 1) * per)
            if kind == "composite" and impl == "cairn":
                from cairn._ray_keys import encode_key

                block = pa.table({COMPOSITE: encode_key(block, ["video", "shot_idx"])})
            pq.write_table(
                block,
                f"{base}/{checkpoint_dir(kind, impl)}/{name}.parquet",
                filesystem=fs,
            )
        # The unit's data file: its rows do not matter here, only that it
        # is there (an empty object is refused by Garage's multipart path).
        pq.write_table(empty, f"{base}/out/{name}-0.parquet", filesystem=fs)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(kind, n, which, root):
    import ray
    from ray.data.checkpoint import CheckpointConfig
    from ray.data.checkpoint.checkpoint_filter import (
        IdColumnCheckpointManager,
        NumpyArrayBasedCheckpointFilter,
    )
    from ray.data.context import DataContext

    import cairn
    import cairn.ray

    @ray.remote(num_cpus=0)
    class FilterActor:
        def memory(self):
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
            self.impl = which
            started = time.perf_counter()
            cls = (
                cairn.ray.CheckpointFilter
                if which == "cairn"
                else NumpyArrayBasedCheckpointFilter
            )
            self.filter = cls(config, ref)
            return time.perf_counter() - started

        def run(self, kind, n):
            # Input IDs n - SAMPLE/2 .. n + SAMPLE/2: half committed.
            kept, spent = 0, 0.0
            first = max(0, n - SAMPLE // 2)
            for start in range(first, first + SAMPLE, BLOCK):
                block = block_of(kind, self.impl, start, start + BLOCK)
                t = time.perf_counter()
                kept += self.filter.filter_rows_for_block(block).num_rows
                spent += time.perf_counter() - t
            import gc

            gc.collect()
            private, resident = self.memory()
            return kept, spent, private - self.before[0], resident - self.before[1]

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    fs, base, options = store(root)
    directory = checkpoint_dir(kind, which)
    ckpt = f"{root}/{directory}" if root.startswith("s3://") else f"{base}/{directory}"
    out = f"{base}/out"
    if which == "cairn":
        # One machine's set, loaded on the driver (the sharded load is
        # measured by ray_shards.py).
        config = cairn.ray.checkpoint_config(
            ["video", "shot_idx"] if kind == "composite" else "id",
            ckpt,
            options,
            max_filter_memory=None,
            delete_checkpoint_on_success=False,
        )
    else:
        config = CheckpointConfig(
            id_column="id",
            checkpoint_path=ckpt,
            override_filesystem=fs,
            delete_checkpoint_on_success=False,
        )
    manager_cls = (
        cairn.ray.CheckpointManager if which == "cairn" else IdColumnCheckpointManager
    )
    manager = manager_cls(
        checkpoint_config=config, data_context=DataContext.get_current()
    )
    started = time.perf_counter()
    ref, size = manager.load_checkpoint(out, fs)
    load = time.perf_counter() - started
    driver_peak = peak_rss_mib()
    actor = FilterActor.remote()
    init = ray.get(actor.build.remote(which, config, [ref]))
    kept, spent, private, resident = ray.get(actor.run.remote(kind, n))
    return {
        "ids": kind,
        "n": n,
        "impl": which,
        "load_s": round(load, 2),
        "driver_peak_mib": round(driver_peak),
        "object_store_mib": round(size / 2**20, 1),
        "filter_init_s": round(init, 2),
        "private_bytes_per_id": round(private / n, 2),
        "resident_bytes_per_id": round(resident / n, 2),
        "filter_rows_per_s": round(SAMPLE / spent),
        "rows_kept": kept,
    }


def main():
    step, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if step == "make":
        make(kind, n, int(sys.argv[4]), sys.argv[5])
    elif step == "measure":
        print(json.dumps(measure(kind, n, sys.argv[4], sys.argv[5])), flush=True)
        # Ray's exit handlers can outlast a big object store; the figures are out.
        os._exit(0)
    else:
        sys.exit(f"unknown step {step}: make | measure")


if __name__ == "__main__":
    main()
