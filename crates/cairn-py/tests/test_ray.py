"""cairn.ray with Ray Data 2.60 on a local Ray cluster, data and checkpoint on
Garage: a job's driver killed with SIGKILL and run again ends with every
input row exactly once (uid and row_hash IDs); a pending unit whose name is
a prefix of a committed unit's name; bad configurations.

Exactly-once is judged with pyarrow alone (its own S3 filesystem), never
with cairn. Runs in the Ray virtualenv (scripts/test.sh); elsewhere the
tests show as skipped."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from conftest import garage_options, serialized_id_set  # noqa: E402
from kit import SHARED_RAY_ENV, shared_ray_address  # noqa: E402
from oracle import column_counts, files, pyarrow_s3, write_uid_files  # noqa: E402

JOB = os.path.join(os.path.dirname(__file__), "ray_job.py")
FILES = 16
ROWS_PER_FILE = 4000


@pytest.fixture(scope="module")
def s3():
    """Garage's options for cairn, pyarrow's own S3 filesystem (the oracle)
    and the bucket."""
    options = garage_options()
    return options, pyarrow_s3(options), os.environ["CAIRN_TEST_GARAGE_BUCKET"]


def write_input(oracle, prefix):
    write_uid_files(oracle, prefix, FILES, ROWS_PER_FILE)


# Set CAIRN_TEST_OWN_RAY=1 to give every driver a Ray instance of its own.
OWN_RAY = bool(os.environ.get("CAIRN_TEST_OWN_RAY"))


def shares_ray(spec):
    """Whether the job of `spec` runs on the shared local Ray instance: not
    on a multi-node cluster, nor with a node of its own shape, nor when its
    test counts or kills Ray's worker processes (`own_ray`)."""
    own = spec.get("cluster") or "node" in spec or spec.get("own_ray")
    return not (OWN_RAY or own or spec.get("kill_shard_after_units"))


def start_job(spec, env=None):
    """Starts ray_job.py (with `env` added to its environment and, on the
    shared Ray instance, to its workers') in a process group of its own,
    its output (stdout and stderr) piped as text."""
    extra = {"RAY_DATA_PARQUET_BIN_PACKING_BYTES": str(64 * 1024), **(env or {})}
    if shares_ray(spec):
        spec = dict(spec, ray_address=shared_ray_address(), worker_env=extra)
        extra = dict(extra, **SHARED_RAY_ENV)
    env = dict(os.environ, **extra)
    return subprocess.Popen(
        [sys.executable, JOB, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def run_job(spec, kill_when=None, timeout=300, env=None, meanwhile=None):
    """Runs ray_job.py (with `env` added to its environment); with
    `kill_when`, SIGKILLs its whole process group (the driver, and the local
    cluster it started unless it runs on the shared one) once kill_when() is
    true; with `meanwhile`, a pair
    (when, act), calls act() once when() is true while the job runs.
    Returns (exit code, output)."""
    proc = start_job(spec, env)
    deadline = time.monotonic() + timeout
    try:
        if kill_when is not None:
            meanwhile = (kill_when, lambda: os.killpg(proc.pid, signal.SIGKILL))
        if meanwhile is not None:
            when, act = meanwhile
            while proc.poll() is None and time.monotonic() < deadline:
                if when():
                    act()
                    break
                time.sleep(0.1)
        out, _ = proc.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out


def committed_units(oracle, checkpoint):
    return [
        p
        for p in files(oracle, checkpoint)
        if p.endswith(".parquet") and not p.endswith(".pending.parquet")
    ]


# Each slow scenario runs once, its ID kind chosen so both kinds are
# killed somewhere: uid here and in the file sinks and partitioned writes,
# row_hash in the node-lost cluster run; the readers' two proofs (statistics,
# row_hash) each have their run below. Both kinds of every scenario: set
# CAIRN_RAY_ALL_KINDS=1.
ALL_KINDS = bool(os.environ.get("CAIRN_RAY_ALL_KINDS"))


def kinds(chosen):
    return ["uid", "row_hash"] if ALL_KINDS else [chosen]


@pytest.mark.parametrize("id_column", kinds("uid"))
def test_a_killed_driver_resumes_exactly_once(s3, id_column):
    """Killed midway, then killed again while Ray deletes the checkpoint of
    the resumed run that wrote everything, then run a third time."""
    kill_and_resume(s3, id_column, kill_in_clean_up=True)


@pytest.mark.parametrize("sink", ["json", "csv", "numpy"] if ALL_KINDS else ["json"])
def test_every_file_sink_resumes_exactly_once_with_a_bare_output_path(s3, sink):
    """Ray's block-based sinks (json, csv, numpy: one Ray class, so one runs
    unless CAIRN_RAY_ALL_KINDS is set) name a unit's file `<unit>.<ext>`, and Ray
    hands the manager the sink's filesystem wrapped in its
    RetryingPyFileSystem, with the path as given (`bucket/out`, no scheme)."""
    kill_and_resume(s3, "uid", sink=sink, bare_output=True)


def job_spec(s3, name, id_column, sleep, **extra):
    """The job of ray_job.py on fresh input written by pyarrow, data and
    checkpoint on Garage: (spec, pyarrow's S3 filesystem, base path).
    `cluster=True` runs it on a local cluster (a head without CPUs and two
    worker nodes of one CPU, so every read and write runs on a worker node;
    filter actors ask for no CPU and may run on the head)."""
    options, oracle, bucket = s3
    base = f"{bucket}/ray-{name}-{id_column}-{uuid.uuid4().hex[:10]}"
    write_input(oracle, f"{base}/in")
    spec = {
        "input": f"s3://{base}/in",
        "output": f"s3://{base}/out",
        "checkpoint": f"s3://{base}/ckpt",
        "storage_options": options,
        "id_column": id_column,
        "manager": "cairn",
        "sleep": sleep,
        **extra,
    }
    return spec, oracle, base


def ranges(ids):
    """`ids` as sorted runs, `a-b` each: short enough for a failure message
    (a set's own diff lists every element)."""
    runs = []
    for i in sorted(ids):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def assert_exactly_once(oracle, base, *outputs):
    """Every input uid once in the output; a failure names the missing and
    repeated uids as ranges, the output's files and the tail of each job
    output in `outputs`."""
    counts = column_counts(oracle, f"{base}/out", "uid")
    expected = set(range(FILES * ROWS_PER_FILE))
    missing = expected - set(counts)
    repeated = {k for k, v in counts.items() if v != 1}
    unknown = set(counts) - expected
    if missing or repeated or unknown:
        listing = "\n".join(files(oracle, base))
        jobs = "\n".join(f"--- job output {n}:\n{out[-6000:]}" for n, out in enumerate(outputs))
        pytest.fail(
            f"not exactly once: {len(missing)} uids missing ({ranges(missing)}); "
            f"{len(repeated)} written more than once ({ranges(repeated)}); "
            f"{len(unknown)} not in the input\nfiles:\n{listing}\n{jobs}"
        )


@pytest.mark.parametrize("id_column", kinds("row_hash"))
def test_a_worker_node_lost_mid_job_on_a_cluster_ends_exactly_once(s3, id_column, tmp_path):
    """Once 3 units are committed a worker node is removed (its raylet and
    workers killed, as a preempted machine) and a new one is started. Ray
    either rides it out (its lost tasks run again, rewriting the same
    units) or fails the job; run again if it failed, the output holds every
    input row once. The input is read by cairn.ray.read_parquet, whose read
    tasks are planned on the driver: Ray's own reader lists the input in a
    task, and when that task's retry on a new node fails, Ray 2.60 drops
    the files not yet listed with exit 0 (test_ray_upstream.py)."""
    spec, oracle, base = job_spec(
        s3, "cluster-node", id_column, sleep=3.0, cluster=True, reader="cairn"
    )
    spec.update(remove_node_after_units=3, replaced_flag=str(tmp_path / "replaced"))
    code, out = run_job(spec, timeout=420)
    outputs = [out]
    assert "NODE REMOVED" in out, f"no node was removed (exit {code}):\n{out[-4000:]}"
    removed_at = int(out.split("NODE REMOVED after ", 1)[1].split()[0])
    assert 3 <= removed_at < FILES, f"the node must go midway: {removed_at} units"
    if code != 0 or "JOB DONE" not in out:
        spec.update(sleep=0, remove_node_after_units=None)
        code, out = run_job(spec, timeout=420)
        outputs.append(out)
        assert code == 0 and "JOB DONE" in out, out[-5000:]
    assert_exactly_once(oracle, base, *outputs)
    assert committed_units(oracle, f"{base}/ckpt") == []


def test_a_killed_driver_then_a_killed_shard_on_a_cluster_end_exactly_once(s3):
    """The driver and the cluster it started SIGKILLed once 3 units are
    committed; the job run again on a fresh cluster, where the committed
    set is over max_filter_memory (the ID files' size here), so it is split over
    3 to 5 shard actors on the worker nodes, and one of them is SIGKILLed while the
    filter asks them (3 units later): Ray restarts it, it reloads its range,
    and the job ends with every uid once."""
    spec, oracle, base = job_spec(s3, "cluster-driver", "uid", sleep=1.0, cluster=True)

    def some_committed():
        return len(committed_units(oracle, f"{base}/ckpt")) >= 3

    code, first = run_job(spec, kill_when=some_committed)
    assert code == -signal.SIGKILL, f"the job was not killed (exit {code}):\n{first[-3000:]}"
    units = committed_units(oracle, f"{base}/ckpt")
    # A budget just under the ID files' size: 3 shards (a shard takes 0.35
    # of its budget in ID files' bytes), more if recovery commits pending
    # units. Each shard is an actor process of its own: a few KiB would
    # start hundreds of them.
    budget = sum(info.size for info in oracle.get_file_info(units)) - 1
    # Recovery may commit the (at most 2) pending units before the load:
    # the third unit after them is written past the filter, so the kill
    # lands while the filter asks the shards.
    spec.update(max_filter_memory=budget, kill_shard_after_units=len(units) + 3, sleep=0.5)
    code, out = run_job(spec, timeout=420)
    assert code == 0 and "JOB DONE" in out, out[-5000:]
    # 3 shards for the units committed before the kill, up to 5 when
    # recovery commits the pending units (each a third of the budget more).
    shards = re.search(r"in (\d+) shards of at most", out)
    cairn_lines = "\n".join(line for line in out.splitlines() if "cairn" in line)
    assert shards and 2 <= int(shards.group(1)) <= 6, f"{units=} {budget=}\n{cairn_lines}"
    assert "SHARD KILLED" in out, out[-5000:]
    assert_exactly_once(oracle, base, first, out)
    assert committed_units(oracle, f"{base}/ckpt") == []


def kill_and_resume(s3, id_column, sink="parquet", bare_output=False, kill_in_clean_up=False):
    """Runs the job, SIGKILLs it once 3 units are committed, runs it again:
    the output (read by pyarrow) holds every input row once. With
    `kill_in_clean_up`, the second run's driver dies (a crash point in
    cairn's clean-up) once Ray's delete_checkpoint_on_success has deleted
    every committed ID, and a third run, finding the completion marker,
    writes nothing."""
    spec, oracle, base = job_spec(
        s3, f"kill-{sink}", id_column, sleep=1.0, sink=sink, bare_output=bare_output
    )
    at_kill = {}

    def some_committed():
        units = committed_units(oracle, f"{base}/ckpt")
        at_kill["units"] = len(units)
        return len(units) >= 3

    code, first = run_job(spec, kill_when=some_committed)
    assert code == -signal.SIGKILL, f"the job was not killed (exit {code}):\n{first[-3000:]}"
    assert 3 <= at_kill["units"] < FILES, f"the kill must land midway: {at_kill}"
    partial = sum(column_counts(oracle, f"{base}/out", "uid").values())
    assert 0 < partial < FILES * ROWS_PER_FILE

    spec["sleep"] = 0
    outputs = [first]
    if kill_in_clean_up:
        code, out = run_job(spec, env={"FAILPOINTS": "clean-up-before-marker-delete=return"})
        outputs.append(out)
        assert code == -signal.SIGABRT, (
            f"the crash point did not fire (exit {code}):\n{out[-3000:]}"
        )
        left = files(oracle, f"{base}/ckpt")
        assert any(p.endswith("/.cairn-complete") for p in left) and not committed_units(
            oracle, f"{base}/ckpt"
        ), f"the kill must land after every committed ID was deleted: {left}"
        assert_exactly_once(oracle, base, *outputs)
    code, out = run_job(spec)
    outputs.append(out)
    assert code == 0 and "JOB DONE" in out, out[-5000:]

    assert_exactly_once(oracle, base, *outputs)
    if kill_in_clean_up:
        assert "records that this job" in out, out[-5000:]
    if id_column == "row_hash":
        hashes = column_counts(oracle, f"{base}/out", "row_hash")
        assert len(hashes) == FILES * ROWS_PER_FILE and set(hashes.values()) == {1}
    # Success deleted the checkpoint's files (Ray's delete_checkpoint_on_success).
    assert files(oracle, f"{base}/ckpt") == []


def local_model_job(tmp_path, **extra):
    """The job of ray_job.py on local disk (input written by pyarrow under
    `tmp_path`), with cairn's manager and `extra` in its spec: (spec,
    pyarrow's local filesystem, base path)."""
    base = str(tmp_path)
    oracle = pafs.LocalFileSystem()
    os.makedirs(f"{base}/in")
    write_input(oracle, f"{base}/in")
    spec = {
        "input": f"{base}/in",
        "output": f"{base}/out",
        "checkpoint": f"{base}/ckpt",
        "storage_options": {},
        "id_column": "uid",
        "manager": "cairn",
        **extra,
    }
    return spec, oracle, base


@pytest.mark.parametrize("shape", ["cpus", "gpu"])
def test_a_resume_beside_a_model_pool_that_takes_the_cpus_ends(tmp_path, shape):
    """A model-shaped job on one node of 2 CPUs: its transform is a class
    on an actor pool of one actor that holds a CPU (and, "gpu", the node's
    one GPU, as Ray Data gives a GPU actor a CPU too). Killed after 4 units
    and run again: Ray Data gives each filter actor a CPU by default, which
    left the reads none, and the resume waited for ever. cairn's filter
    actors ask for no CPU; the resume ends, every input row once. Local
    disk: the wait is the cluster's, not the store's."""
    spec, oracle, base = local_model_job(
        tmp_path,
        sleep=0.5,
        model_pool={"size": 1, **({"num_gpus": 1, "batch_size": 1000} if shape == "gpu" else {})},
        node={"num_cpus": 2, **({"num_gpus": 1} if shape == "gpu" else {})},
    )
    code, first = run_job(spec, kill_when=lambda: len(committed_units(oracle, f"{base}/ckpt")) >= 4)
    assert code == -signal.SIGKILL, f"the job was not killed (exit {code}):\n{first[-3000:]}"
    spec["sleep"] = 0
    try:
        code, out = run_job(spec, timeout=150)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the resume did not end within 150 s: {e}")
    assert code == 0 and "JOB DONE" in out, out[-5000:]
    assert_exactly_once(oracle, base, first, out)


def test_actor_pools_that_leave_no_room_for_a_read_are_named(tmp_path):
    """A resume whose own actor pool (two 1-CPU model actors on a node of 2
    CPUs) leaves no CPU for a read: Ray would wait for ever, and the
    manager says so before the job starts, with the numbers and what to
    change (a warning: an autoscaler Ray cannot see may still add nodes).
    The harness stops the job once the warning is out."""
    spec, _, base = local_model_job(
        tmp_path, model_pool={"size": 2, "num_cpus": 1}, node={"num_cpus": 2}
    )
    # One unit committed by hand, in Ray's layout: the resume has a set.
    for d in ("ckpt", "out"):
        os.makedirs(f"{base}/{d}")
    first = pq.read_table(f"{base}/in/part-0000.parquet")
    pq.write_table(first.select(["uid"]), f"{base}/ckpt/w_000001.parquet")
    pq.write_table(first, f"{base}/out/w_000001-0.parquet")
    proc = start_job(spec)
    lines = []
    try:
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            lines.append(line)
            if "unless the cluster adds nodes" in line or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    out = "".join(lines)
    assert re.search(
        r"2 MapBatches\(Model\) actors of 1 CPU, 1 checkpoint filter actors of 1024 MiB, "
        r"and one read task of 1 CPU beside them.*2 CPU.*Ray will wait for ever.*concurrency",
        out,
    ), out[-4000:]


def run_job_then_terminate(spec, timeout=300):
    """Runs ray_job.py, and 2 s after its driver reports its next step
    (the job done) sends SIGTERM to the driver alone, as an orchestrator
    stopping it politely does; then ends what is left of its process group.
    Returns (exit code, output)."""
    proc = start_job(spec)
    lines = []
    try:
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            lines.append(line)
            if "NEXT STEP" in line:
                time.sleep(2)
                proc.send_signal(signal.SIGTERM)
                break
            if time.monotonic() > deadline:
                break
        out, _ = proc.communicate(timeout=60)
        lines.append(out)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, "".join(lines)


@pytest.mark.parametrize("after", ["raise", "sigterm"])
def test_a_driver_that_fails_after_its_job_is_not_run_twice(s3, after):
    """The job succeeds, then the driver's next step raises, or the driver
    is stopped with SIGTERM while it runs; the orchestrator runs the whole
    script again: the completion marker outlived the unclean exit, so the
    second run writes nothing (before: every row a second time)."""
    next_step = {"raise": "raise", "sigterm": "wait"}[after]
    spec, oracle, base = job_spec(s3, f"after-{after}", "uid", sleep=0, after_done=next_step)
    if after == "raise":
        code, first = run_job(spec)
        assert code == 1 and "the step after the job failed" in first, first[-3000:]
    else:
        code, first = run_job_then_terminate(spec)
        assert code not in (0, None) and "NEXT STEP" in first, f"exit {code}:\n{first[-3000:]}"
    assert_exactly_once(oracle, base, first)
    left = files(oracle, f"{base}/ckpt")
    assert any(p.endswith("/.cairn-complete") for p in left), (left, first[-3000:])
    del spec["after_done"]
    code, again = run_job(spec)
    assert code == 0 and "JOB DONE" in again, again[-5000:]
    assert "records that this job" in again, again[-5000:]
    assert_exactly_once(oracle, base, first, again)
    # A clean end removes the marker: nothing of the checkpoint is left.
    assert files(oracle, f"{base}/ckpt") == []


@pytest.mark.parametrize("reader", ["ray", "cairn"])
def test_a_finished_job_over_other_input_is_refused(s3, reader):
    """The job succeeds and its driver dies before its exit handler
    (os._exit), leaving the completion marker; 2 new input files are added
    and the same command run again: it is refused, naming both inputs, and
    writes nothing (before: exit 0, nothing written, the new files' rows
    lost). With the new files gone again, the input is the finished job's:
    the run writes nothing and ends the clean-up. Read by Ray's
    read_parquet (its ListFiles) and by cairn's (a datasource's Read)."""
    spec, oracle, base = job_spec(
        s3, f"reused-{reader}", "uid", sleep=0, die_after_done=True, reader=reader
    )
    code, first = run_job(spec)
    assert code == 137 and "JOB DONE" in first, f"exit {code}:\n{first[-3000:]}"
    marker = f"{base}/ckpt/.cairn-complete"
    assert marker in files(oracle, f"{base}/ckpt"), first[-3000:]
    written = column_counts(oracle, f"{base}/out", "uid")
    added = [f"{base}/in/part-{f:04}.parquet" for f in (FILES, FILES + 1)]
    for n, path in enumerate(added):
        start = (FILES + n) * ROWS_PER_FILE
        uids = range(start, start + ROWS_PER_FILE)
        table = pa.table({"uid": pa.array(uids, pa.int64()), "text": [f"row {i}" for i in uids]})
        pq.write_table(table, path, filesystem=oracle)
    del spec["die_after_done"]
    code, again = run_job(spec)
    assert code != 0 and "finished over other input" in again, f"exit {code}:\n{again[-5000:]}"
    assert f"{FILES} files" in again and f"{FILES + 2} files" in again, again[-5000:]
    assert column_counts(oracle, f"{base}/out", "uid") == written
    assert marker in files(oracle, f"{base}/ckpt")
    for path in added:
        oracle.delete_file(path)
    code, third = run_job(spec)
    assert code == 0 and "records that this job" in third, third[-5000:]
    assert_exactly_once(oracle, base, first, again, third)
    assert files(oracle, f"{base}/ckpt") == []


@pytest.mark.parametrize("id_column", kinds("uid"))
def test_a_partitioned_write_killed_and_resumed_ends_exactly_once(s3, id_column):
    """`write_parquet(partition_cols=["source"])` with cairn's manager: the
    driver killed once 3 units are committed (their files spread over the
    partition directories, with unfinished units' files beside them), then
    run again. pyarrow's hive-partitioned reader finds every input row
    once, under its own partition value (escaped as pyarrow escapes it)."""
    import pyarrow.dataset as pads

    sources = ["web", "a/b=c", "100%", "é x"]
    spec, oracle, base = job_spec(
        s3, "partitioned", id_column, sleep=1.0, partition_cols=["source"]
    )

    def some_committed():
        return len(committed_units(oracle, f"{base}/ckpt")) >= 3

    code, first = run_job(spec, kill_when=some_committed)
    assert code == -signal.SIGKILL, f"the job was not killed (exit {code}):\n{first[-3000:]}"
    spec["sleep"] = 0
    code, out = run_job(spec)
    assert code == 0 and "JOB DONE" in out, out[-5000:]
    assert_exactly_once(oracle, base, first, out)
    table = pads.dataset(f"{base}/out", filesystem=oracle, partitioning="hive").to_table(
        columns=["uid", "source"]
    )
    misplaced = [
        row for row in table.to_pylist() if row["source"] != sources[row["uid"] % len(sources)]
    ]
    assert table.num_rows == FILES * ROWS_PER_FILE and not misplaced, misplaced[:5]
    below = [p.split("/out/", 1)[1] for p in files(oracle, f"{base}/out")]
    directories = {p.split("/", 1)[0] for p in below if "/" in p}
    assert directories == {"source=web", "source=a%2Fb%3Dc", "source=100%25", "source=%C3%A9%20x"}
    # Beside them, only the record of the finished job.
    assert [p for p in below if "/" not in p] == ["_cairn_job.json"]
    assert committed_units(oracle, f"{base}/ckpt") == []


@pytest.mark.parametrize("id_column", ["uid", "row_hash"])
def test_a_resume_with_cairns_reader_reads_only_what_is_not_committed(s3, id_column):
    """A first job commits 15 of the 16 input files (the checkpoint kept);
    the same job over the whole input with
    cairn.ray.read_parquet leaves the 15 files' row groups out of the read
    (on Garage, where row_hash IDs hash `bucket/key` paths) and writes the
    last file's rows: every uid once."""
    spec, oracle, base = job_spec(s3, "skip", id_column, sleep=0)
    inputs = [f"s3://{base}/in/part-{f:04}.parquet" for f in range(FILES - 1)]
    # The first job reads through cairn's reader too (nothing committed yet:
    # it reads all, as Ray's does): Ray 2.60's own reader, given a list of
    # files on a filesystem fsspec serves, lists them on threads that race
    # importing fsspec's HTTP module and fail when aiohttp is not installed.
    first_spec = {**spec, "input": inputs, "reader": "cairn", "delete_checkpoint_on_success": False}
    code, first = run_job(first_spec)
    assert code == 0 and "JOB DONE" in first, first[-5000:]
    assert committed_units(oracle, f"{base}/ckpt"), first[-5000:]

    code, out = run_job({**spec, "reader": "cairn"})
    assert code == 0 and "JOB DONE" in out, out[-5000:]
    skipped = f"leaves out {FILES - 1} of {FILES} row groups"
    assert skipped in out, out[-5000:]
    assert_exactly_once(oracle, base, first, out)
    if id_column == "row_hash":
        hashes = column_counts(oracle, f"{base}/out", "row_hash")
        assert len(hashes) == FILES * ROWS_PER_FILE and set(hashes.values()) == {1}


def write_ids(oracle, path, ids):
    pq.write_table(pa.table({"uid": pa.array(ids, pa.int64())}), path, filesystem=oracle)


def write_rows(oracle, path, ids):
    text = [f"row {i}" for i in ids]
    pq.write_table(
        pa.table({"uid": pa.array(ids, pa.int64()), "text": pa.array(text)}),
        path,
        filesystem=oracle,
    )


# Ray's own manager here records Ray's bug, not cairn's behaviour: it runs
# with CAIRN_RAY_ALL_KINDS=1 (skipped, and shown as such, in CI's run).
RAYS_OWN = pytest.mark.skipif(
    not ALL_KINDS, reason="Ray's own manager's prefix bug, recorded: CAIRN_RAY_ALL_KINDS=1 runs it"
)


@pytest.mark.parametrize("manager", ["cairn", pytest.param("ray", marks=RAYS_OWN)])
def test_a_pending_unit_named_by_a_prefix_of_a_committed_one(s3, manager):
    """Task numbers pass 999,999: the pending unit `w_100000` is a prefix of
    the committed unit `w_1000000`. Rolling back the pending unit must keep
    the committed unit's data. cairn's manager does; Ray 2.60's own manager
    deletes it (its prefix trie), and those rows are lost: the test records
    that too, so a Ray that fixes it shows up here."""
    options, oracle, bucket = s3
    base = f"{bucket}/ray-prefix-{manager}-{uuid.uuid4().hex[:10]}"
    ids = list(range(FILES * ROWS_PER_FILE))
    write_input(oracle, f"{base}/in")
    committed, pending = ids[:ROWS_PER_FILE], ids[ROWS_PER_FILE : 2 * ROWS_PER_FILE]
    write_ids(oracle, f"{base}/ckpt/w_1000000.parquet", committed)
    write_rows(oracle, f"{base}/out/w_1000000-0.parquet", committed)
    write_ids(oracle, f"{base}/ckpt/w_100000.pending.parquet", pending)
    write_rows(oracle, f"{base}/out/w_100000-0.parquet", pending)
    spec = {
        "input": f"s3://{base}/in",
        "output": f"s3://{base}/out",
        "checkpoint": f"s3://{base}/ckpt",
        "storage_options": options,
        "id_column": "uid",
        "manager": manager,
    }
    code, out = run_job(spec)
    assert code == 0 and "JOB DONE" in out, out[-5000:]
    counts = column_counts(oracle, f"{base}/out", "uid")
    kept = f"{base}/out/w_1000000-0.parquet" in files(oracle, f"{base}/out")
    if manager == "cairn":
        assert kept, "cairn deleted a committed unit's data"
        assert set(counts) == set(ids) and set(counts.values()) == {1}
    else:
        lost = set(ids) - set(counts)
        assert not kept and lost == set(committed), (
            "Ray's manager no longer deletes the committed unit's data: "
            f"kept={kept}, lost={len(lost)} rows"
        )


def test_bad_configurations_are_clear_errors(s3, tmp_path):
    import cairn
    import cairn.ray
    from ray.data.checkpoint import CheckpointConfig

    options, _, bucket = s3
    # Anything but cairn's filesystem as override_filesystem: refused, saying what to pass.
    for wrong in ["s3://bucket", pafs.S3FileSystem(access_key="a", secret_key="b")]:
        with pytest.raises(TypeError, match="build_checkpoint_filesystem"):
            cairn.ray.checkpoint_config("uid", f"s3://{bucket}/x", override_filesystem=wrong)
    # A CairnFileSystem itself is wrapped for pyarrow (Ray requires one).
    wrapped = cairn.ray.checkpoint_config(
        "uid", f"s3://{bucket}/x", override_filesystem=cairn.CairnFileSystem("s3", **options)
    )
    assert isinstance(wrapped.filesystem, pafs.PyFileSystem)
    # cairn's manager needs cairn's checkpoint filesystem, and says how.
    config = CheckpointConfig(
        id_column="uid",
        checkpoint_path=f"s3://{bucket}/x",
        override_filesystem=pafs.S3FileSystem(
            access_key="a", secret_key="b", endpoint_override="http://127.0.0.1:9"
        ),
        checkpoint_manager_cls=cairn.ray.CheckpointManager,
    )
    manager = cairn.ray.CheckpointManager(checkpoint_config=config, data_context=None)
    with pytest.raises(ValueError, match="build_checkpoint_filesystem"):
        manager.load_checkpoint(f"s3://{bucket}/out", None)
    # A wrong secret: PermissionError naming no secret, as the config makes
    # the checkpoint directory.
    bad = dict(options, secret="not-the-secret")
    with pytest.raises(PermissionError) as e:
        cairn.ray.checkpoint_config("uid", f"s3://{bucket}/ckpt-bad", bad)
    assert "not-the-secret" not in str(e.value)
    # A checkpoint bound to another output.
    ckpt = str(tmp_path / "ckpt")
    config = cairn.ray.checkpoint_config("uid", ckpt)
    first = cairn.ray.CheckpointManager(checkpoint_config=config, data_context=None)
    assert os.path.isdir(ckpt), "checkpoint_config makes the checkpoint directory"
    write_ids(pafs.LocalFileSystem(), f"{ckpt}/w_000001.parquet", [1, 2])
    os.makedirs(tmp_path / "out-a")
    write_rows(pafs.LocalFileSystem(), str(tmp_path / "out-a" / "w_000001-0.parquet"), [1, 2])
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ref, size = first.load_checkpoint(str(tmp_path / "out-a"), pafs.LocalFileSystem())
        assert ref is not None and size > 0
        with pytest.raises(cairn.CheckpointError, match="out-a"):
            first.load_checkpoint(str(tmp_path / "out-b"), pafs.LocalFileSystem())
        # The filter drops committed rows, keeps order and null IDs.
        block = pa.table({"uid": pa.chunked_array([[5, 1], [None, 2, 3]], pa.int64())})
        kept = cairn.ray.CheckpointFilter(config, ref).filter_rows_for_block(block)
        assert kept["uid"].to_pylist() == [5, None, 3]
        # Output data of a committed unit gone: refused, nothing deleted.
        os.remove(tmp_path / "out-a" / "w_000001-0.parquet")
        with pytest.raises(cairn.CheckpointError, match="w_000001"):
            first.load_checkpoint(str(tmp_path / "out-a"), pafs.LocalFileSystem())
        assert os.path.exists(f"{ckpt}/w_000001.parquet")
        # lease_ttl: at least 3 s; the lease the manager held carries it.
        with pytest.raises(ValueError, match="lease_ttl"):
            cairn.ray.checkpoint_config("uid", ckpt, lease_ttl=1)
        long_ckpt = str(tmp_path / "ckpt-long")
        config = cairn.ray.checkpoint_config("uid", long_ckpt, lease_ttl=600)
        manager = cairn.ray.CheckpointManager(checkpoint_config=config, data_context=None)
        os.makedirs(tmp_path / "out-long")
        assert manager.load_checkpoint(str(tmp_path / "out-long"), pafs.LocalFileSystem()) == (
            None,
            0,
        )
        leases = [n for n in os.listdir(long_ckpt) if n.startswith(".cairn-lease.")]
        assert len(leases) == 1, leases
        with open(os.path.join(long_ckpt, leases[0])) as f:
            held = json.load(f)
        assert held["ttl_secs"] == 600 and held["released"], held
    finally:
        ray.shutdown()


def test_the_set_is_used_in_place_and_keeps_its_memory_alive():
    import gc

    import numpy as np

    from cairn._native import NativeIdSet

    ids = pa.array(np.arange(0, 2_000_000, 7, dtype=np.int64) * 104729)
    owned = NativeIdSet.from_bytes(serialized_id_set(ids))
    array = np.frombuffer(serialized_id_set(ids), dtype=np.uint8)
    shared = NativeIdSet._from_shared_memory(array)
    del array
    gc.collect()
    assert len(shared) == len(owned) == len(ids)
    assert shared.memory_bytes() < owned.memory_bytes() / 4, "the keys are read in place"
    probe = pa.array([0, 104729 * 7, 5, None], pa.int64())
    assert shared.uncommitted(probe).to_pylist() == [False, False, True, True]


def _set_bytes():
    import numpy as np

    ids = pa.array(np.arange(0, 2_000_000, 7, dtype=np.int64) * 104729)
    return serialized_id_set(ids), len(ids)


def test_shared_memory_is_read_in_place_only_when_it_cannot_change():
    import numpy as np

    from cairn._native import NativeIdSet

    data, count = _set_bytes()
    owned = NativeIdSet.from_bytes(data)
    in_place = NativeIdSet._from_shared_memory(np.frombuffer(data, dtype=np.uint8))
    assert len(in_place) == count
    assert in_place.memory_bytes() < owned.memory_bytes() / 4, "bytes are immutable: in place"
    writable = np.frombuffer(bytearray(data), dtype=np.uint8)
    copied = NativeIdSet._from_shared_memory(writable)
    writable[:] = 0  # the caller scribbles over its array: the set has its own copy
    assert len(copied) == count
    assert copied.memory_bytes() >= owned.memory_bytes() / 2, "writable memory is copied"
    probe = pa.array([0, 104729 * 7, 5], pa.int64())
    assert copied.uncommitted(probe).to_pylist() == [False, False, True]
    frozen = np.array(np.frombuffer(data, dtype=np.uint8))
    frozen.flags.writeable = False  # owns its memory: it can be made writable again
    assert NativeIdSet._from_shared_memory(frozen).memory_bytes() >= owned.memory_bytes() / 2


def test_shared_memory_refuses_what_is_not_a_byte_array():
    import numpy as np

    from cairn._native import NativeIdSet

    data, _ = _set_bytes()
    with pytest.raises(TypeError, match="numpy.ndarray"):
        NativeIdSet._from_shared_memory(data)
    with pytest.raises(TypeError):
        NativeIdSet._from_shared_memory(12345)  # an address from pure Python: never read
    with pytest.raises(ValueError, match="uint8"):
        NativeIdSet._from_shared_memory(np.frombuffer(data, dtype=np.uint32))
    strided = np.frombuffer(data + data, dtype=np.uint8)[::2]
    with pytest.raises(ValueError, match="contiguous"):
        NativeIdSet._from_shared_memory(strided)
