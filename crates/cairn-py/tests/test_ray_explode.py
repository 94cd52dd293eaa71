"""A 1:N job in one Ray job (issue 60): each input row (a video) becomes 0
to 50 shots keyed by the composite key ``["video", "shot_idx"]``;
``cairn.ray.skip_committed`` after the explode drops the committed shots
before the expensive stage, which logs the keys of each call to a file of
its own. Blocks are small, so one video's shots land in several units.
Each drawn case SIGKILLs the driver's process group up to three times at
drawn instants, then runs the job to its end. Judged by pyarrow reading
the output and by the call logs, never by cairn:

- every (video, shot_idx) the input makes is in the output exactly once;
- no shot whose data file was in the output when a run was killed (and
  is there at the end, so its unit was committed) is processed by a
  later run;
- with source lineage (the key ``["uid", "shot_idx"]``,
  ``source_column="uid"``, ``fan_out_column="n_shots"``; a video with no shots is one row of count
  0, not written), no video all of whose shots were committed when a run
  was killed is exploded by a later run (each explode call logs its
  video);
- with source lineage, cairn's reader leaves unread the row groups (one
  video each) of at least the videos all of whose shots were committed
  when the run before was killed (its "leaves out N of M row groups");
- the finished job run again explodes and processes nothing.

Without ``skip_committed``'s filter (its step returning every row) a
resume writes the committed shots again: the first check fails."""

import collections
import os
import random
import re

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow.dataset as pads  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402

from oracle import data_files, write_uid_files  # noqa: E402
from test_ray import committed_units, run_job  # noqa: E402

#: Drawn cases in CI (more by hand: CAIRN_EXPLODE_CASES=N): case 0 a task
#: pool, case 1 an actor pool with lineage, case 2 a task pool with
#: lineage, and so on.
CASES = int(os.environ.get("CAIRN_EXPLODE_CASES", "3"))
FILES = 12
ROWS_PER_FILE = 20
#: One read task a file: the units then commit as the job goes (with the
#: files packed into one read task, Ray wrote the whole job in one unit at
#: its end, and no kill landed midway).
ONE_READ_A_FILE = {"RAY_DATA_PARQUET_BIN_PACKING_BYTES": "1024"}


def keys_of(oracle, paths):
    """How often each (video, shot_idx) is in the Parquet files `paths`."""
    paths = [p for p in paths if p.endswith(".parquet")]
    if not paths:
        return collections.Counter()
    table = pads.dataset(paths, filesystem=oracle).to_table(columns=["video", "shot_idx"])
    return collections.Counter(zip(table["video"].to_pylist(), table["shot_idx"].to_pylist()))


def keys_in(oracle, out):
    """How often each (video, shot_idx) is in the output's data files."""
    return keys_of(oracle, data_files(oracle, out))


def explodes_of(calls_dir, runs):
    """The videos exploded in the runs `runs`."""
    found = collections.Counter()
    for run in runs:
        directory = os.path.join(calls_dir, f"explode-{run}")
        if os.path.isdir(directory):
            found.update(name.split("-")[0] for name in os.listdir(directory))
    return found


def calls_of(calls_dir, runs):
    """The keys the expensive stage processed in the runs `runs`."""
    found = collections.Counter()
    for run in runs:
        directory = os.path.join(calls_dir, str(run))
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            with open(os.path.join(directory, name)) as f:
                for line in f.read().splitlines():
                    video, idx = line.split(" ")
                    found[(video, int(idx))] += 1
    return found


@pytest.mark.parametrize("case", range(CASES))
def test_a_1_to_n_job_killed_and_resumed_writes_each_shot_once(tmp_path, case):
    rng = random.Random(f"explode-{case}")
    pool = ("tasks", "actors")[case % 2]
    lineage = case % 3 != 0
    fanout = [rng.choice([0, 1, 3, rng.randint(0, 50)]) for _ in range(17)]
    kills = rng.randint(1, 3)
    base = str(tmp_path)
    oracle = pafs.LocalFileSystem()
    os.makedirs(f"{base}/in")
    # A row group a video under lineage: cairn's reader can leave each
    # complete video unread.
    write_uid_files(
        oracle, f"{base}/in", FILES, ROWS_PER_FILE, row_group_size=1 if lineage else None
    )
    calls_dir = f"{base}/calls"
    spec = {
        "input": f"{base}/in",
        "output": f"{base}/out",
        "checkpoint": f"{base}/ckpt",
        "storage_options": {},
        # With lineage the source column must be in the rows the read
        # gives: the input's uid (an integer key); else the video's name
        # the explode makes (a string key).
        "id_column": ["uid", "shot_idx"] if lineage else ["video", "shot_idx"],
        "manager": "cairn",
        "sleep": 0.5,
        "delete_checkpoint_on_success": True,
        # Case 2 keeps the IDs' bytes; the others their fingerprints.
        "exact_ids": case % 3 == 2,
        # cairn's reader under lineage (the read is filtered by the
        # complete sources); Ray's otherwise.
        "reader": "cairn" if lineage else "ray",
        "read_tasks": FILES,
    }
    explode = {
        "fanout": fanout,
        "calls_dir": calls_dir,
        "pool": pool,
        "batch_size": rng.choice([7, 32]),
        "block_bytes": rng.choice([2048, 8192]),
        "lineage": lineage,
    }
    expected = {
        (f"v{uid:06}", i)
        for uid in range(FILES * ROWS_PER_FILE)
        for i in range(fanout[uid % len(fanout)])
    }
    described = f"case {case}: pool={pool} lineage={lineage} kills={kills} {explode}"
    outputs, snapshots, codes = [], [], []
    for run in range(kills):
        before = len(committed_units(oracle, f"{base}/ckpt"))
        step = rng.randint(1, 4)
        code, out = run_job(
            dict(spec, explode=dict(explode, run=run)),
            kill_when=lambda: len(committed_units(oracle, f"{base}/ckpt")) >= before + step,
            env=ONE_READ_A_FILE,
        )
        outputs.append(out)
        codes.append(code)
        snapshots.append(set(data_files(oracle, f"{base}/out")))
        if run == 0:
            # The first kill lands midway, or the case proves nothing.
            assert code != 0 and len(keys_in(oracle, f"{base}/out")) < len(expected), (
                f"{described}: run 0 ended before its kill (exit {code}): make it slower"
            )
    code, out = run_job(dict(spec, explode=dict(explode, run=kills)), env=ONE_READ_A_FILE)
    outputs.append(out)
    tail = "\n".join(f"--- run {n}:\n{o[-2500:]}" for n, o in enumerate(outputs))
    assert code == 0 and "JOB DONE" in out, f"{described}\n{tail}"

    written = keys_in(oracle, f"{base}/out")
    twice = {k for k, n in written.items() if n != 1}
    missing = expected - set(written)
    extra = set(written) - expected
    assert not (twice or missing or extra), (
        f"{described}: {len(twice)} shots not once (e.g. {sorted(twice)[:5]}), "
        f"{len(missing)} missing (e.g. {sorted(missing)[:5]}), {len(extra)} unknown\n{tail}"
    )

    # A data file there when run k was killed, and still there at the end,
    # holds shots committed by then: no later run processes them again.
    final = set(data_files(oracle, f"{base}/out"))
    for k, snapshot in enumerate(snapshots):
        committed = set(keys_of(oracle, sorted(snapshot & final)))
        if not committed:
            continue
        later = range(k + 1, kills + 1)
        again = committed & set(calls_of(calls_dir, later))
        assert not again, (
            f"{described}: {len(again)} shots committed before kill {k} were processed again "
            f"(e.g. {sorted(again)[:5]})\n{tail}"
        )
        if lineage:
            shots_of = collections.Counter(video for video, _ in committed)
            whole = {v for v, n in shots_of.items() if n == fanout[int(v[1:]) % len(fanout)]}
            read_again = whole & set(explodes_of(calls_dir, later))
            assert not read_again, (
                f"{described}: {len(read_again)} videos all of whose shots were committed "
                f"before kill {k} were exploded again (e.g. {sorted(read_again)[:5]})\n{tail}"
            )
            # After a kill (not after a run that ended, whose next run
            # finds the job finished and reads nothing past the filter).
            left_out = re.search(r"leaves out (\d+) of (\d+) row groups", outputs[k + 1])
            unread = int(left_out.group(1)) if left_out else 0
            assert codes[k] == 0 or unread >= len(whole), (
                f"{described}: run {k + 1} left {unread} row groups unread, fewer than the "
                f"{len(whole)} videos all of whose shots were committed before kill {k}\n{tail}"
            )

    # The finished job run again: nothing read past the filter, nothing
    # processed, nothing written.
    code, again = run_job(dict(spec, explode=dict(explode, run=kills + 1)), env=ONE_READ_A_FILE)
    assert code == 0 and "JOB DONE" in again, f"{described}\n{again[-3000:]}"
    rerun = [kills + 1]
    assert not explodes_of(calls_dir, rerun) and not calls_of(calls_dir, rerun), (
        f"{described}: the finished job run again exploded or processed rows\n{again[-3000:]}"
    )
    assert keys_in(oracle, f"{base}/out") == written
