"""cairn's counts in Ray's own metrics: a Ray Data job with cairn.ray's
checkpoint on Garage, its workers told to report by the job's runtime
environment; Ray's Prometheus endpoint (the node's metrics export port)
then serves ray_cairn_* counters that cover what the job did, counted by
pyarrow alone. Needs ray[default] (Ray exports metrics only with it);
scripts/test.sh runs it in its ray-metrics-venv; elsewhere it shows as
skipped."""

import os
import time
import urllib.request
import uuid

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")
parser = pytest.importorskip(
    "prometheus_client.parser",
    reason="needs ray[default] (Ray exports metrics only with it): scripts/test.sh runs this "
    "in its ray-metrics-venv",
)

from ray.data import DataContext  # noqa: E402

import cairn  # noqa: E402
import cairn.ray  # noqa: E402
from conftest import garage_options  # noqa: E402
from oracle import column_counts, data_files, files, pyarrow_s3, write_uid_files  # noqa: E402
from kit import free_port  # noqa: E402

FILES = 4
ROWS_PER_FILE = 2000


def ray_counter(port, name, **labels):
    """Ray's exported counter `name` summed over its series whose labels
    include `labels`, by the worker process that reported it (WorkerId)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    by_worker = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                worker = sample.labels.get("WorkerId")
                by_worker[worker] = by_worker.get(worker, 0.0) + sample.value
    return by_worker


def test_a_ray_job_reports_cairns_counts_to_rays_metrics(monkeypatch):
    # One read task (and one unit) per input file.
    monkeypatch.setenv("RAY_DATA_PARQUET_BIN_PACKING_BYTES", str(16 * 1024))
    options = garage_options()
    oracle = pyarrow_s3(options)
    bucket = os.environ["CAIRN_TEST_GARAGE_BUCKET"]
    prefix = f"{bucket}/ray-metrics-{uuid.uuid4().hex[:12]}"
    write_uid_files(oracle, f"{prefix}/in", FILES, ROWS_PER_FILE)
    port = free_port()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _metrics_export_port=port,
        runtime_env={"env_vars": {"CAIRN_RAY_METRICS_INTERVAL_S": "1"}},
    )
    context = DataContext.get_current()
    try:
        cairn.ray.report_metrics(1.0)
        # Reads through cairn's own client, whose requests its metrics
        # count (pyarrow's S3 files, the default here, are not counted).
        monkeypatch.setenv("CAIRN_PYARROW_S3", "0")
        fs = cairn.build_checkpoint_filesystem(f"s3://{prefix}", options)
        context.checkpoint_config = cairn.ray.checkpoint_config(
            "uid", f"s3://{prefix}/ckpt", options
        )
        driver = ray.get_runtime_context().get_worker_id()
        read = ray.data.read_parquet(f"{prefix}/in", filesystem=fs)
        read.write_parquet(f"{prefix}/out", filesystem=fs)
        cairn.ray.flush_metrics()
        written = data_files(oracle, f"{prefix}/out")
        assert len(written) >= 2, written
        counts = column_counts(oracle, f"{prefix}/out", "uid")
        assert len(counts) == FILES * ROWS_PER_FILE and set(counts.values()) == {1}

        # Workers report every second and Ray exports every few seconds:
        # wait until the workers' counts show each unit's data file and ID
        # file (both PUT through cairn by the write tasks), and the driver's
        # its own requests (settling and removing the checkpoint).
        def workers(counts):
            return sum(v for worker, v in counts.items() if worker != driver)

        # The driver's own count, all flushed: Ray's export (every few
        # seconds, later on a loaded machine) must come to show all of it.
        driver_own = sum(s["value"] for s in cairn.metrics()["cairn_store_requests_total"])
        deadline = time.monotonic() + 90
        while True:
            puts = workers(ray_counter(port, "ray_cairn_store_requests_total", op="put"))
            by_driver = ray_counter(port, "ray_cairn_store_requests_total").get(driver, 0.0)
            if puts >= 2 * len(written) and by_driver >= driver_own:
                break
            assert time.monotonic() < deadline, (
                f"Ray's metrics never showed the job: {puts} PUTs by workers for {len(written)} "
                f"data files and their ID files, {by_driver} of the driver's {driver_own} requests"
            )
            time.sleep(1)
        assert by_driver == driver_own, "the driver's flushed counts are all in Ray's, once"
        gets = workers(ray_counter(port, "ray_cairn_store_requests_total", op="get"))
        received = workers(ray_counter(port, "ray_cairn_store_received_bytes_total", op="get"))
        input_bytes = sum(oracle.get_file_info(p).size for p in files(oracle, f"{prefix}/in"))
        assert gets >= FILES, "each input file was read with at least one GET"
        assert received >= input_bytes / 2, (received, input_bytes)
    finally:
        context.checkpoint_config = None
        ray.shutdown()
