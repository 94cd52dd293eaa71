"""Runs the examples of docs/python.md's "Patterns" section as written, each
in its own Python process (a fresh local Ray cluster), against Garage: the
test writes the input, sets the environment the example reads, and checks
with pyarrow alone (its own S3 filesystem) that the output holds every
input `uid` exactly once. An example marked "not run" shows as skipped with
its reason. Runs in the Ray virtualenv (scripts/test.sh)."""

import os
import re
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow.fs as pafs  # noqa: E402

from conftest import garage_options  # noqa: E402
from oracle import column_counts, pyarrow_s3, write_uid_files  # noqa: E402

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


@pytest.mark.parametrize("marker,code", examples())
def test_the_documented_example_runs_and_is_exactly_once(marker, code, tmp_path):
    name = marker.split()[0]
    if "not run" in marker:
        pytest.skip(marker[len(name) :].strip(" ()"))
    options = garage_options()
    s3 = pyarrow_s3(options)
    root = f"{os.environ['CAIRN_TEST_GARAGE_BUCKET']}/docs-{name}-{uuid.uuid4().hex[:8]}"
    shared = str(tmp_path / "shared")
    kind, output = OUTPUTS[name]
    if kind == "s3":
        write_uid_files(s3, f"{root}/input", FILES, ROWS_PER_FILE)
    else:
        os.makedirs(f"{shared}/input")
        write_uid_files(pafs.LocalFileSystem(), f"{shared}/input", FILES, ROWS_PER_FILE)
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
        counts = column_counts(s3, f"{root}/{output}", "uid")
    else:
        counts = column_counts(pafs.LocalFileSystem(), f"{shared}/{output}", "uid")
    assert set(counts) == set(range(FILES * ROWS_PER_FILE)), f"{len(counts)} distinct IDs"
    assert set(counts.values()) == {1}, "an ID was written twice"
