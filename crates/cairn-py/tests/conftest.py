"""Fixtures for the Python tests of the `cairn` package: one CairnFileSystem
per backend (memory, local disk, Garage through s3, COS on Garage), each
test in a fresh directory. Server backends are skipped (shown as skipped)
without the CAIRN_TEST_GARAGE_* variables scripts/servers.sh writes."""

import os
import uuid

import pytest

# A Ray driver of these tests joins only the instance its test names (the
# shared one of kit.shared_ray_address, or its own local instance): a
# cluster another test started (ray.cluster_utils writes
# /tmp/ray/ray_current_cluster, and a SIGKILLed driver leaves it behind) is
# never joined by accident.
os.environ.setdefault("RAY_ADDRESS", "local")


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance in the test process (2 CPUs, no dashboard),
    shared by the tests of one module."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def no_checkpoint():
    """Ray's current DataContext, its checkpoint_config reset after the test."""
    from ray.data import DataContext

    context = DataContext.get_current()
    yield context
    context.checkpoint_config = None


def garage_options():
    needed = [
        "CAIRN_TEST_GARAGE_ENDPOINT",
        "CAIRN_TEST_GARAGE_KEY",
        "CAIRN_TEST_GARAGE_SECRET",
        "CAIRN_TEST_GARAGE_BUCKET",
    ]
    missing = [n for n in needed if not os.environ.get(n)]
    if missing:
        pytest.skip(f"needs the Garage server ({', '.join(missing)} unset): run scripts/test.sh")
    return {
        "key": os.environ["CAIRN_TEST_GARAGE_KEY"],
        "secret": os.environ["CAIRN_TEST_GARAGE_SECRET"],
        "endpoint_url": os.environ["CAIRN_TEST_GARAGE_ENDPOINT"],
        "region": os.environ.get("CAIRN_TEST_GARAGE_REGION", "garage"),
    }


def fresh(prefix):
    return f"{prefix}/cairn-py-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["file", "s3"])
def target(request, tmp_path):
    """(filesystem, a fresh directory on it): local disk, and Garage (skipped
    without it)."""
    from cairn.fsspec import CairnFileSystem

    if request.param == "file":
        return CairnFileSystem("file"), str(tmp_path)
    fs = CairnFileSystem("s3", **garage_options())
    return fs, fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])


def serialized_id_set(ids):
    """A serialized set of `ids`, made the way CheckpointManager makes it."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    import cairn

    with tempfile.TemporaryDirectory() as root:
        ckpt, out = f"{root}/ckpt", f"{root}/out"
        os.makedirs(ckpt)
        os.makedirs(out)
        pq.write_table(pa.table({"uid": ids}), f"{ckpt}/w_000001.parquet")
        open(f"{out}/w_000001-0.parquet", "wb").close()
        fs = cairn.CairnFileSystem("file", checkpoint=True)
        url = fs._native.url(fs._native.strip(ckpt))
        from cairn._native import open_checkpoint

        ids_set, _ = open_checkpoint(fs._native, url, "uid", fs._native, out)
        return ids_set.to_bytes()
