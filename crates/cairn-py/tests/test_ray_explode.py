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
  later run.

Without ``skip_committed``'s filter (its step returning every row) a
resume writes the committed shots again: the first check fails."""

import collections
import os
import random

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow.dataset as pads  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402

from oracle import data_files, write_uid_files  # noqa: E402
from test_ray import committed_units, run_job  # noqa: E402

#: Drawn cases in CI (scripts/bench/explode.sh-style runs take more:
#: CAIRN_EXPLODE_CASES=N).
CASES = int(os.environ.get("CAIRN_EXPLODE_CASES", "2"))
FILES = 6
ROWS_PER_FILE = 40


def keys_in(oracle, out):
    """How often each (video, shot_idx) is in the output's data files."""
    paths = [p for p in data_files(oracle, out) if p.endswith(".parquet")]
    if not paths:
        return collections.Counter()
    table = pads.dataset(paths, filesystem=oracle).to_table(columns=["video", "shot_idx"])
    return collections.Counter(zip(table["video"].to_pylist(), table["shot_idx"].to_pylist()))


def calls_of(calls_dir, run):
    """The keys the expensive stage processed in run `run`."""
    found = collections.Counter()
    directory = os.path.join(calls_dir, str(run))
    if not os.path.isdir(directory):
        return found
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
    fanout = [rng.choice([0, 1, 3, rng.randint(0, 50)]) for _ in range(17)]
    kills = rng.randint(1, 3)
    base = str(tmp_path)
    oracle = pafs.LocalFileSystem()
    os.makedirs(f"{base}/in")
    write_uid_files(oracle, f"{base}/in", FILES, ROWS_PER_FILE)
    calls_dir = f"{base}/calls"
    spec = {
        "input": f"{base}/in",
        "output": f"{base}/out",
        "checkpoint": f"{base}/ckpt",
        "storage_options": {},
        "id_column": ["video", "shot_idx"],
        "manager": "cairn",
        "sleep": 0.2,
        "delete_checkpoint_on_success": True,
    }
    explode = {
        "fanout": fanout,
        "calls_dir": calls_dir,
        "pool": pool,
        "batch_size": rng.choice([7, 32]),
        "block_bytes": rng.choice([2048, 8192]),
    }
    expected = {
        (f"v{uid:06}", i)
        for uid in range(FILES * ROWS_PER_FILE)
        for i in range(fanout[uid % len(fanout)])
    }
    described = f"case {case}: pool={pool} kills={kills} fanout={fanout} {explode}"
    outputs, snapshots = [], []
    for run in range(kills):
        before = len(committed_units(oracle, f"{base}/ckpt"))
        step = rng.randint(1, 4)
        code, out = run_job(
            dict(spec, explode=dict(explode, run=run)),
            kill_when=lambda: len(committed_units(oracle, f"{base}/ckpt")) >= before + step,
        )
        outputs.append(out)
        snapshots.append(set(data_files(oracle, f"{base}/out")))
    code, out = run_job(dict(spec, explode=dict(explode, run=kills)))
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
        kept = sorted(snapshot & final)
        if not kept:
            continue
        table = pads.dataset(kept, filesystem=oracle).to_table(columns=["video", "shot_idx"])
        committed = set(zip(table["video"].to_pylist(), table["shot_idx"].to_pylist()))
        later = collections.Counter()
        for run in range(k + 1, kills + 1):
            later.update(calls_of(calls_dir, run))
        again = committed & set(later)
        assert not again, (
            f"{described}: {len(again)} shots committed before kill {k} were processed again "
            f"(e.g. {sorted(again)[:5]})\n{tail}"
        )
