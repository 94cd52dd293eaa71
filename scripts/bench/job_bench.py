"""cairn job run against Ray Data 2.60 on the same machine, same input
(1M rows: uid int64 + text, 20 Parquet files), same trivial transform.

  (a) end-to-end wall time with checkpointing
  (b) checkpoint overhead: the same job without checkpointing
  (c) resume time with 95% of the rows committed (a first run over 19 of the
      20 files kept its checkpoint; the resume runs over all 20)
  (d) rows processed again after a failure at 50% (the transform fails on
      uid 500000; the resume's rows = input - IDs committed by the failed run)

The limit: a bare arrow-rs Parquet read -> write of the same 20 files
(benches/src/bin/arrow_copy.rs: one file per core at a time, cairn's
writer settings, no checkpoint), median of 3, wall time of the process.

cairn runs two variants: with no transform, and with a Python identity
transform (--map-cmd) to match Ray's Python UDF; (a) and (b) are medians of
3 runs. Ray runs once per figure, with its defaults. Times are wall times of
the whole process (Ray's include starting its local cluster; its job-only
time is printed too).
Prints one JSON line per measurement and a summary table.

  python3 scripts/bench/job_bench.py   (via scripts/bench/job_bench.sh)
  BENCH_ROWS=10000000 BENCH_SKIP_RAY=1 scripts/bench/job_bench.sh   (cairn only, larger)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAIRN = os.path.join(ROOT, "target", "release", "cairn")
RAY_PY = os.environ["CAIRN_RAY_PYTHON"]
TOOLS_PY = os.environ["CAIRN_PYTHON"]
ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
IDENTITY = f"{TOOLS_PY} {ROOT}/scripts/bench/identity_transform.py"
# Ray with its default packing of files into read tasks (the interop tests
# lower it to get one task per file).
RAY_ENV = dict(os.environ, RAY_DATA_PARQUET_BIN_PACKING_BYTES=str(128 << 20))


def timed(cmd, env=None):
    began = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.monotonic() - began, out


def committed_ids(ckpt):
    out = subprocess.run(
        [CAIRN, "ckpt", "status", ckpt, "--json"], capture_output=True, text=True
    )
    return json.loads(out.stdout)["committed_ids"] if out.returncode == 0 else 0


def cairn_job(work, name, inp, ckpt=True, transform=False, fail_at=None, keep=False):
    out, ck = f"{work}/{name}-out", f"{work}/{name}-ckpt"
    cmd = [
        CAIRN,
        "job",
        "run",
        "--input",
        inp,
        "--output",
        out,
        "--quiet",
        "--mode",
        "append",
    ]
    if ckpt:
        cmd += ["--checkpoint", ck, "--id-column", "uid"]
    if keep:
        cmd += ["--keep-checkpoint"]
    if transform:
        cmd += ["--map-cmd", IDENTITY]
    env = dict(os.environ)
    if fail_at is not None:
        env["FAIL_AT_UID"] = str(fail_at)
    seconds, proc = timed(cmd, env)
    return seconds, proc, out, ck


def ray_job(work, name, inp, ckpt=True, fail_at=None, keep=False):
    out, ck = f"{work}/{name}-out", f"{work}/{name}-ckpt"
    cmd = [
        RAY_PY,
        f"{ROOT}/scripts/ray_interop.py",
        "job",
        inp,
        out,
        ck if ckpt else "none",
    ]
    if fail_at is not None:
        cmd += ["--fail-at-uid", str(fail_at)]
    if keep:
        cmd += ["--keep"]
    seconds, proc = timed(cmd, RAY_ENV)
    line = [text for text in proc.stdout.splitlines() if text.startswith("{")]
    result = (
        json.loads(line[-1]) if line else {"ok": False, "error": proc.stderr[-500:]}
    )
    return seconds, result, out, ck


def main():
    work = tempfile.mkdtemp(prefix="cairn-job-bench-")
    inp, inp95 = f"{work}/in", f"{work}/in95"
    subprocess.run(
        [
            CAIRN,
            "job",
            "sample",
            inp,
            "--rows",
            str(ROWS),
            "--files",
            "20",
            "--row-group-rows",
            "10000",
        ],
        check=True,
        capture_output=True,
    )
    os.makedirs(inp95)
    for name in sorted(os.listdir(inp))[:19]:
        os.symlink(f"{inp}/{name}", f"{inp95}/{name}")
    results = {}

    def record(key, value):
        results[key] = value
        print(json.dumps({key: value}), flush=True)

    def median_of_3(name, **kw):
        times = []
        for i in range(3):
            t, p, out, ck = cairn_job(work, f"{name}-{i}", inp, **kw)
            assert p.returncode == 0, p.stderr
            times.append(t)
        return round(sorted(times)[1], 3)

    def arrow_copy(i):
        out = subprocess.run(
            [
                os.path.join(ROOT, "target", "release", "arrow_copy"),
                inp,
                f"{work}/arrow-copy-{i}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)

    # The limit: a bare arrow-rs read -> write of the same files (no
    # checkpoint, no filesystem layer), timed inside the process, and the
    # same with process start included (as cairn's wall times are).
    copies = []
    for i in range(3):
        began = time.monotonic()
        r = arrow_copy(i)
        copies.append((time.monotonic() - began, r["seconds"]))
        assert r["rows"] == ROWS, r
    copies.sort()
    record("arrow-rs copy_wall_s", round(copies[1][0], 3))
    record("arrow-rs copy_in_process_s", round(copies[1][1], 3))

    for variant, transform in [("cairn", False), ("cairn+py", True)]:
        record(
            f"{variant} a_with_checkpoint_s",
            median_of_3(f"{variant}-a", transform=transform),
        )
        record(
            f"{variant} b_without_checkpoint_s",
            median_of_3(f"{variant}-b", ckpt=False, transform=transform),
        )
        _, p, out, ck = cairn_job(
            work, f"{variant}-c", inp95, transform=transform, keep=True
        )
        assert p.returncode == 0, p.stderr
        record(f"{variant} c_committed_before_resume", committed_ids(ck))
        t, p, *_ = cairn_job(work, f"{variant}-c", inp, transform=transform)
        assert p.returncode == 0, p.stderr
        record(f"{variant} c_resume_s", round(t, 3))
        _, p, out, ck = cairn_job(
            work, f"{variant}-d", inp, transform=True, fail_at=ROWS // 2
        )
        assert p.returncode != 0
        done = committed_ids(ck)
        record(f"{variant} d_committed_at_failure", done)
        record(f"{variant} d_rows_processed_on_resume", ROWS - done)
        t, p, *_ = cairn_job(work, f"{variant}-d", inp, transform=transform)
        assert p.returncode == 0, p.stderr

    if os.environ.get("BENCH_SKIP_RAY"):
        shutil.rmtree(work, ignore_errors=True)
        for v in ["cairn", "cairn+py"]:
            a, b, c = (
                results[f"{v} a_with_checkpoint_s"],
                results[f"{v} b_without_checkpoint_s"],
                results[f"{v} c_resume_s"],
            )
            print(
                f"{v}: checkpoint overhead {100 * (a - b) / b:+.1f}%; resume = {100 * c / a:.0f}% of a full run"
            )
        copy = results["arrow-rs copy_wall_s"]
        print(
            f"cairn (b) / bare arrow-rs copy: {results['cairn b_without_checkpoint_s'] / copy:.2f}x; "
            f"(a) with checkpoint: {results['cairn a_with_checkpoint_s'] / copy:.2f}x"
        )
        return
    t, r, *_ = ray_job(work, "ray-a", inp)
    assert r["ok"], r
    record("ray a_with_checkpoint_s", round(t, 2))
    record("ray a_job_only_s", round(r["job_s"], 2))
    t, r, *_ = ray_job(work, "ray-b", inp, ckpt=False)
    assert r["ok"], r
    record("ray b_without_checkpoint_s", round(t, 2))
    record("ray b_job_only_s", round(r["job_s"], 2))
    _, r, out, ck = ray_job(work, "ray-c", inp95, keep=True)
    assert r["ok"], r
    record("ray c_committed_before_resume", committed_ids(ck))
    t, r, *_ = ray_job(work, "ray-c", inp)
    assert r["ok"], r
    record("ray c_resume_s", round(t, 2))
    record("ray c_resume_job_only_s", round(r["job_s"], 2))
    _, r, out, ck = ray_job(work, "ray-d", inp, fail_at=ROWS // 2)
    assert not r["ok"], r
    done = committed_ids(ck)
    record("ray d_committed_at_failure", done)
    record("ray d_rows_processed_on_resume", ROWS - done)

    shutil.rmtree(work, ignore_errors=True)
    ray_a = results["ray a_with_checkpoint_s"]
    print("\n| figure | cairn | cairn + Python transform | Ray Data 2.60 |")
    print("|---|---|---|---|")
    for key, label in [
        ("a_with_checkpoint_s", "(a) end to end, with checkpoint (s)"),
        ("b_without_checkpoint_s", "(b) same job without checkpoint (s)"),
        ("c_resume_s", "(c) resume with 95% committed (s)"),
        (
            "d_rows_processed_on_resume",
            "(d) rows processed on resume after a failure at 50%",
        ),
    ]:
        print(
            f"| {label} | {results['cairn ' + key]} | {results['cairn+py ' + key]} | {results['ray ' + key]} |"
        )
    for v in ["cairn", "cairn+py"]:
        a, b, c = (
            results[f"{v} a_with_checkpoint_s"],
            results[f"{v} b_without_checkpoint_s"],
            results[f"{v} c_resume_s"],
        )
        print(
            f"{v}: {ray_a / a:.1f}x faster than Ray end to end (Ray job only: "
            f"{results['ray a_job_only_s'] / a:.1f}x); checkpoint overhead {100 * (a - b) / b:+.1f}%; "
            f"resume = {100 * c / a:.0f}% of a full run"
        )
    copy = results["arrow-rs copy_wall_s"]
    print(
        f"cairn (b) / bare arrow-rs copy: {results['cairn b_without_checkpoint_s'] / copy:.2f}x; "
        f"(a) with checkpoint: {results['cairn a_with_checkpoint_s'] / copy:.2f}x"
    )
    rb = results["ray b_without_checkpoint_s"]
    print(
        f"ray: checkpoint overhead {100 * (ray_a - rb) / rb:+.1f}%; resume = "
        f"{100 * results['ray c_resume_s'] / ray_a:.0f}% of a full run"
    )


if __name__ == "__main__":
    sys.exit(main())
