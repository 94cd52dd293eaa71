"""Small helpers the test files and the job script share, each defined
once: a free loopback port, the processes of Ray's workers, and the local
Ray instance the test drivers share."""

import os
import select
import socket
import subprocess
import sys


def free_port() -> int:
    """A loopback port free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Titles of Ray's own processes, which run no task of a job: a node's
# agents, a worker waiting for a task, and the detached actors Ray Data
# starts once a cluster (named one by one: cairn's committer actor,
# `ray::_CommitterActor`, is a job's and commits its units).
IDLE_TITLES = (
    b"ray::IDLE",
    b"ray::DashboardAgent",
    b"ray::RuntimeEnvAgent",
    b"ray::_StatsActor",
    b"ray::_AutoscalingCoordinatorActor",
    b"ray::_UsageCollectionActor",
    b"ray::ActorLocationTracker",
)


#: Set by scripts/test.sh to a different value for each pytest process
#: of Ray tests it runs at once; every process a test starts (its drivers,
#: Ray instances and their workers) inherits it.
STREAM_ENV = "CAIRN_TEST_RAY_STREAM"


def _of_this_stream(pid: str) -> bool:
    """Whether process `pid` belongs to this test process's stream (its
    environment holds the same `STREAM_ENV`; always, without one)."""
    stream = os.environ.get(STREAM_ENV)
    if not stream:
        return True
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environment = f.read().split(b"\0")
    except OSError:
        return False
    return f"{STREAM_ENV}={stream}".encode() in environment


def ray_processes(title: bytes = b"ray::") -> list:
    """The pids of this machine's Ray worker processes whose title starts
    with `title` (Ray titles a worker's process `ray::<task or class>`;
    the state API needs Ray's dashboard), but those that run no task
    (`IDLE_TITLES`) and those of another stream of tests running at the
    same time (`STREAM_ENV`)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                line = f.read()
        except OSError:
            continue
        if line.startswith(title) and not line.startswith(IDLE_TITLES) and _of_this_stream(entry):
            pids.append(int(entry))
    return pids


def shard_processes() -> list:
    """The pids of this machine's shard actors."""
    return ray_processes(b"ray::ShardActor")


# The process that holds the shared Ray instance, and the instance's address.
_shared_ray = None

# Started in a process of its own; it ends (and Ray's shutdown with it stops
# the instance) when its standard input closes: when the test process
# exits, however it exits.
_HOLDER = """
import sys
import ray

ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
"""

# Drivers join the shared instance without Ray's token: it listens on this
# machine only, for the length of one test run.
SHARED_RAY_ENV = {"RAY_AUTH_MODE": "disabled"}


def shared_ray_address() -> str:
    """The address of a local Ray instance (2 CPUs, no dashboard) that the
    test drivers of this test process share, started on first use.

    A driver started with Ray's `address="local"` starts a Ray instance of
    its own: about 5 s of start and shutdown a run, which a test run of ~100
    drivers spends again and again. A driver killed on the shared instance
    loses its workers as on a real cluster: Ray kills a dead job's workers
    (within 0.1 s here)."""
    global _shared_ray
    if _shared_ray is not None and _shared_ray[0].poll() is None:
        return _shared_ray[1]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **SHARED_RAY_ENV),
        start_new_session=True,
    )
    # Ray's start is bounded (a node that cannot register fails in 30 s);
    # the wait for its address is bounded too.
    ready, _, _ = select.select([holder.stdout], [], [], 120)
    address = holder.stdout.readline().strip() if ready else ""
    if not address:
        holder.kill()
        raise RuntimeError("the shared local Ray instance did not start within 120 s")
    _shared_ray = (holder, address)
    return address
