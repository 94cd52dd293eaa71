"""A finished job run again (issue 64): the same script twice, as a cron
entry, a notebook cell or an orchestrator's retry runs it. Under cairn's
manager the first run leaves a record beside its files
(``_cairn_job.json``); a table's own rows are its record. The same job run
again writes nothing; over other input, only the rows whose IDs the output
does not hold (a run killed midway and resumed included); files no cairn
job recorded are refused; ``existing_output='append'`` and
``mode='overwrite'`` run it again on purpose. Judged by pyarrow (files) and
deltalake (a Delta table), never by cairn. Runs in the Ray virtualenv."""

import collections
import os

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from oracle import column_counts, files  # noqa: E402
from test_ray import (  # noqa: E402
    FILES,
    ROWS_PER_FILE,
    committed_units,
    job_spec,
    local_model_job,
    ranges,
    run_job,
    s3,  # noqa: F401 - the fixture
)

NEW_FILES = 2


def add_input(oracle, directory, first_file, count):
    """`count` more input files, continuing the uids of write_uid_files."""
    for f in range(first_file, first_file + count):
        uids = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        table = pa.table({"uid": pa.array(uids, pa.int64()), "text": [f"row {i}" for i in uids]})
        pq.write_table(table, f"{directory}/part-{f:04}.parquet", filesystem=oracle)


def check_counts(counts, files_in, times, *outputs):
    """Every uid of the first `files_in` input files `times` times in
    `counts`, and no other."""
    expected = set(range(files_in * ROWS_PER_FILE))
    wrong = {k for k in expected if counts.get(k, 0) != times} | (set(counts) - expected)
    if wrong:
        jobs = "\n".join(f"--- job output {n}:\n{out[-4000:]}" for n, out in enumerate(outputs))
        pytest.fail(f"not {times}x: {len(wrong)} uids ({ranges(wrong)})\n{jobs}")


def test_a_parquet_job_run_again_writes_every_row_once(s3):  # noqa: F811
    """On Garage: run 1 finishes cleanly; run 2, the same script, writes
    nothing and says so; with 2 files added, run 3 is killed midway and
    run 4 resumes it: each input row once (before: run 2 alone wrote every
    row a second time). Then the explicit path: existing_output='append'
    adds every row again, as it says."""
    spec, oracle, base = job_spec(s3, "rerun", "uid", sleep=0)
    out = f"{base}/out"
    code, first = run_job(spec)
    assert code == 0 and "JOB DONE" in first, first[-3000:]
    record = f"{out}/_cairn_job.json"
    assert record in files(oracle, out), first[-3000:]
    data_files = [p for p in files(oracle, out) if p != record]

    code, second = run_job(spec)
    assert code == 0 and "JOB DONE" in second, second[-3000:]
    assert "this job already finished" in second, second[-3000:]
    assert [p for p in files(oracle, out) if p != record] == data_files
    check_counts(column_counts(oracle, out, "uid"), FILES, 1, first, second)

    add_input(oracle, f"{base}/in", FILES, NEW_FILES)
    code, third = run_job(
        dict(spec, sleep=1.0),
        kill_when=lambda: len(committed_units(oracle, f"{base}/ckpt")) >= 1,
    )
    assert code != 0, third[-3000:]
    code, fourth = run_job(spec)
    assert code == 0 and "JOB DONE" in fourth, fourth[-3000:]
    check_counts(column_counts(oracle, out, "uid"), FILES + NEW_FILES, 1, third, fourth)
    assert files(oracle, f"{base}/ckpt") == []

    code, fifth = run_job(dict(spec, existing_output="append"))
    assert code == 0 and "JOB DONE" in fifth, fifth[-3000:]
    check_counts(column_counts(oracle, out, "uid"), FILES + NEW_FILES, 2, fifth)


def local_spec(tmp_path, **extra):
    """test_ray's local job (input written by pyarrow, cairn's manager),
    with no pause in its transform unless `extra` gives one."""
    return local_model_job(tmp_path, **{"sleep": 0, **extra})


def test_files_no_job_recorded_are_refused_and_overwrite_replaces(tmp_path):
    """An output holding a file cairn did not record is refused before
    anything is written, saying what to do; mode='overwrite' replaces it
    (every row once, the foreign file gone); and mode='overwrite' on a
    resume, which would delete committed rows, is refused."""
    spec, oracle, base = local_spec(tmp_path)
    os.makedirs(f"{base}/out")
    foreign = f"{base}/out/earlier.parquet"
    pq.write_table(pa.table({"uid": pa.array([0, 1], pa.int64()), "text": ["a", "b"]}), foreign)
    code, refused = run_job(spec)
    assert code != 0 and "no cairn job recorded" in refused, refused[-3000:]
    assert "existing_output='append'" in refused and "earlier.parquet" in refused
    assert files(oracle, f"{base}/out") == [foreign]

    code, replaced = run_job(dict(spec, mode="overwrite"))
    assert code == 0 and "JOB DONE" in replaced, replaced[-3000:]
    check_counts(column_counts(oracle, f"{base}/out", "uid"), FILES, 1, replaced)
    assert foreign not in files(oracle, f"{base}/out")

    # A run killed with units committed, resumed with mode='overwrite'.
    other = f"{base}/out2"
    spec2 = dict(spec, output=other, checkpoint=f"{base}/ckpt2", sleep=1.0)
    code, killed = run_job(
        spec2, kill_when=lambda: len(committed_units(oracle, f"{base}/ckpt2")) >= 1
    )
    kept = column_counts(oracle, other, "uid")
    assert kept, killed[-3000:]
    code, refused = run_job(dict(spec2, mode="overwrite", sleep=0))
    assert code != 0 and "mode='overwrite' would delete" in refused, refused[-3000:]
    assert column_counts(oracle, other, "uid") == kept
    code, resumed = run_job(dict(spec2, sleep=0))
    assert code == 0, resumed[-3000:]
    check_counts(column_counts(oracle, other, "uid"), FILES, 1, killed, resumed)


def delta_uids(path):
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table(columns=["uid"])
    return collections.Counter(table["uid"].to_pylist())


def test_a_delta_job_run_again_writes_every_row_once(tmp_path):
    """Into a Delta table, through Ray's CheckpointConfig built by hand with
    cairn's manager, filter and filesystem, on a checkpoint path that does
    not exist yet: run 1 finishes cleanly; run 2, the same script, commits
    nothing (the table's version stays); with 2 files added, run 3 commits
    their rows only. Judged by deltalake. Then existing_output='append'
    (through cairn.ray.checkpoint_config) adds every row again.

    Ray skips the manager of a missing checkpoint: before cairn's planning
    made the directory, no clean-up was registered for a hand-built config
    (Ray deleted the checkpoint before the committer's last flush) and run
    2 wrote every row a second time."""
    pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake")
    from deltalake import DeltaTable

    spec, oracle, base = local_spec(
        tmp_path, sink="delta", output=f"{tmp_path}/table", manager="cairn-by-hand"
    )
    assert not os.path.exists(spec["checkpoint"])
    table = f"{base}/table"
    code, first = run_job(spec)
    assert code == 0 and "JOB DONE" in first, first[-3000:]
    check_counts(delta_uids(table), FILES, 1, first)
    version = DeltaTable(table).version()

    code, second = run_job(spec)
    assert code == 0 and "JOB DONE" in second, second[-3000:]
    assert "holds rows already" in second, second[-3000:]
    assert DeltaTable(table).version() == version, second[-3000:]
    check_counts(delta_uids(table), FILES, 1, first, second)

    add_input(oracle, f"{base}/in", FILES, NEW_FILES)
    code, third = run_job(spec)
    assert code == 0 and "JOB DONE" in third, third[-3000:]
    check_counts(delta_uids(table), FILES + NEW_FILES, 1, third)

    code, fourth = run_job(dict(spec, manager="cairn", existing_output="append"))
    assert code == 0 and "JOB DONE" in fourth, fourth[-3000:]
    check_counts(delta_uids(table), FILES + NEW_FILES, 2, fourth)


def test_a_rerun_of_a_finished_job_killed_midway_still_writes_nothing(tmp_path):
    """Run 1 finishes; run 2, the same job, is SIGKILLed while it reads
    (its checkpoint then holds a job record, so it is no longer new); run 3
    writes nothing either: the verdict is kept in the job record, and the
    output's IDs are read back (before the verdict was kept, run 3 wrote
    every row a second time)."""
    spec, oracle, base = local_spec(tmp_path)
    code, first = run_job(spec)
    assert code == 0 and "JOB DONE" in first, first[-3000:]
    record = f"{base}/ckpt/.cairn-job.json"
    code, killed = run_job(dict(spec, sleep=1.0), kill_when=lambda: os.path.exists(record))
    assert code != 0 and os.path.exists(record), killed[-3000:]
    code, third = run_job(spec)
    assert code == 0 and "JOB DONE" in third, third[-3000:]
    check_counts(column_counts(oracle, f"{base}/out", "uid"), FILES, 1, first, killed, third)
