"""Fixtures for the Python tests of the `cairn` package: one CairnFileSystem
per backend (memory, local disk, Garage through s3, COS on Garage), each
test in a fresh directory. Server backends are skipped (shown as skipped)
without the CAIRN_TEST_GARAGE_* variables scripts/servers.sh writes."""

import os
import uuid

import pytest


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
