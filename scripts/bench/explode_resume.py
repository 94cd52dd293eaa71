"""A 1:N job killed at about half its expensive stage and resumed, two ways
on the same input in the same run (issue 60's benchmark):

    cairn   one job: cairn.ray.read_parquet -> detect (one video, 0-40 shots)
            -> cairn.ray.skip_committed -> score -> write_parquet, under
            cairn.ray.checkpoint_config(["uid", "shot_idx"], source_column="uid",
            fan_out_column="n_shots")
    ray     the seed's two-job recipe under Ray's default checkpoint manager:
            stage 1 (read videos -> detect -> write the shots' table,
            checkpointed on the video's uid), stage 2 (read the shots' table ->
            score -> write, checkpointed on shot_id). The kill lands in stage 2;
            its resume runs stage 2 only, as a script that remembers stage 1
            finished does (the recipe's most favourable case)

    explode_resume.py make ROOT SOURCES          the input: SOURCES videos (uid,
                                                 video, n_shots drawn 0-40, PAYLOAD
                                                 random bytes standing for the video)
                                                 in files of 500, row groups of 25
    explode_resume.py bench ROOT IMPL            one JSON line: IMPL run, SIGKILLed
                                                 (its process group) once score has
                                                 seen half the shots, then resumed
    explode_resume.py drive ROOT IMPL STAGE RUN  one driver (what `bench` starts)

Each driver starts its own single-node Ray (2 CPUs). detect sleeps DETECT_MS a
video and score SCORE_MS a shot (a model's time, not this machine's CPU);
each call leaves a file naming how many videos, shots and payload bytes it
saw, which is how calls are counted. Measured on the resume: videos detected,
shots scored, the compressed bytes of input row groups read (cairn: the videos'
row groups its reader did not leave out, from its log; Ray's recipe: every row
group of the shots' table, which Ray's reader reads whole before its filter),
its wall time, and the peak resident memory of the driver and of the largest
Ray worker (sampled every 0.2 s from /proc). Judged by pyarrow: each
(uid, shot_idx) once in the output.
"""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from ray_skip import row_group_bytes

FILE_ROWS = 500
ROW_GROUP_ROWS = 25
MAX_SHOTS = 40
PAYLOAD = int(os.environ.get("PAYLOAD", "4096"))
DETECT_MS = float(os.environ.get("DETECT_MS", "2"))
SCORE_MS = float(os.environ.get("SCORE_MS", "0.5"))
#: Rows a call: the same in both jobs, small enough that a kill lands
#: between calls of one input file's shots.
DETECT_BATCH = 25
SCORE_BATCH = 256


def make(root, sources):
    os.makedirs(f"{root}/in")
    rng = np.random.default_rng(60)
    shots = rng.integers(0, MAX_SHOTS + 1, size=sources)
    for f, start in enumerate(range(0, sources, FILE_ROWS)):
        uids = np.arange(start, min(start + FILE_ROWS, sources), dtype=np.int64)
        payload = [rng.bytes(PAYLOAD) for _ in uids]
        table = pa.table(
            {
                "uid": uids,
                "video": [f"v{u:06}" for u in uids],
                "n_shots": shots[uids].astype(np.int64),
                "payload": pa.array(payload, pa.binary()),
            }
        )
        pq.write_table(
            table, f"{root}/in/part-{f:04}.parquet", row_group_size=ROW_GROUP_ROWS
        )


def count_calls(directory):
    """(calls, videos, shots, payload bytes) of the call files in `directory`."""
    totals = [0, 0, 0, 0]
    if not os.path.isdir(directory):
        return totals
    for name in os.listdir(directory):
        with open(f"{directory}/{name}") as f:
            text = f.read()
        if not text:
            continue
        videos, shots, payload = (int(x) for x in text.split())
        totals[0] += 1
        totals[1] += videos
        totals[2] += shots
        totals[3] += payload
    return totals


def log_call(directory, videos, shots, payload):
    os.makedirs(directory, exist_ok=True)
    path = f"{directory}/{uuid.uuid4().hex}"
    with open(path + ".tmp", "w") as f:
        f.write(f"{videos} {shots} {payload}")
    os.rename(path + ".tmp", path)


def detect_fn(calls, lineage):
    """The 1:N step: a video's shots (a row of count 0 for a video with
    none, under cairn's lineage, which the sink does not write)."""

    def detect(batch):
        n = batch["n_shots"].to_numpy()
        time.sleep(DETECT_MS / 1000 * len(n))
        log_call(calls, len(n), 0, batch["payload"].nbytes)
        uids = batch["uid"].to_numpy()
        counts = np.where(n == 0, 1, n) if lineage else n
        rows = np.repeat(np.arange(len(n)), counts)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        idx = np.arange(len(rows)) - starts
        if lineage:
            idx = np.where(n[rows] == 0, -1, idx)
        video = batch["video"].take(pa.array(rows))
        shots = pa.table(
            {
                "uid": uids[rows],
                "video": video,
                "shot_idx": idx.astype(np.int64),
                "n_shots": n[rows],
            }
        )
        if lineage:
            return shots
        # The recipe's post-explode ID.
        shot_id = pc.binary_join_element_wise(video, pa.array(idx.astype(str)), "#")
        return shots.append_column("shot_id", shot_id)

    return detect


def score_fn(calls):
    def score(batch):
        shots = int(pc.sum(pc.greater(batch["n_shots"], 0)).as_py() or 0)
        time.sleep(SCORE_MS / 1000 * shots)
        log_call(calls, 0, shots, 0)
        return batch.append_column("score", pa.array(np.full(batch.num_rows, 0.5)))

    return score


def drive(root, impl, stage, run):
    """One driver: `impl`'s job (for `ray`, its `stage`), run number `run`."""
    import logging

    import ray
    from ray.data import DataContext
    from ray.data.checkpoint import CheckpointConfig

    import cairn.ray

    logging.getLogger("cairn").setLevel(logging.INFO)
    logging.getLogger("cairn").addHandler(logging.StreamHandler(sys.stdout))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    work = f"{root}/runs/{impl}"
    calls = f"{work}/calls/{run}"
    started = time.perf_counter()
    context = DataContext.get_current()
    if impl == "cairn":
        context.checkpoint_config = cairn.ray.checkpoint_config(
            ["uid", "shot_idx"],
            f"{work}/ckpt",
            source_column="uid",
            fan_out_column="n_shots",
        )
        ds = cairn.ray.read_parquet(f"{root}/in")
        ds = ds.map_batches(
            detect_fn(f"{calls}/detect", True),
            batch_format="pyarrow",
            batch_size=DETECT_BATCH,
        )
        ds = cairn.ray.skip_committed(ds)
        ds = ds.map_batches(
            score_fn(f"{calls}/score"), batch_format="pyarrow", batch_size=SCORE_BATCH
        )
        ds.write_parquet(f"{work}/out")
    elif stage == "1":
        context.checkpoint_config = CheckpointConfig(
            id_column="uid", checkpoint_path=f"{work}/ckpt1"
        )
        ds = ray.data.read_parquet(f"{root}/in")
        ds = ds.map_batches(
            detect_fn(f"{calls}/detect", False),
            batch_format="pyarrow",
            batch_size=DETECT_BATCH,
        )
        ds.write_parquet(f"{work}/shots")
    else:
        context.checkpoint_config = CheckpointConfig(
            id_column="shot_id", checkpoint_path=f"{work}/ckpt2"
        )
        ds = ray.data.read_parquet(f"{work}/shots")
        ds = ds.map_batches(
            score_fn(f"{calls}/score"), batch_format="pyarrow", batch_size=SCORE_BATCH
        )
        ds.write_parquet(f"{work}/out")
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"DRIVER DONE {seconds:.2f} {peak}", flush=True)
    os._exit(0)


class Sampler:
    """Peak resident bytes of the driver `pid` and of the largest Ray worker
    of its process group, sampled from /proc."""

    def __init__(self, pid):
        self.pid = pid
        self.driver = 0
        self.worker = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while not self.stop.wait(0.2):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    if int(fields[2]) != self.pid:  # the process group
                        continue
                    rss = int(fields[21]) * page
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        title = f.read()
                except (OSError, IndexError, ValueError):
                    continue
                if int(entry) == self.pid:
                    self.driver = max(self.driver, rss)
                elif title.startswith(b"ray::"):
                    self.worker = max(self.worker, rss)

    def done(self):
        self.stop.set()
        self.thread.join()
        return self.driver, self.worker


def run_driver(root, impl, stage, run, kill_at=None, timeout=3600):
    """Runs one driver; with `kill_at`, SIGKILLs its process group once score
    has seen that many shots. Returns (killed, seconds, sampled peaks, output)."""
    env = dict(os.environ, RAY_DATA_PARQUET_BIN_PACKING_BYTES="1024")
    proc = subprocess.Popen(
        [sys.executable, __file__, "drive", root, impl, stage, str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )
    sampler = Sampler(proc.pid)
    started = time.perf_counter()
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    killed = False
    score = f"{root}/runs/{impl}/calls/{run}/score"
    deadline = started + timeout
    while proc.poll() is None and time.perf_counter() < deadline:
        if kill_at is not None and count_calls(score)[2] >= kill_at:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    if proc.poll() is None and not killed:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit(f"{impl} stage {stage} run {run}: over {timeout} s")
    proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    reader.join(timeout=10)
    peaks = sampler.done()
    out = "".join(lines)
    if not killed and "DRIVER DONE" not in out:
        raise SystemExit(f"{impl} stage {stage} run {run} failed:\n{out[-4000:]}")
    # Ray's processes outlive the group's kill by a moment.
    time.sleep(3)
    return killed, seconds, peaks, out


def bench(root, impl):
    work = f"{root}/runs/{impl}"
    shutil.rmtree(work, ignore_errors=True)
    table = pq.read_table(f"{root}/in", columns=["uid", "n_shots"])
    total_shots = int(pc.sum(table["n_shots"]).as_py())
    expected = {
        (u, i)
        for u, n in zip(table["uid"].to_pylist(), table["n_shots"].to_pylist())
        for i in range(n)
    }
    half = total_shots // 2
    first_seconds = 0.0
    intermediate = 0
    if impl == "ray":
        _, seconds, _, _ = run_driver(root, impl, "1", 0)
        first_seconds += seconds
        intermediate = row_group_bytes(f"{work}/shots")
        stage = "2"
    else:
        stage = "-"
    killed, seconds, _, _ = run_driver(root, impl, stage, 0, kill_at=half)
    if not killed:
        raise SystemExit(f"{impl}: the job ended before its kill: raise SCORE_MS")
    first_seconds += seconds
    _, shots_before, _ = count_calls(f"{work}/calls/0/score")[1:]
    _, resume_seconds, (driver, worker), out = run_driver(root, impl, stage, 1)
    detect = count_calls(f"{work}/calls/1/detect")
    score = count_calls(f"{work}/calls/1/score")
    if impl == "cairn":
        left_out = re.search(
            r"leaves out \d+ of \d+ row groups \(\d+ of \d+ rows, (\d+) of (\d+)", out
        )
        read_bytes = (
            int(left_out.group(2)) - int(left_out.group(1)) if left_out else None
        )
    else:
        read_bytes = row_group_bytes(f"{work}/shots")
    written = pq.read_table(f"{work}/out", columns=["uid", "shot_idx"])
    keys = list(zip(written["uid"].to_pylist(), written["shot_idx"].to_pylist()))
    once = len(keys) == len(set(keys)) and set(keys) == expected
    return {
        "impl": impl,
        "sources": table.num_rows,
        "shots": total_shots,
        "shots_scored_before_kill": shots_before,
        "resume_videos_detected": detect[1],
        "resume_shots_scored": score[2],
        "resume_read_mib": None if read_bytes is None else round(read_bytes / 2**20, 2),
        "input_mib": round(row_group_bytes(f"{root}/in") / 2**20, 2),
        "intermediate_mib": round(intermediate / 2**20, 2),
        "first_run_s": round(first_seconds, 1),
        "resume_s": round(resume_seconds, 1),
        "driver_peak_mib": round(driver / 2**20),
        "largest_worker_peak_mib": round(worker / 2**20),
        "each_shot_once": once,
    }


def main():
    command = sys.argv[1]
    if command == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif command == "drive":
        drive(*sys.argv[2:6])
    else:
        print(json.dumps(bench(sys.argv[2], sys.argv[3])), flush=True)


if __name__ == "__main__":
    main()
