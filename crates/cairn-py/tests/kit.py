"""Small helpers the test files and the job script share, each defined
once: a free loopback port and the processes of Ray's workers."""

import os
import socket


def free_port() -> int:
    """A loopback port free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_processes(title: bytes = b"ray::") -> list:
    """The pids of this machine's Ray worker processes whose title starts
    with `title` (Ray titles a worker's process `ray::<task or class>`;
    the state API needs Ray's dashboard)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().startswith(title):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def shard_processes() -> list:
    """The pids of this machine's shard actors."""
    return ray_processes(b"ray::ShardActor")
