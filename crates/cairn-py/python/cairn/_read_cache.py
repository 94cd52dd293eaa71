"""The read cache of ``CairnFile``: read ahead only while reading in order.

fsspec's default (``readahead``) adds a block (5 MiB) to every read that
misses its cache, so random access (a Parquet footer, one column chunk, an
index lookup) fetches a block per small read. Here a read that starts
where the previous one ended (or at the start of the file) is sequential
and reads a block ahead, as fsspec's does; any other read fetches exactly
the bytes asked for, and keeps them (a read inside bytes already held
fetches nothing).
"""

from __future__ import annotations

from typing import Callable

from fsspec.caching import BaseCache, register_cache


class SequentialReadAheadCache(BaseCache):
    """fsspec's ``readahead`` cache for reads in order, exact ranges for
    the rest: ``cache_type="cairn-sequential"`` (``CairnFile``'s default)."""

    name = "cairn-sequential"

    def __init__(self, blocksize: int, fetcher: Callable[[int, int], bytes], size: int) -> None:
        super().__init__(blocksize, fetcher, size)
        self.cache = b""
        self.start = 0
        self.end = 0
        # Where the next read starts if the caller reads in order.
        self._next = 0

    def _fetch(self, start: int | None, end: int | None) -> bytes:
        start = 0 if start is None else start
        end = self.size if end is None or end > self.size else end
        if start >= self.size or start >= end:
            return b""
        sequential = start == self._next
        self._next = end
        if self.start <= start and end <= self.end:
            self.hit_count += 1
            return self.cache[start - self.start : end - self.start]
        self.miss_count += 1
        part = b""
        if self.start <= start < self.end:
            # The start is held: fetch only what follows it.
            part = self.cache[start - self.start :]
            start = self.end
        wanted = end - start
        if sequential:
            end = min(self.size, end + self.blocksize)
        self.total_requested_bytes += end - start
        self.cache = self.fetcher(start, end)
        self.start = start
        self.end = start + len(self.cache)
        return part + self.cache[:wanted]


register_cache(SequentialReadAheadCache, clobber=True)
