"""Runs the examples of docs/python.md's "Patterns" section as written, each
in its own Python process (a fresh local Ray cluster), against Garage: the
test writes the input, sets the environment the example reads, and checks
with pyarrow alone (its own S3 filesystem) that the output holds every
input `uid` exactly once. An example marked "not run" shows as skipped with
its reason. Runs in the Ray virtualenv (scripts/test.sh)."""

import collections
import os
import re
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from conftest import garage_options  # noqa: E402

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "python.md")
FILES, ROWS_PER_FILE = 8, 8000
#: Where each example writes, relative to DATA_ROOT (s3) or SHARED_DIR (local).
OUTPUTS = {
    "s3": ("s3", "output-s3"),
    "cos": ("s3", "output-cos"),
    "shared": ("local", "output"),
    "resume": ("s3", "output-resume"),
    "row_hash": ("s3", "output-row-hash"),
}


def examples():
    text = open(DOC).read()
    found = re.findall(r"<!-- example: ([^>]*?) -->\s*```python\n(.*?)```", text, re.S)
    assert len(found) >= 6, "docs/python.md lost its examples"
    return [pytest.param(marker, code, id=marker.split()[0]) for marker, code in found]


def write_input(fs, root):
    for f in range(FILES):
        start = f * ROWS_PER_FILE
        table = pa.table(
            {
                "uid": pa.array(range(start, start + ROWS_PER_FILE), pa.int64()),
                "text": [f"row {i}" for i in range(start, start + ROWS_PER_FILE)],
            }
        )
        pq.write_table(table, f"{root}/input/part-{f:04}.parquet", filesystem=fs)


def uid_counts(fs, root):
    found = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    counts = collections.Counter()
    for info in found:
        if info.type == pafs.FileType.File and info.path.endswith(".parquet"):
            counts.update(
                pq.read_table(info.path, columns=["uid"], filesystem=fs)["uid"].to_pylist()
            )
    return counts


@pytest.mark.parametrize("marker,code", examples())
def test_the_documented_example_runs_and_is_exactly_once(marker, code, tmp_path):
    name = marker.split()[0]
    if "not run" in marker:
        pytest.skip(marker[len(name) :].strip(" ()"))
    options = garage_options()
    s3 = pafs.S3FileSystem(
        access_key=options["key"],
        secret_key=options["secret"],
        endpoint_override=options["endpoint_url"],
        region=options["region"],
        scheme="http",
    )
    root = f"{os.environ['CAIRN_TEST_GARAGE_BUCKET']}/docs-{name}-{uuid.uuid4().hex[:8]}"
    shared = str(tmp_path / "shared")
    kind, output = OUTPUTS[name]
    if kind == "s3":
        write_input(s3, root)
    else:
        os.makedirs(f"{shared}/input")
        write_input(pafs.LocalFileSystem(), shared)
    env = dict(
        os.environ,
        DATA_ROOT=root,
        SHARED_DIR=shared,
        AWS_ACCESS_KEY_ID=options["key"],
        AWS_SECRET_ACCESS_KEY=options["secret"],
        AWS_ENDPOINT_URL=options["endpoint_url"],
        AWS_REGION=options["region"],
        COS_SECRET_ID=options["key"],
        COS_SECRET_KEY=options["secret"],
        COS_ENDPOINT=os.environ["CAIRN_TEST_GARAGE_VHOST_ENDPOINT"],
        COS_REGION=options["region"],
    )
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    run = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    if name == "resume":
        assert "first attempt failed" in run.stdout, "the first attempt must fail"
    if kind == "s3":
        counts = uid_counts(s3, f"{root}/{output}")
    else:
        counts = uid_counts(pafs.LocalFileSystem(), f"{shared}/{output}")
    assert set(counts) == set(range(FILES * ROWS_PER_FILE)), f"{len(counts)} distinct IDs"
    assert set(counts.values()) == {1}, "an ID was written twice"
