"""Group commits of table units: the units whose data files their write
tasks wrote are committed together, one table transaction per interval
that records each of them, and then each unit's checkpoint record.

A write task stages its unit's data files and hands them, with its unit's
IDs, to the job's committer (a Ray actor on the driver's node, owned by
the driver), then ends: its pending checkpoint record stays. The committer
commits the units waiting when ``interval`` seconds passed since the
oldest of them arrived, or ``max_units`` wait: first each unit's fence (its
pending record still there, its ledger entry written into it), then one
table transaction, then each unit's committed record (its IDs and entry)
and the removal of its pending one. A unit's checkpoint commit follows its
table commit, as in a task that commits its own unit, so recovery settles
what a kill leaves pending by the table's log, unchanged.

A unit is never in two transactions: the committer holds each unit it has
queued or committed, so a retried task's submission of a unit an earlier
attempt submitted replaces that submission while it waits (its staged files
deleted: no transaction named them), is dropped while it is being committed
(the earlier one decides), and is answered "landed before" once it is
committed. The driver flushes the committer before the job's checkpoint is
ended; a committer that died (its node lost) lost the units it held: the
job's end finds their pending records and keeps the checkpoint.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

#: A unit the committer took: it commits the unit later.
QUEUED = "queued"
#: The outcome of a unit committed by the transaction its submission was in.
COMMITTED = "committed"
#: The answer to a unit an earlier submission (an earlier attempt of its
#: task) committed in this job: this submission's staged files were deleted.
LANDED_BEFORE = "landed-before"
#: The outcome of a unit whose pending checkpoint record was gone at the
#: fence (a newer run took the job over): its message is the refusal.
TAKEN_OVER = "taken-over"
#: The outcome of a unit whose transaction failed: its message says why.
FAILED = "failed"

#: How long the driver waits for the committer to commit what it holds, and
#: a task for room in its queue, by default (seconds): pyiceberg retries a
#: commit for up to 30 minutes by default.
DEFAULT_COMMIT_TIMEOUT_SECONDS = 3600.0

#: The most units one transaction carries, by default.
DEFAULT_MAX_UNITS_PER_COMMIT = 1000

#: How long the oldest unit waits for others before a transaction, by
#: default (seconds).
DEFAULT_COMMIT_INTERVAL_SECONDS = 5.0

#: The bytes of units' IDs a committer holds at most, by default: a task
#: whose unit would pass it waits for room (a group is then taken at once).
DEFAULT_MAX_HELD_BYTES = 256 * 1024 * 1024

#: Threads a committer runs its units' fences and record writes on.
_IO_THREADS = 8


@dataclass
class Submission:
    """A unit handed to a committer: its name and what its format commits
    (its staged data files and its fence)."""

    unit: str
    payload: Any
    #: When it arrived (``time.monotonic()``).
    arrived: float = 0.0
    #: The bytes it holds in the committer's memory (its IDs).
    size: int = 0
    #: (kind, message) once decided.
    outcome: Optional[Tuple[str, str]] = None
    #: What names this hand-over: the same when a task sends it again
    #: (its answer lost with a committer that Ray reported unavailable).
    token: str = ""


@dataclass
class GroupCommitter:
    """Commits the units submitted to it in groups, on a thread of its
    own: each group one call of ``commit_batch`` (which returns each unit's
    (kind, message) outcome, and may raise: every unit of the group then
    fails with its message). ``discard`` deletes a payload that never
    reached a transaction. A group is taken when its oldest unit has waited
    ``interval`` seconds, when ``max_units`` wait, on :meth:`flush`, or
    when a submission waits for room: at most ``max_queued`` units and
    ``max_held_bytes`` of their sizes (the IDs they carry) are held, and a
    submission beyond them waits (a unit is taken whatever its size when
    none waits). Used inside a Ray actor; plain Python
    otherwise::

        committer = GroupCommitter(lambda batch: {s.unit: ("committed", "") for s in batch})
        assert committer.submit("u1", None, timeout=5)[0] == "queued"
        assert committer.flush(timeout=5)["failed"] == {}
    """

    commit_batch: Callable[[List[Submission]], Dict[str, Tuple[str, str]]]
    discard: Callable[[Any], None] = lambda payload: None
    interval: float = DEFAULT_COMMIT_INTERVAL_SECONDS
    max_units: int = DEFAULT_MAX_UNITS_PER_COMMIT
    max_queued: int = 0
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    #: The submissions waiting, by unit, oldest first (a replaced one
    #: keeps its place).
    _queue: Dict[str, Submission] = field(default_factory=dict)
    _held_bytes: int = 0
    _waiting_for_room: int = 0
    _in_flight: Dict[str, Submission] = field(default_factory=dict)
    #: Each unit committed, with its submission's token.
    _committed: Dict[str, str] = field(default_factory=dict)
    #: The answer to a decided hand-over sent again, by its token: one
    #: dropped or replaced (its files deleted), or whose group failed or
    #: was refused (its files maybe deleted: never taken again).
    _answered: Dict[str, Tuple[str, str]] = field(default_factory=dict)
    _failed: Dict[str, str] = field(default_factory=dict)
    _flushing: int = 0
    _cv: threading.Condition = field(default_factory=threading.Condition)
    #: Transactions made, and units committed (for the job's report).
    transactions: int = 0
    units: int = 0

    def __post_init__(self) -> None:
        if self.max_units < 1:
            raise ValueError(f"max_units_per_commit={self.max_units}: must be at least 1")
        if self.interval < 0:
            raise ValueError(f"commit_interval={self.interval}: must be 0 or more seconds")
        if self.max_queued < self.max_units:
            self.max_queued = 2 * self.max_units
        threading.Thread(target=self._run, name="cairn-committer", daemon=True).start()

    def submit(
        self, unit: str, payload: Any, timeout: float, size: int = 0, token: str = ""
    ) -> Tuple[str, str]:
        """Takes ``unit`` for a coming transaction: :data:`QUEUED`. A unit
        committed already answers :data:`LANDED_BEFORE` (``payload``
        discarded); one waiting replaces its earlier submission (whose
        payload is discarded: the newest attempt's rows are committed); one
        being committed keeps the submission in the transaction and drops
        this one. The same hand-over sent again (``token``, not empty,
        equal to the held submission's: its first answer was lost) is
        answered :data:`QUEUED` and changes nothing: its payload is the
        held one's, whose files must not be deleted. Waits at most
        ``timeout`` seconds for room in the queue, then raises
        ``TimeoutError``."""
        dropped = None
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                held = self._held_token(unit)
                if token and held == token:
                    answer = (QUEUED, "this hand-over was taken before")
                    break
                if token and token in self._answered:
                    # Sent again once it was decided (dropped, replaced,
                    # refused, failed): the same answer, nothing taken.
                    answer = self._answered[token]
                    break
                if unit in self._committed:
                    dropped, answer = (
                        payload,
                        (
                            LANDED_BEFORE,
                            f"unit {unit} was committed by an earlier attempt of its task",
                        ),
                    )
                    self._remember(token, answer)
                    break
                if unit in self._in_flight:
                    dropped, answer = payload, (QUEUED, "an earlier attempt's submission decides")
                    self._remember(token, answer)
                    break
                waiting = self._queue.get(unit)
                if waiting is not None:
                    # The replaced hand-over's files are deleted: sent
                    # again, its task must fail.
                    self._remember(
                        waiting.token,
                        (FAILED, "this hand-over's files were deleted: a newer attempt's won"),
                    )
                    dropped, waiting.payload = waiting.payload, payload
                    waiting.token = token
                    self._held_bytes += size - waiting.size
                    waiting.size = size
                    answer = (QUEUED, "")
                    break
                # Nothing waiting: taken whatever its size (the group being
                # committed is bounded), so a unit over the budget is not
                # starved by smaller ones getting in while groups commit.
                if not self._queue or (
                    len(self._queue) < self.max_queued
                    and self._held_bytes + size <= self.max_held_bytes
                ):
                    self._failed.pop(unit, None)
                    self._queue[unit] = Submission(
                        unit, payload, time.monotonic(), size, token=token
                    )
                    self._held_bytes += size
                    self._cv.notify_all()
                    answer = (QUEUED, "")
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"the committer's queue stayed full ({len(self._queue)} units, "
                        f"{self._held_bytes} bytes of IDs) for {timeout:.0f} s"
                    )
                self._waiting_for_room += 1
                self._cv.notify_all()
                try:
                    self._cv.wait(left)
                finally:
                    self._waiting_for_room -= 1
        if dropped is not None:
            self.discard(dropped)
        return answer

    def _remember(self, token: str, answer: Tuple[str, str]) -> None:
        """Keeps the answer a decided hand-over gets if it is sent again.
        Called with the lock."""
        if token:
            self._answered[token] = answer

    def _held_token(self, unit: str) -> Optional[str]:
        """The token of the submission of ``unit`` committed, being
        committed or waiting (None: none is held). Called with the lock."""
        if unit in self._committed:
            return self._committed[unit]
        if unit in self._in_flight:
            return self._in_flight[unit].token
        waiting = self._queue.get(unit)
        return None if waiting is None else waiting.token

    def flush(self, timeout: float) -> Dict[str, Any]:
        """Commits every unit waiting now, and waits (at most ``timeout``
        seconds, then raises ``TimeoutError``) until none waits or is being
        committed. Returns the units that failed since the last flush (unit:
        message) and the transactions and units committed so far."""
        deadline = time.monotonic() + timeout
        with self._cv:
            self._flushing += 1
            self._cv.notify_all()
            try:
                while self._queue or self._in_flight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"{len(self._queue) + len(self._in_flight)} unit(s) were still not "
                            f"committed after {timeout:.0f} s"
                        )
                    self._cv.wait(left)
                failed, self._failed = self._failed, {}
                return {"failed": failed, "transactions": self.transactions, "units": self.units}
            finally:
                self._flushing -= 1

    def commit(self, unit: str, payload: Any, timeout: float = 60.0) -> Tuple[str, str]:
        """:meth:`submit`, then the unit's outcome once committed, the
        interval not waited (for callers that wait, and the tests)."""
        kind, message = self.submit(unit, payload, timeout)
        if kind != QUEUED:
            return kind, message
        deadline = time.monotonic() + timeout
        with self._cv:
            self._flushing += 1
            self._cv.notify_all()
            try:
                while unit not in self._committed and unit not in self._failed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"unit {unit} was not committed in {timeout:.0f} s")
                    self._cv.wait(left)
            finally:
                self._flushing -= 1
            if unit in self._committed:
                return COMMITTED, ""
            return FAILED, self._failed[unit]

    def _take(self) -> List[Submission]:
        """The next group, once it is due."""
        with self._cv:
            while True:
                if self._queue:
                    due = next(iter(self._queue.values())).arrived + self.interval
                    if (
                        len(self._queue) >= self.max_units
                        or self._flushing
                        or self._waiting_for_room
                        or time.monotonic() >= due
                    ):
                        batch = list(itertools.islice(self._queue.values(), self.max_units))
                        for submission in batch:
                            del self._queue[submission.unit]
                            self._in_flight[submission.unit] = submission
                        self._cv.notify_all()
                        return batch
                    self._cv.wait(max(0.0, due - time.monotonic()))
                else:
                    self._cv.wait()

    def _run(self) -> None:
        while True:
            batch = self._take()
            self._publish(batch, self._outcomes(batch))

    def _outcomes(self, batch: List[Submission]) -> Dict[str, Tuple[str, str]]:
        try:
            outcomes = self.commit_batch(batch)
        except BaseException as e:  # noqa: BLE001 - each unit of the group gets the error
            logger.warning("cairn: a table commit of %d unit(s) failed: %s", len(batch), e)
            return {s.unit: (FAILED, f"{type(e).__name__}: {e}") for s in batch}
        missing = (FAILED, "the committer gave this unit no outcome")
        return {s.unit: outcomes.get(s.unit, missing) for s in batch}

    def _publish(self, batch: List[Submission], outcomes: Dict[str, Tuple[str, str]]) -> None:
        with self._cv:
            self.transactions += 1
            for submission in batch:
                submission.outcome = outcomes[submission.unit]
                del self._in_flight[submission.unit]
                self._held_bytes -= submission.size
                kind, message = submission.outcome
                if kind in (COMMITTED, LANDED_BEFORE):
                    self._committed[submission.unit] = submission.token
                    self.units += kind == COMMITTED
                else:
                    self._failed[submission.unit] = f"{kind}: {message}"
                    self._remember(submission.token, (FAILED, f"{kind}: {message}"))
            self._cv.notify_all()


def fence_all(fences: Sequence[Callable[[], None]]) -> List[Optional[BaseException]]:
    """Runs each unit's step (its fence: a HEAD of its pending record, a
    PUT of its ledger entry; its records' commit) on a few threads;
    returns each one's error or None."""

    def run(fence: Callable[[], None]) -> Optional[BaseException]:
        try:
            fence()
            return None
        except BaseException as e:  # noqa: BLE001 - returned to the caller
            return e

    if len(fences) <= 1:
        return [run(fence) for fence in fences]
    with ThreadPoolExecutor(min(_IO_THREADS, len(fences))) as pool:
        return list(pool.map(run, fences))


def committer_name(table: str, checkpoint_path: str) -> str:
    """The Ray actor name of the committer of a job writing ``table`` with
    its checkpoint at ``checkpoint_path``, in this Ray job (the driver's
    and its tasks' job ID: another driver sharing the namespace has its
    own); no secrets: a digest."""
    import ray

    job = ray.get_runtime_context().get_job_id()
    digest = hashlib.sha256(f"{job}\0{table}\0{checkpoint_path}".encode()).hexdigest()[:24]
    return f"cairn-table-committer-{digest}"


#: Calls a committer actor serves at once: tasks waiting for room in its
#: queue, and the driver's flush.
_MAX_WAITING = 1000


class _CommitterActor:
    """The Ray actor around a :class:`GroupCommitter`: ``make`` (a
    picklable callable) builds the format's ``(commit_batch, discard)``
    inside the actor's process."""

    def __init__(
        self, make: Callable[[], Tuple[Callable, Callable]], interval: float, max_units: int
    ):
        import ray

        commit_batch, discard = make()
        self._committer = GroupCommitter(commit_batch, discard, interval, max_units)
        #: Whether Ray restarted this committer: the one that died may have
        #: fenced and committed any unit handed over to it. Not known (the
        #: question to Ray's control store failed): taken as restarted,
        #: which costs a read a unit, where a constructor that raised
        #: would never be restarted.
        try:
            with warnings.catch_warnings():
                # Ray 2.60's property reads its own deprecated actor_id,
                # which warned on every run (RayDeprecationWarning).
                warnings.simplefilter("ignore", DeprecationWarning)
                self._restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        except Exception:  # noqa: BLE001 - see above
            self._restarted = True

    def submit(
        self, unit: str, payload: Any, timeout: float, size: int, token: str = ""
    ) -> Tuple[str, str]:
        fence = getattr(payload, "fence", None)
        if self._restarted and fence is not None:
            fence.resent = True
        return self._committer.submit(unit, payload, timeout, size, token)

    def flush(self, timeout: float) -> Dict[str, Any]:
        return self._committer.flush(timeout)


#: The committers this driver started: name -> handle. The handle is kept
#: because Ray ends an actor once the handle that created it is dropped, a
#: named one too.
_STARTED: Dict[str, Any] = {}


def start_committer(
    name: str,
    make: Callable[[], Tuple[Callable, Callable]],
    interval: float,
    max_units: int,
) -> Any:
    """Starts the committer actor ``name`` (or returns the one this driver
    started) on the driver's node, owned by the driver: it ends with the driver, and Ray
    restarts it when it dies while the driver lives (what it held is
    lost: the job's end finds those units pending)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if name in _STARTED:
        # Ray Data starts a write twice (before its plan runs, and at its
        # first block): the handle that made the actor is the one kept.
        return _STARTED[name]
    actor = ray.remote(_CommitterActor).options(
        name=name,
        get_if_exists=True,
        num_cpus=0,
        max_concurrency=_MAX_WAITING,
        max_restarts=-1,
        scheduling_strategy=NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=True
        ),
    )
    handle = actor.remote(make, interval, max_units)
    _STARTED[name] = handle
    return handle


def stop_committer(name: str) -> None:
    """Stops the committer actor ``name`` if this driver started it (the
    job's write is over: flushed, or failed)."""
    import ray

    started = _STARTED.pop(name, None)
    if started is None:
        return
    ray.kill(started, no_restart=True)
    # The name is free once the actor is gone: a write started right after
    # must not find the dying one (at most 30 s).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.05)


def flush_committer(name: str, timeout: float) -> Dict[str, str]:
    """Has the committer ``name`` this driver started commit what it
    holds, waiting at most ``timeout`` seconds; returns the units whose
    commit failed (unit: why), which are pending: the caller checks them
    against the table. Raises a ``RuntimeError`` when the committer died or
    did not finish in time: the job's checkpoint must then be kept (a
    resume settles its units)."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    handle = _STARTED.get(name)
    if handle is None:
        raise RuntimeError(f"cairn: the table committer {name} was not started by this driver")
    try:
        report = ray.get(handle.flush.remote(timeout), timeout=timeout + 60)
    except (GetTimeoutError, TimeoutError) as e:
        raise RuntimeError(
            f"cairn: the table committer {name} did not commit the units it holds within "
            f"{timeout:.0f} s (commit_timeout): {e}"
        ) from None
    except RayActorError as e:
        raise RuntimeError(
            f"cairn: the table committer {name} died ({e.__class__.__name__}): the units it "
            "held were not committed"
        ) from None
    failed = report["failed"]
    if failed:
        logger.warning(
            "cairn: %d unit(s) handed to the table committer were not committed (%s)",
            len(failed),
            "; ".join(f"{u}: {m}" for u, m in sorted(failed.items())[:3]),
        )
    logger.info(
        "cairn: %d unit(s) committed to the table in %d transaction(s)",
        report["units"],
        report["transactions"],
    )
    return failed


def submit_to(
    name: str, table: str, unit: str, payload: Any, timeout: float, size: int = 0
) -> Tuple[str, str]:
    """Hands ``unit`` to the committer ``name`` (waiting at most
    ``timeout`` seconds, for room in its queue, or for Ray to restart it
    when it died: a submission made again is taken once, by the token this
    call gives it, so a committer that took it before its answer was lost
    keeps it and deletes none of its files); returns its answer. Raises a
    ``RuntimeError`` naming the table when the committer is not running or
    does not answer in time: the task fails."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    token = uuid.uuid4().hex
    deadline = time.monotonic() + timeout
    pause = 0.1
    while True:
        try:
            actor = ray.get_actor(name)
        except ValueError:
            raise RuntimeError(
                f"cairn: the committer of {table} ({name}) is not running: the driver that "
                "started the write ended, or the write was not started by Ray Data's "
                "write_datasink. Run the job again; its checkpoint settles this unit"
            ) from None
        left = max(0.0, deadline - time.monotonic())
        try:
            return ray.get(actor.submit.remote(unit, payload, left, size, token), timeout=left + 60)
        except (GetTimeoutError, TimeoutError) as e:
            raise RuntimeError(
                f"cairn: unit {unit} could not be handed to the committer of {table} in "
                f"{timeout:.0f} s (commit_timeout): its catalog or store does not keep up ({e})"
            ) from None
        except RayActorError as e:
            if time.monotonic() + pause > deadline:
                raise RuntimeError(
                    f"cairn: the committer of {table} was not back {timeout:.0f} s after it "
                    f"died (commit_timeout; {e.__class__.__name__}): unit {unit} was not "
                    "handed to it"
                ) from None
            # Ray restarts it (what it held is lost: the job's end says so).
            # The committer that died may have fenced and committed the
            # unit: the next one reads its records before committing it.
            fence = getattr(payload, "fence", None)
            if fence is not None:
                fence.resent = True
            logger.warning(
                "cairn: the committer of %s died (%s); unit %s is handed to it again once "
                "Ray restarted it",
                table,
                e.__class__.__name__,
                unit,
            )
            time.sleep(pause)
            pause = min(2 * pause, 5.0)
