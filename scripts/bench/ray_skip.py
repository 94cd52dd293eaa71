"""A 95%-committed resume with Ray Data 2.60, three ways on the same input and
the same committed units, in the same run:

    ray           Ray's read_parquet, Ray's default checkpoint manager and filter
    cairn-filter  Ray's read_parquet, cairn.ray's manager and filter
    cairn         cairn.ray.read_parquet (committed row groups left out of the
                  read), cairn.ray's manager and filter
    cairn-sharded the same, with the committed set over max_filter_memory (set
                  to about a quarter of the ID files' size, so split over
                  four or five shard actors that the planning asks)

    ray_skip.py make ROWS FILES COMMITTED ROOT   the input ROOT/in (ROWS rows of uid
                                                 and 100 characters of text, in FILES
                                                 files of 4 row groups) and the
                                                 committed units of its first
                                                 COMMITTED files (ROOT/template)
    ray_skip.py measure IMPL ROOT                one JSON line: the resumed job
                                                 (read -> identity map -> write_parquet)
                                                 on a fresh copy of the template

ROOT is a local directory. `measure` runs in a process of its own, starting
its own single-node Ray (2 CPUs). It reports the job's wall time (planning,
checkpoint load, read, filter, write; Ray's start not included), the rows
written, and the compressed bytes of the row groups the job reads: all of
them for Ray's reader, those cairn's reader did not leave out (from its log).
"""

import json
import logging
import os
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUPS_PER_FILE = 4


def make(rows, files, committed, root):
    per = rows // files
    os.makedirs(f"{root}/in")
    os.makedirs(f"{root}/template/ckpt")
    os.makedirs(f"{root}/template/out")
    rng = np.random.default_rng(7)
    for f in range(files):
        uids = np.arange(f * per, (f + 1) * per, dtype=np.int64)
        # 100 characters that compress about as much as prose does.
        words = rng.integers(0, 1 << 40, size=(per, 4))
        text = np.char.mod("%025x", words).astype(object)
        text = ["".join(t) for t in text]
        table = pa.table({"uid": uids, "text": pa.array(text)})
        path = f"{root}/in/part-{f:05}.parquet"
        pq.write_table(table, path, row_group_size=-(-per // ROW_GROUPS_PER_FILE))
        if f < committed:
            name = f"w_{f:06}"
            pq.write_table(
                pa.table({"uid": uids}), f"{root}/template/ckpt/{name}.parquet"
            )
            # The unit's data file: its rows do not matter here, only that
            # it is there.
            pq.write_table(table.slice(0, 0), f"{root}/template/out/{name}-0.parquet")


def input_bytes(root):
    """Compressed bytes of every row group of the input."""
    return row_group_bytes(f"{root}/in")


def row_group_bytes(directory):
    """Compressed bytes of every row group of the Parquet files in `directory`."""
    total = 0
    for name in os.listdir(directory):
        if not name.endswith(".parquet"):
            continue
        meta = pq.ParquetFile(f"{directory}/{name}").metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total += sum(
                group.column(c).total_compressed_size for c in range(group.num_columns)
            )
    return total


class SkipLog(logging.Handler):
    """Keeps the arguments of cairn's "leaves out" line, and the shard
    count when the set is sharded."""

    def __init__(self):
        super().__init__()
        self.args = None
        self.shards = 0

    def emit(self, record):
        if "leaves out" in record.msg:
            self.args = record.args
        if "shards of at most" in record.msg:
            self.shards = record.args[2]


def measure(impl, root):
    import ray
    from ray.data import DataContext
    from ray.data.checkpoint import CheckpointConfig

    import cairn.ray

    run = f"{root}/runs/{impl}"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(f"{root}/template", run)
    ckpt, out = f"{run}/ckpt", f"{run}/out"
    skip_log = SkipLog()
    logging.getLogger("cairn").addHandler(skip_log)
    logging.getLogger("cairn").setLevel(logging.INFO)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    if impl == "ray":
        config = CheckpointConfig(id_column="uid", checkpoint_path=ckpt)
    elif impl == "cairn-sharded":
        id_bytes = sum(
            e.stat().st_size for e in os.scandir(ckpt) if e.name.endswith(".parquet")
        )
        # A shard takes 0.35 of the budget in ID files' bytes: 4-5 shards.
        config = cairn.ray.checkpoint_config(
            "uid", ckpt, max_filter_memory=id_bytes * 100 // 140
        )
    else:
        config = cairn.ray.checkpoint_config("uid", ckpt)
    DataContext.get_current().checkpoint_config = config
    skipping = impl in ("cairn", "cairn-sharded")
    read = cairn.ray.read_parquet if skipping else ray.data.read_parquet
    started = time.perf_counter()
    ds = read(f"{root}/in")
    ds = ds.map_batches(lambda batch: batch, batch_format="pyarrow")
    ds.write_parquet(out)
    seconds = time.perf_counter() - started
    written = sum(
        pq.ParquetFile(f"{out}/{n}").metadata.num_rows
        for n in os.listdir(out)
        if n.endswith(".parquet")
    )
    total = input_bytes(root)
    if skipping:
        if skip_log.args is None:
            raise SystemExit("cairn's reader left nothing out (no 'leaves out' line)")
        _, _, _, _, bytes_skipped, bytes_all = skip_log.args
        read_bytes = bytes_all - bytes_skipped
    else:
        read_bytes = total
    shutil.rmtree(run, ignore_errors=True)
    return {
        "impl": impl,
        "seconds": round(seconds, 2),
        "rows_written": written,
        "read_mib": round(read_bytes / 2**20, 1),
        "input_mib": round(total / 2**20, 1),
        "shards": skip_log.shards,
    }


def main():
    if sys.argv[1] == "make":
        make(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        print(json.dumps(measure(sys.argv[2], sys.argv[3])), flush=True)
        os._exit(0)


if __name__ == "__main__":
    main()
