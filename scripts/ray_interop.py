"""Ray Data 2.60 as the oracle for cairn's interop tests (run with the Python
of $CAIRN_TOOLS/ray-venv, which scripts/tools.sh installs).

  ray_interop.py row-hash INPUT_DIR OUT_FILE
      Ray's read_parquet(include_row_hash=True) over INPUT_DIR (a local
      directory, or s3://bucket/prefix with AWS_* variables); writes
      (uid, row_hash) to OUT_FILE (Parquet).
  ray_interop.py job INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR [--fail-at-uid N] [--keep]
      A checkpointed Ray job: read_parquet -> map_batches (identity; raises
      on uid N when given) -> write_parquet, with
      CheckpointConfig(id_column="uid", checkpoint_path=CHECKPOINT_DIR)
      (CHECKPOINT_DIR "none": no checkpointing). Prints a JSON line
      {"ok": bool, "error": ..., "init_s": ..., "job_s": ...}.
"""

import json
import os
import sys

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# One read (and write) task per input file of a few MB, as on a large job;
# by default Ray packs 128 MiB of files into one task.
os.environ.setdefault("RAY_DATA_PARQUET_BIN_PACKING_BYTES", str(64 << 10))

import pyarrow as pa
import pyarrow.parquet as pq
import ray


def start():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        configure_logging=False,
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    return ctx


def filesystem_for(url):
    """(pyarrow filesystem or None, path) for a local path or an s3:// URL
    (endpoint and keys from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)."""
    if not url.startswith("s3://"):
        return None, url
    import pyarrow.fs

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    fs = pyarrow.fs.S3FileSystem(
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_override=endpoint.split("://", 1)[1],
        scheme=endpoint.split("://", 1)[0],
        force_virtual_addressing=False,
    )
    return fs, url[len("s3://") :]


def row_hash(input_dir, out_file):
    start()
    fs, path = filesystem_for(input_dir)
    ds = ray.data.read_parquet(path, filesystem=fs, include_row_hash=True)
    table = pa.concat_tables(
        [
            pa.Table.from_pandas(df, preserve_index=False)
            for df in ds.select_columns(["uid", "row_hash"]).iter_batches(
                batch_format="pandas"
            )
        ]
    )
    pq.write_table(table, out_file)
    print(json.dumps({"rows": table.num_rows}))


def job(input_dir, output_dir, checkpoint_dir, fail_at, keep):
    import time

    began = time.monotonic()
    ctx = start()
    if checkpoint_dir != "none":
        ctx.checkpoint_config = ray.data.checkpoint.CheckpointConfig(
            id_column="uid",
            checkpoint_path=checkpoint_dir,
            delete_checkpoint_on_success=not keep,
        )
    init_s = time.monotonic() - began

    def transform(batch):
        if fail_at is not None and fail_at in batch["uid"]:
            raise RuntimeError(f"injected failure at uid {fail_at}")
        return batch

    try:
        ds = ray.data.read_parquet(input_dir).map_batches(
            transform, batch_format="numpy"
        )
        began = time.monotonic()
        ds.write_parquet(output_dir)
        print(
            json.dumps(
                {"ok": True, "init_s": init_s, "job_s": time.monotonic() - began}
            )
        )
    except Exception as e:  # the interrupted run
        print(json.dumps({"ok": False, "error": str(e)[:500], "init_s": init_s}))


def main(argv):
    if argv[0] == "row-hash":
        row_hash(argv[1], argv[2])
    elif argv[0] == "job":
        fail_at = None
        if "--fail-at-uid" in argv:
            fail_at = int(argv[argv.index("--fail-at-uid") + 1])
        job(argv[1], argv[2], argv[3], fail_at, "--keep" in argv)
    else:
        sys.exit(f"unknown command {argv[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
