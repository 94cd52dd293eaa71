"""The cost of a unit: every request a Ray Data job (read_parquet ->
map_batches -> write_parquet) sends to the store, counted by a proxy in
front of Garage (outside the code under test) and accounted to the step
that makes it, per committed unit. One unit reads one input file and
writes one output file, so the protocol's floor is 5 requests a unit
(one GET of the input, the pending record, the data, the commit, the
pending record's delete).

Runs the job five ways in the same run, input, output and checkpoint on
Garage: through Ray with no checkpoint, with Ray's own manager and filter
over cairn's filesystem, with cairn's manager
(cairn.ray.checkpoint_config), with cairn's manager and reader
(cairn.ray.read_parquet); and through the CLI door, `cairn job run
--checkpoint` committing a unit every file's rows (the binary in
$CAIRN_BIN, else target/release/cairn, else target/debug/cairn). Run in
the ray-venv with the wheel installed and the servers started
(scripts/servers.sh start; . target/cairn-servers/servers.env):

    RAY_ADDRESS=local ~/.cache/cairn-tools/ray-venv/bin/python scripts/bench/unit_requests.py [FILES] [ROWS_PER_FILE]

WAYS=cairn-reader,cli (comma-separated) runs only those ways. Prints, per way, the requests by step (area of the job: input, output,
checkpoint; the request's kind; the object's kind) and per unit."""

import os
import subprocess

# One read task per file, so one unit per file.
os.environ.setdefault("RAY_DATA_PARQUET_BIN_PACKING_BYTES", str(64 * 1024))

import sys
import time
import uuid
from collections import Counter
from urllib.parse import parse_qs, unquote, urlsplit

import ray
from ray.data import DataContext
from ray.data.checkpoint import CheckpointConfig

import cairn
import cairn.ray

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "../../crates/cairn-py/tests")
)
from conftest import garage_options  # noqa: E402
from counting_proxy import CountingProxy  # noqa: E402
from oracle import column_counts, pyarrow_s3, write_uid_files  # noqa: E402


def upper(batch):
    batch["text"] = batch["text"].str.upper()
    return batch


def step(method, path, copies, base):
    """The step a request belongs to: `area kind object`."""
    parts = urlsplit(path)
    key = unquote(parts.path).lstrip("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    prefix = unquote(query.get("prefix", [""])[0])
    if "list-type" in query or (method == "GET" and "prefix" in query):
        key = f"{key}/{prefix}"
        kind = "LIST"
    elif method == "POST" and "delete" in query:
        kind = "DELETE many"
    elif method == "PUT" and copies:
        kind = "COPY"
    elif method == "PUT" and "partNumber" in query:
        kind = "PUT part"
    elif method == "POST" and "uploads" in query:
        kind = "POST start multipart"
    elif method == "POST" and "uploadId" in query:
        kind = "POST end multipart"
    else:
        kind = method
    rest = key.split(base, 1)[1].lstrip("/") if base in key else key
    area = rest.split("/", 1)[0] or "(bucket)"
    name = rest.split("/", 1)[1] if "/" in rest else ""
    if kind == "LIST":
        what = "listing"
    elif name == "" or name.endswith("/"):
        what = "directory marker"
    elif name.endswith(".pending.parquet"):
        what = "pending record"
    elif name.startswith(".cairn") or "/.cairn" in name:
        what = name.rsplit("/", 1)[-1]
    elif area == "ckpt" and name.endswith(".parquet"):
        what = "committed record"
    else:
        what = "data file"
    return f"{area:5} {kind:12} {what}"


def cli_job(base, rows, options):
    """`cairn job run` over the same layout, a unit every `rows` rows."""
    here = os.path.join(os.path.dirname(__file__), "../..")
    binary = os.environ.get("CAIRN_BIN") or next(
        (
            os.path.join(here, f"target/{kind}/cairn")
            for kind in ("release", "debug")
            if os.path.exists(os.path.join(here, f"target/{kind}/cairn"))
        ),
        "cairn",
    )
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=options["endpoint_url"],
        AWS_ACCESS_KEY_ID=options["key"],
        AWS_SECRET_ACCESS_KEY=options["secret"],
        AWS_REGION=options["region"],
    )
    subprocess.run(
        [
            binary,
            "job",
            "run",
            "--input",
            f"s3://{base}/in",
            "--output",
            f"s3://{base}/out",
            "--checkpoint",
            f"s3://{base}/ckpt",
            "--id-column",
            "uid",
            "--commit-every-rows",
            str(rows),
            "--quiet",
        ],
        env=env,
        check=True,
    )


#: The ways to run the job, in order (``WAYS=cairn-reader,cli`` runs some).
WAYS = ("none", "ray", "cairn", "cairn-reader", "cli")


def main():
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    garage = garage_options()
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    s3 = pyarrow_s3(garage)
    with CountingProxy(garage["endpoint_url"]) as proxy:
        options = dict(garage, endpoint_url=proxy.endpoint)
        print(
            f"{files} input files of {rows} rows (one unit each), Garage behind a counting proxy"
        )
        for way in os.environ.get("WAYS", ",".join(WAYS)).split(","):
            run = f"unit-requests-{way}-{uuid.uuid4().hex[:8]}"
            base = f"{bucket}/{run}"
            write_uid_files(s3, f"{base}/in", files, rows)
            data_fs = cairn.build_checkpoint_filesystem(f"s3://{base}", options)
            checkpoint = f"s3://{base}/ckpt"
            if way.startswith("cairn"):
                config = cairn.ray.checkpoint_config("uid", checkpoint, options)
            elif way == "ray":
                config = CheckpointConfig(
                    id_column="uid",
                    checkpoint_path=checkpoint,
                    override_filesystem=cairn.build_checkpoint_filesystem(
                        checkpoint, options
                    ),
                )
            else:
                config = None
            DataContext.get_current().checkpoint_config = config
            proxy.reset()
            started = time.monotonic()
            if way == "cli":
                cli_job(base, rows, options)
            else:
                if way == "cairn-reader":
                    # One read task a file, as Ray's reader plans this input.
                    ds = cairn.ray.read_parquet(
                        f"s3://{base}/in", filesystem=data_fs, override_num_blocks=files
                    )
                else:
                    ds = ray.data.read_parquet(f"s3://{base}/in", filesystem=data_fs)
                ds = ds.map_batches(upper, batch_format="pandas")
                ds.write_parquet(f"s3://{base}/out", filesystem=data_fs)
            if config is not None:
                # Ray deletes the checkpoint once the job succeeded; cairn
                # leaves its completion marker until the driver exits.
                cairn._ray_manager._remove_markers()
            seconds = time.monotonic() - started
            DataContext.get_current().checkpoint_config = None
            log = list(proxy.log)
            counts = column_counts(s3, f"{base}/out", "uid")
            exact = len(counts) == files * rows and set(counts.values()) == {1}
            steps = Counter(step(m, p, c, run) for m, p, c in log)
            print(
                f"\n{way}: {seconds:.2f} s, {len(log)} requests, "
                f"{len(log) / files:.1f} a unit, exactly once: {exact}"
            )
            for name, count in sorted(steps.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"  {count:5}  {count / files:5.2f} a unit  {name}")


if __name__ == "__main__":
    main()
