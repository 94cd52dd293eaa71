"""cairn's group committer (cairn._ray_committer.GroupCommitter), on
threads: units submitted within an interval share a commit, a commit
carries at most its count, a unit is never committed twice (a retry's
submission replaces a waiting one, is dropped while one is being
committed, is answered "landed before" after), every payload is committed,
discarded or reported failed by a flush, and nothing waits without a
bound. The table sinks run it inside a Ray actor (test_ray_tables.py);
these tests draw the schedules Ray would take minutes to produce. Runs in the Ray virtualenv,
which has hypothesis (scripts/test.sh); elsewhere it shows as skipped."""

import threading
import time

import pytest

pytest.importorskip("hypothesis", reason="scripts/test.sh runs this in its ray-venv")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cairn._ray_committer import (  # noqa: E402
    COMMITTED,
    FAILED,
    LANDED_BEFORE,
    QUEUED,
    GroupCommitter,
)


class Table:
    """The independent record of what the committer asked for: each
    successful commit's (unit, payload) pairs, each discarded payload, each
    failed commit's; a hold keeps commits waiting until released."""

    def __init__(self, failing=(), held=False, slow=0.0):
        self.slow = slow
        self.commits = []
        self.failed = []
        self.discarded = []
        self.failing = list(failing)
        self.started = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()
        self.lock = threading.Lock()

    def commit_batch(self, batch):
        self.started.set()
        assert self.release.wait(20)
        time.sleep(self.slow)
        with self.lock:
            pairs = [(s.unit, s.payload) for s in batch]
            if self.failing and self.failing.pop(0):
                self.failed.append(pairs)
                raise OSError("the catalog did not answer")
            self.commits.append(pairs)
        return {s.unit: (COMMITTED, "") for s in batch}

    def discard(self, payload):
        with self.lock:
            self.discarded.append(payload)

    def sizes(self):
        return [len(c) for c in self.commits]


def test_units_submitted_within_the_interval_share_a_commit():
    table = Table()
    # An interval no pause of a loaded machine reaches: the flush takes
    # the group.
    committer = GroupCommitter(table.commit_batch, table.discard, interval=60.0)
    for i in range(10):
        assert committer.submit(f"u{i}", i, timeout=5) == (QUEUED, "")
    assert table.commits == []
    report = committer.flush(timeout=10)
    assert report == {"failed": {}, "transactions": 1, "units": 10}
    assert table.sizes() == [10]


def test_a_unit_alone_is_committed_once_the_interval_passed():
    table = Table()
    committer = GroupCommitter(table.commit_batch, table.discard, interval=0.2)
    committer.submit("u", 1, timeout=5)
    deadline = time.monotonic() + 5
    while not table.commits and time.monotonic() < deadline:
        time.sleep(0.02)
    assert table.commits == [[("u", 1)]]


def test_a_commit_carries_at_most_max_units():
    table = Table()
    committer = GroupCommitter(table.commit_batch, table.discard, interval=30, max_units=4)
    for i in range(10):
        committer.submit(f"u{i}", i, timeout=5)
    committer.flush(timeout=10)
    assert sorted(table.sizes()) == [2, 4, 4]


def test_a_retry_replaces_a_waiting_submission():
    table = Table()
    committer = GroupCommitter(table.commit_batch, table.discard, interval=30)
    committer.submit("u", "first attempt", timeout=5)
    assert committer.submit("u", "retry", timeout=5) == (QUEUED, "")
    committer.flush(timeout=10)
    assert table.commits == [[("u", "retry")]]
    assert table.discarded == ["first attempt"]
    # Committed: a later submission is answered at once, its payload discarded.
    assert committer.submit("u", "late", timeout=5)[0] == LANDED_BEFORE
    assert table.discarded == ["first attempt", "late"]


def test_a_retry_of_a_unit_being_committed_is_dropped():
    table = Table(held=True)
    committer = GroupCommitter(table.commit_batch, table.discard, interval=0)
    committer.submit("u", "first attempt", timeout=5)
    assert table.started.wait(10)
    kind, _ = committer.submit("u", "retry", timeout=5)
    assert kind == QUEUED
    table.release.set()
    committer.flush(timeout=10)
    assert table.commits == [[("u", "first attempt")]]
    assert table.discarded == ["retry"]


def test_a_failed_commit_is_reported_by_the_flush_and_its_units_can_come_again():
    table = Table(failing=[True])
    committer = GroupCommitter(table.commit_batch, table.discard, interval=30)
    committer.submit("u", "p", timeout=5)
    report = committer.flush(timeout=10)
    assert list(report["failed"]) == ["u"] and "the catalog did not answer" in report["failed"]["u"]
    assert committer.flush(timeout=10)["failed"] == {}, "a failure is reported once"
    assert committer.commit("u", "again", timeout=10) == (COMMITTED, "")
    assert table.commits == [[("u", "again")]]


def test_a_hand_over_sent_again_gets_its_first_answer_and_changes_nothing():
    """The same hand-over (its token) sent again: held (waiting, being
    committed or committed) it stays as it is; decided otherwise (its
    group failed, or a newer attempt's replaced it) it is refused, its
    files never taken again."""
    table = Table(failing=[True])
    committer = GroupCommitter(table.commit_batch, table.discard, interval=30)
    assert committer.submit("u", "a", timeout=5, token="t1") == (QUEUED, "")
    assert committer.submit("u", "a", timeout=5, token="t1")[0] == QUEUED
    committer.flush(timeout=10)  # the group fails
    assert committer.submit("u", "a", timeout=5, token="t1")[0] == FAILED
    assert committer.submit("u", "b", timeout=5, token="t2") == (QUEUED, "")
    assert committer.submit("u", "c", timeout=5, token="t3") == (QUEUED, "")  # replaces b
    assert committer.submit("u", "b", timeout=5, token="t2")[0] == FAILED
    committer.flush(timeout=10)
    assert committer.submit("u", "c", timeout=5, token="t3")[0] == QUEUED
    assert committer.submit("u", "d", timeout=5, token="t4")[0] == LANDED_BEFORE
    assert committer.submit("u", "d", timeout=5, token="t4")[0] == LANDED_BEFORE
    assert table.failed == [[("u", "a")]] and table.commits == [[("u", "c")]]
    assert table.discarded == ["b", "d"]


def test_nothing_waits_without_a_bound():
    table = Table(held=True)
    committer = GroupCommitter(table.commit_batch, table.discard, interval=0, max_units=1)
    committer.submit("u0", 0, timeout=5)
    assert table.started.wait(10)
    # One unit is being committed (held), two more fill the queue.
    committer.submit("u1", 1, timeout=5)
    committer.submit("u2", 2, timeout=5)
    with pytest.raises(TimeoutError, match="queue stayed full"):
        committer.submit("u3", 3, timeout=0.3)
    with pytest.raises(TimeoutError, match="still not committed"):
        committer.flush(timeout=0.3)
    table.release.set()
    assert committer.flush(timeout=10)["units"] == 3


def test_the_ids_held_are_bounded_and_a_full_committer_commits_at_once():
    table = Table()
    committer = GroupCommitter(table.commit_batch, table.discard, interval=30, max_held_bytes=100)
    # Alone, a unit over the budget is taken.
    assert committer.submit("big", 0, timeout=5, size=500)[0] == QUEUED
    committer.flush(timeout=10)
    committer.submit("u0", 1, timeout=5, size=60)
    # u1 does not fit beside u0: the committer commits u0 at once (not
    # after its 30 s interval) and u1 gets its room.
    started = time.monotonic()
    assert committer.submit("u1", 2, timeout=5, size=60)[0] == QUEUED
    assert time.monotonic() - started < 5
    committer.flush(timeout=10)
    assert table.commits == [[("big", 0)], [("u0", 1)], [("u1", 2)]]
    assert committer._held_bytes == 0


def test_bad_bounds_are_refused():
    for kwargs in ({"max_units": 0}, {"interval": -1}):
        with pytest.raises(ValueError, match="must be"):
            GroupCommitter(lambda batch: {}, **kwargs)


def test_a_unit_without_an_outcome_fails_rather_than_waits():
    committer = GroupCommitter(lambda batch: {}, interval=0)
    kind, message = committer.commit("u", None, timeout=10)
    assert kind == FAILED and "no outcome" in message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 7),
            st.sampled_from(["now", "pause", "flush"]),
            st.integers(0, 60),
            st.booleans(),
        ),
        min_size=1,
        max_size=24,
    ),
    st.lists(st.booleans(), max_size=8),
    st.integers(1, 5),
    st.sampled_from([0.0, 0.005, 0.05]),
    st.sampled_from([0.0, 0.005]),
)
def test_drawn_schedules_commit_each_unit_once(submissions, failing, max_units, interval, slow):
    """Drawn submissions on threads (units repeat, as retries do; some
    after a pause, some followed by a flush; some sent twice with the same
    token, as a task whose answer was lost sends it again; drawn sizes
    against a budget of 100 bytes) and drawn failing commits:
    judged against the table's own record. Every payload is committed,
    discarded or in a failed commit, exactly once (a payload sent twice is
    never both committed and discarded: its files would be deleted under
    the table); no unit is committed twice; a unit answered "landed
    before" was committed; each unit is committed unless its every commit
    failed."""
    table = Table(failing=failing, slow=slow)
    committer = GroupCommitter(
        table.commit_batch,
        table.discard,
        interval=interval,
        max_units=max_units,
        max_held_bytes=100,
    )
    answers = {}
    lock = threading.Lock()

    def run(i, unit, how, size, again):
        if how == "pause":
            time.sleep(0.01)
        answer = committer.submit(f"u{unit}", i, timeout=30, size=size, token=f"t{i}")
        if again:
            answer = committer.submit(f"u{unit}", i, timeout=30, size=size, token=f"t{i}")
        if how == "flush":
            committer.flush(timeout=30)
        with lock:
            answers[i] = answer

    threads = [
        threading.Thread(target=run, args=(i, u, how, size, again))
        for i, (u, how, size, again) in enumerate(submissions)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a submission waited for ever"
    committer.flush(timeout=30)

    committed = [pair for commit in table.commits for pair in commit]
    failed = [pair for commit in table.failed for pair in commit]
    units = [u for u, _ in committed]
    assert len(units) == len(set(units)), f"a unit committed twice: {table.commits}"
    assert all(len(c) <= max_units for c in table.commits + table.failed)
    committed_payloads = [p for _, p in committed]
    assert not set(committed_payloads) & set(table.discarded), (
        "a payload committed and its files deleted"
    )
    # A payload sent twice too: its second send takes nothing more (a
    # failed group's files may be deleted: never taken again).
    accounted = committed_payloads + [p for _, p in failed] + table.discarded
    assert sorted(accounted) == list(range(len(submissions))), "a payload lost or used twice"
    for i, (unit, _, _, _) in enumerate(submissions):
        assert (f"u{unit}", i) in committed + failed or i in table.discarded
        if answers[i][0] == LANDED_BEFORE:
            assert f"u{unit}" in units
    for unit in {u for u, _, _, _ in submissions}:
        # The last commit of a unit decides: committed, or it failed.
        assert f"u{unit}" in units or any(u == f"u{unit}" for u, _ in failed)
    assert committer._in_flight == {} and committer._queue == {}
    assert committer._held_bytes == 0, "the bytes held were not all given back"
