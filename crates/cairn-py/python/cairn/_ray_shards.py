"""A committed set too large for one machine's filter budget, split by key
range into shards held by actors spread over the Ray cluster.

The driver never holds the set: it lists the committed ID files (with the
lease, after recovery), samples a few of them for the key ranges, starts
one :class:`ShardActor` per range (each asks Ray for the budget as its
memory, and Ray spreads them over the nodes), and loader tasks read the ID
files in parallel and send each shard the IDs of its range. A filter
actor then sends each block's keys to the shards they fall in and keeps the
rows none of them holds (:class:`ShardedSet`).

A shard actor that dies (its node lost) is restarted by Ray and reloads its
range itself, reading every ID file and keeping its keys; calls made to it
meanwhile are retried. IDs are placed by their routing key
(:func:`cairn._native.routing_keys`: an integer's bit pattern, a string's
fingerprint's high 64 bits); integer IDs travel as their keys (NumPy),
string IDs as they are (Arrow), so both shard alike.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ray

from ._native import NativeIdSetBuilder, routing_keys
from ._ray_fit import Demand, check_fit

logger = logging.getLogger("cairn.ray")

#: The memory a machine gives the committed set by default, in bytes.
DEFAULT_MAX_FILTER_MEMORY = 2 << 30

#: A shard's share of the ID files' bytes, as a part of the budget. Random
#: 64-bit IDs take ~8 bytes an ID in Parquet and ~4.5 in the set, and a
#: shard's actor peaks at ~3.2x its set while building it, plus the keys
#: it is sent (scripts/bench/ray_shards.sh): 0.35 keeps that peak within
#: the budget. Dense IDs and fingerprints take far less than their files.
_SET_SHARE_OF_BUDGET = 0.35

#: ID files read on the driver to place the shards' key ranges.
_SAMPLE_FILES = 16

#: The most shards a set is split into (past this, a shard is over budget).
_MAX_SHARDS = 1024

#: Past this many shards, a warning: each is a worker process, whose own
#: memory the budget does not count.
_MANY_SHARDS = 64

#: IDs sent to a shard per call.
_IDS_PER_CALL = 1 << 18

#: How long a shard actor may stay unplaced or unanswering (seconds) before
#: the job fails naming it, by default: long enough for a shard restarted on
#: another node to reload its range, short of an endless wait.
DEFAULT_SHARD_TIMEOUT = 600.0

_MIB = 1 << 20


class NotShardable(ValueError):
    """The IDs cannot be split over shards (none to sample)."""


class ShardUnavailable(TimeoutError):
    """A shard actor or a loader task was not placed, or did not answer,
    within its bound."""


def _plain(column: Any) -> pa.Array:
    """``column`` as one array of plain values (chunks joined, a dictionary
    decoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column


def routed(column: Any) -> tuple[pa.Array, np.ndarray]:
    """An ID column as one plain array and each row's routing key: an
    integer ID's key in the set (its bit pattern as ``uint64``: signed IDs
    widened to ``int64`` and viewed, so no copy for ``int64``), a string's
    from Rust (its fingerprint's high half). 0 for a null."""
    column = _plain(column)
    kind = column.type
    if pa.types.is_signed_integer(kind):
        wide = (
            column.cast(pa.int64()).fill_null(0) if column.null_count else column.cast(pa.int64())
        )
        return column, wide.to_numpy(zero_copy_only=False).view(np.uint64)
    if pa.types.is_unsigned_integer(kind):
        wide = (
            column.cast(pa.uint64()).fill_null(0) if column.null_count else column.cast(pa.uint64())
        )
        return column, wide.to_numpy(zero_copy_only=False)
    return column, routing_keys(column).to_numpy(zero_copy_only=False)


def _sendable(ids: pa.Array, keys: np.ndarray, rows: np.ndarray) -> Any:
    """The IDs at ``rows`` as a shard is sent them: an integer ID's routing
    key is its key in the set, so integers travel as a NumPy ``uint64``
    array (cheaper to take and to ship); strings as Arrow."""
    if pa.types.is_integer(ids.type):
        return keys[rows]
    return ids.take(pa.array(rows))


def _as_ids(ids: Any) -> pa.Array:
    """What a shard was sent, as an Arrow array of IDs (keys as ``uint64``)."""
    if isinstance(ids, np.ndarray):
        return pa.array(ids, type=pa.uint64())
    return ids


def _ids_of_file(path: str, filesystem: Any, id_column: str) -> tuple[pa.Array, np.ndarray]:
    """The non-null IDs of an ID file and their routing keys."""
    table = pq.read_table(path, columns=[id_column], filesystem=filesystem)
    column = _plain(table.column(0))
    if column.null_count:
        column = column.drop_null()
    return routed(column)


def _split(keys: np.ndarray, boundaries: np.ndarray) -> List[np.ndarray]:
    """Row indices by shard: shard ``i`` takes keys in ``[boundaries[i-1],
    boundaries[i])``."""
    index = np.searchsorted(boundaries, keys, side="right")
    order = np.argsort(index, kind="stable")
    counts = np.bincount(index, minlength=len(boundaries) + 1)
    return np.split(order, np.cumsum(counts)[:-1])


def _memory_of_this_process() -> Dict[str, int]:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) * 1024
    return {"rss": fields.get("VmRSS", 0), "peak": fields.get("VmHWM", 0)}


class Shard:
    """One shard of a committed set: the IDs whose keys lie in
    ``[low, high)`` (``high`` None: no upper end). Filled by the loader
    tasks at first; after a restart it reloads its range from ``files``.
    Runs as :class:`ShardActor`; the class itself serves tests in one
    process."""

    def __init__(
        self,
        files: Sequence[str],
        filesystem: Any,
        id_column: str,
        low: int,
        high: Optional[int],
        seal_every: int,
    ) -> None:
        self._started = _memory_of_this_process()["rss"]
        self._received = 0
        self._low, self._high = low, high
        self._builder: Optional[NativeIdSetBuilder] = NativeIdSetBuilder(seal_every)
        self._set: Any = None
        context = ray.get_runtime_context()
        if context.get_actor_id() is not None and context.was_current_actor_reconstructed:
            logger.warning("cairn: shard [%d, %s) restarted; reloading its range", low, high)
            for path in files:
                ids, keys = _ids_of_file(path, filesystem, id_column)
                mine = keys >= np.uint64(low)
                if high is not None:
                    mine &= keys < np.uint64(high)
                self.add(_sendable(ids, keys, np.nonzero(mine)[0]))
            self.seal()

    def add(self, ids: Any) -> None:
        """Adds IDs of this shard's range. A shard restarted while it was
        being loaded has reloaded its whole range already: the loader's
        retried calls add nothing."""
        if self._builder is None:
            return
        self._builder.push(_as_ids(ids))
        self._received += len(ids)

    def received(self) -> int:
        """How many IDs the loaders have sent this shard so far."""
        return self._received

    def ready(self) -> bool:
        """Answers once the actor is placed and built."""
        return True

    def seal(self) -> Dict[str, int]:
        """Builds the shard's set: its size and this actor's memory."""
        if self._set is None:
            assert self._builder is not None
            self._set = self._builder.build()
            self._builder = None
        return {"ids": len(self._set), "set_bytes": self._set.memory_bytes(), **self.memory()}

    def committed(self, ids: Any) -> np.ndarray:
        """For each ID, whether it is committed."""
        return ~self._set.uncommitted(_as_ids(ids)).to_numpy(zero_copy_only=False)

    def covers(self, queries: Sequence[Tuple[int, int, int]], by_row_hash: bool) -> List[bool]:
        """For each row group asked about, whether every one of its IDs that
        falls in this shard's range is committed: ``(seed, first_row,
        rows)`` of ``row_hash`` IDs, else ``(min, max, 0)`` of a signed
        integer ID column's statistics."""
        return covers_each(self._set, queries, by_row_hash, self._low, self._high)

    def memory(self) -> Dict[str, int]:
        """This actor's resident and peak memory, and its peak growth since
        it started (what the shard took beyond the Python worker), in bytes."""
        memory = _memory_of_this_process()
        return {**memory, "growth": memory["peak"] - self._started}


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class ShardActor(Shard):
    """:class:`Shard` as a Ray actor (its worker named ``ray::ShardActor``):
    restarted when it dies (its node lost), the calls made to it meanwhile
    retried."""


def covers_each(
    id_set: Any,
    queries: Sequence[Tuple[int, int, int]],
    by_row_hash: bool,
    key_low: int = 0,
    key_high: Optional[int] = None,
) -> List[bool]:
    """For each row group asked about, whether every one of its IDs whose
    key lies in ``[key_low, key_high)`` is in ``id_set`` (a
    :class:`NativeIdSet`; the whole key space by default): ``(seed,
    first_row, rows)`` of ``row_hash`` IDs, else ``(min, max, 0)`` of a
    signed integer ID column's statistics."""
    if by_row_hash:
        return [
            id_set.covers_row_hashes(seed, first, rows, key_low, key_high)
            for seed, first, rows in queries
        ]
    return [
        all(id_set.covers_int_range(a, b) for a, b in _ints_in(low, high, key_low, key_high))
        for low, high, _ in queries
    ]


def _ints_in(low: int, high: int, key_low: int, key_high: Optional[int]) -> List[Tuple[int, int]]:
    """The signed integers from ``low`` to ``high`` (inclusive) whose keys
    (their 64-bit patterns) lie in ``[key_low, key_high)``, as inclusive
    ranges: keys below 2^63 are the non-negative integers, the others the
    negative ones (``key - 2^64``)."""
    top = key_high if key_high is not None else 1 << 64
    ranges = []
    for key_a, key_b, shift in (
        (key_low, min(top, 1 << 63), 0),
        (max(key_low, 1 << 63), top, 1 << 64),
    ):
        a, b = max(low, key_a - shift), min(high, key_b - 1 - shift)
        if key_a < key_b and a <= b:
            ranges.append((a, b))
    return ranges


@ray.remote(num_cpus=1)
def _load_into_shards(
    files: Sequence[str],
    filesystem: Any,
    id_column: str,
    boundaries: np.ndarray,
    shards: Sequence[Any],
    timeout: float = DEFAULT_SHARD_TIMEOUT,
) -> int:
    """Reads ``files`` and sends each shard the IDs of its range; the
    number of IDs read. A shard that takes none of its IDs within
    ``timeout`` seconds fails the task."""
    held: List[List[Any]] = [[] for _ in shards]
    held_ids = [0] * len(shards)
    sent = []
    total = 0

    def send(i: int) -> None:
        if held[i]:
            parts = held[i]
            joined = (
                np.concatenate(parts)
                if isinstance(parts[0], np.ndarray)
                else pa.concat_arrays(parts)
            )
            sent.append(shards[i].add.remote(joined))
            held[i], held_ids[i] = [], 0

    for path in files:
        ids, keys = _ids_of_file(path, filesystem, id_column)
        total += len(ids)
        for i, rows in enumerate(_split(keys, boundaries)):
            if len(rows):
                held[i].append(_sendable(ids, keys, rows))
                held_ids[i] += len(rows)
                if held_ids[i] >= _IDS_PER_CALL:
                    send(i)
        # IDs in flight to the shards are bounded: wait for what was sent.
        if len(sent) > 2 * len(shards):
            _each_within(sent, timeout, "shard actors taking their IDs", len(shards))
            sent.clear()
    for i in range(len(shards)):
        send(i)
    _each_within(sent, timeout, "shard actors taking their IDs", len(shards))
    return total


def _each_within(
    refs: List[Any],
    timeout: float,
    what: str,
    of: int,
    progress: Optional[Callable[[], int]] = None,
) -> List[Any]:
    """The values of ``refs``, waiting at most ``timeout`` seconds at a
    time for the next one to be ready, or (with ``progress``) for the
    count it returns to grow: ``ShardUnavailable`` naming ``what`` when
    neither happens (a task no node has a free CPU for, an actor gone for
    good)."""
    pending = list(refs)
    seen = progress() if progress is not None else 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
        if ready:
            continue
        now = progress() if progress is not None else seen
        if now > seen:
            seen = now
            continue
        raise ShardUnavailable(
            f"cairn: {len(pending)} of the {what} ({of} in all) made no progress in "
            f"{timeout:.0f} s: the cluster has no free CPU for them (other work holds it), or "
            "a shard actor is gone. Free the cluster, or raise shard_timeout in "
            "cairn.ray.checkpoint_config; the run can be started again"
        )
    return ray.get(list(refs))


@dataclass
class ShardedSet:
    """What :class:`cairn.ray.CheckpointManager` hands the filter actors
    when the set is sharded: the key ranges and the shard actors."""

    boundaries: np.ndarray
    shards: List[Any]
    ids: int
    set_bytes: int
    #: Bytes of keys sent to the shards and answers received, in this process.
    moved_bytes: int = 0
    #: Seconds a shard may take to answer (restarted and reloading
    #: included) before the filter fails naming it.
    timeout: float = DEFAULT_SHARD_TIMEOUT
    #: Each shard's memory request, for messages.
    budget: int = 0

    def _range(self, shard: int) -> str:
        low = 0 if shard == 0 else int(self.boundaries[shard - 1])
        high = int(self.boundaries[shard]) if shard < len(self.boundaries) else None
        return f"[{low}, {'end' if high is None else high})"

    def _answers(self, asked: List[Tuple[int, Any]]) -> List[Any]:
        """The answers of the shards asked (``(shard, ref)``), each within
        the bound: a shard that stays pending (its node lost and no other
        with room for it) is named in the error, never waited on for ever."""
        answers = []
        deadline = time.monotonic() + self.timeout
        for shard, ref in asked:
            try:
                answers.append(ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except ray.exceptions.GetTimeoutError:
                raise ShardUnavailable(
                    f"cairn: shard {shard} of the committed set (keys {self._range(shard)}) "
                    f"did not answer within {self.timeout:.0f} s: it is not placed (a node with "
                    f"{self.budget / _MIB:.0f} MiB of Ray's memory resource free is needed), or "
                    "is still reloading its range after a restart. Add memory to the cluster, "
                    "or raise shard_timeout in cairn.ray.checkpoint_config; the run can be "
                    "resumed"
                ) from None
        return answers

    def committed(self, column: Any) -> np.ndarray:
        """For each row of the ID column ``column``, whether its ID is
        committed (a null never is), asking each shard about its IDs."""
        ids, keys = routed(column)
        index = np.searchsorted(self.boundaries, keys, side="right")
        answers = np.zeros(len(keys), dtype=bool)
        rows_asked = []
        asked = []
        for shard in np.unique(index):
            rows = np.nonzero(index == shard)[0]
            part = _sendable(ids, keys, rows)
            self.moved_bytes += part.nbytes
            rows_asked.append(rows)
            asked.append((int(shard), self.shards[shard].committed.remote(part)))
        for rows, got in zip(rows_asked, self._answers(asked)):
            answers[rows] = got
            self.moved_bytes += got.nbytes
        if ids.null_count:
            answers &= ids.is_valid().to_numpy(zero_copy_only=False)
        return answers

    def __len__(self) -> int:
        return self.ids

    def covers(self, queries: Sequence[Tuple[int, int, int]], by_row_hash: bool) -> List[bool]:
        """For each row group asked about (see :meth:`ShardActor.covers`),
        whether its IDs are all committed: every shard answers for its own
        range, all at once, and a group is covered when each says so."""
        if not queries:
            return []
        answers = self._answers(
            [
                (i, shard.covers.remote(list(queries), by_row_hash))
                for i, shard in enumerate(self.shards)
            ]
        )
        return [all(column) for column in zip(*answers)]


def build_sharded_set(
    files: List[str],
    filesystem: Any,
    id_column: str,
    estimated_bytes: int,
    budget: int,
    other_actors: Sequence[Demand] = (),
    timeout: float = DEFAULT_SHARD_TIMEOUT,
) -> ShardedSet:
    """Loads the committed ID files ``files`` (paths on the pyarrow
    ``filesystem``) into shards of at most ``budget`` bytes each. Refused
    before any shard starts when the cluster's nodes cannot hold the shards
    and ``other_actors`` (the filter actors) at once; a shard not started
    within ``timeout`` seconds fails the load, naming it, and so does a
    load in which, for ``timeout`` seconds, no loader task ends and the
    shards take no IDs."""
    count = max(2, math.ceil(estimated_bytes / (budget * _SET_SHARE_OF_BUDGET)))
    if count > _MAX_SHARDS:
        logger.warning(
            "cairn: %d bytes of committed ID files at max_filter_memory=%d would take %d "
            "shards; %d are used, each over the budget",
            estimated_bytes,
            budget,
            count,
            _MAX_SHARDS,
        )
        count = _MAX_SHARDS
    elif count > _MANY_SHARDS:
        logger.warning(
            "cairn: %d bytes of committed ID files at max_filter_memory=%d take %d shards, "
            "each a Ray actor process of its own (~100 MiB besides its set): raise "
            "max_filter_memory for fewer, larger shards",
            estimated_bytes,
            budget,
            count,
        )
    step = max(1, len(files) // _SAMPLE_FILES)
    sample = np.sort(
        np.concatenate(
            [_ids_of_file(p, filesystem, id_column)[1] for p in files[::step][:_SAMPLE_FILES]]
        )
    )
    if len(sample) == 0:
        raise NotShardable("the sampled ID files hold no IDs")
    boundaries = np.unique(sample[(np.arange(1, count) * len(sample)) // count])
    count = len(boundaries) + 1
    # Loose keys sealed at a sixteenth of the budget.
    seal_every = max(1 << 16, budget // 16 // 8)
    lows = [0, *[int(b) for b in boundaries]]
    highs = [*[int(b) for b in boundaries], None]
    check_fit(
        [Demand("shard actors", {"memory": float(budget)})] * count + list(other_actors),
        None,
        f"Raise max_filter_memory (fewer, larger shards: {estimated_bytes} bytes of committed "
        "ID files), add nodes or memory, or lower checkpoint_actor_memory_bytes on the "
        "CheckpointConfig",
    )
    shards = [
        ShardActor.options(memory=budget, scheduling_strategy="SPREAD").remote(
            files, filesystem, id_column, low, high, seal_every
        )
        for low, high in zip(lows, highs)
    ]
    sharded = ShardedSet(boundaries, shards, 0, 0, timeout=timeout, budget=budget)
    try:
        sharded._answers([(i, shard.ready.remote()) for i, shard in enumerate(shards)])
    except ShardUnavailable:
        for shard in shards:
            ray.kill(shard)
        raise
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    tasks = min(len(files), 2 * cpus)
    loaders = [
        _load_into_shards.remote(
            files[t::tasks], filesystem, id_column, boundaries, shards, timeout
        )
        for t in range(tasks)
    ]

    def sent() -> int:
        try:
            return sum(ray.get([s.received.remote() for s in shards], timeout=timeout))
        except ray.exceptions.GetTimeoutError:
            return -1  # a shard that does not answer: no progress

    try:
        loaded = sum(
            _each_within(loaders, timeout, "loader tasks of the committed set", tasks, sent)
        )
        sealed = _each_within(
            [s.seal.remote() for s in shards], timeout, "shard actors sealing their sets", count
        )
    except ShardUnavailable:
        for ref in loaders:
            ray.cancel(ref, force=True)
        for shard in shards:
            ray.kill(shard)
        raise
    ids = sum(s["ids"] for s in sealed)
    set_bytes = sum(s["set_bytes"] for s in sealed)
    logger.info(
        "cairn: %d committed IDs (%d read) in %d shards of at most %d bytes each "
        "(sets of %s bytes; shard actors' peak growth %s bytes)",
        ids,
        loaded,
        count,
        budget,
        [s["set_bytes"] for s in sealed],
        [s["growth"] for s in sealed],
    )
    sharded.ids, sharded.set_bytes = ids, set_bytes
    return sharded
