"""cairn's metrics in Ray's own metrics (``ray.util.metrics``), so that a
Ray job's requests, bytes, retries and commits through cairn appear in
Ray's dashboard and on each node's Prometheus endpoint (Ray exports
metrics when ``ray[default]`` is installed), named ``ray_cairn_...``.

Each process that uses cairn reports its own counts: the driver when it
calls :func:`report_metrics`, and every Ray worker that loads cairn when the
job's runtime environment sets ``CAIRN_RAY_METRICS_INTERVAL_S``. Counts are
reported as Ray counters (increments since the last report), so Ray sums
them over the processes of a node."""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Optional, Tuple

from ._metrics import metrics

#: Set in a job's ``runtime_env`` ``env_vars`` to have every Ray worker that
#: loads cairn report its counts this often (seconds).
INTERVAL_VARIABLE = "CAIRN_RAY_METRICS_INTERVAL_S"

_lock = threading.Lock()
_reporter: Optional["_Reporter"] = None


class _Reporter:
    """Copies this process's cairn counters into Ray counters."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._counters: Dict[str, Any] = {}
        self._reported: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cairn-ray-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.report()

    def report(self) -> None:
        """Sends what was counted since the last report."""
        from ray.util.metrics import Counter

        for name, samples in metrics().items():
            # Totals only: counters and a histogram's _sum and _count (its
            # buckets would be a series each).
            if not name.endswith(("_total", "_sum", "_count")):
                continue
            for sample in samples:
                labels = tuple(sorted(sample["labels"].items()))
                key = (name, labels)
                delta = sample["value"] - self._reported.get(key, 0.0)
                if delta <= 0:
                    continue
                counter = self._counters.get(name)
                if counter is None:
                    counter = Counter(
                        name,
                        description=f"cairn's {name}, from the cairn Python package",
                        tag_keys=tuple(k for k, _ in labels),
                    )
                    self._counters[name] = counter
                counter.inc(delta, tags=dict(labels))
                self._reported[key] = sample["value"]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.report()


def report_metrics(interval_s: float = 5.0) -> None:
    """Reports this process's cairn metrics to Ray every ``interval_s``
    seconds, from a background thread, until the process ends (or
    :func:`flush_metrics` stops it). Calling it again changes nothing.

    To have Ray's workers report theirs (the writes and the checkpoint
    filter run there), start Ray with
    ``runtime_env={"env_vars": {"CAIRN_RAY_METRICS_INTERVAL_S": "5"}}``.

    >>> import cairn.ray
    >>> cairn.ray.report_metrics.__name__
    'report_metrics'
    """
    global _reporter
    if interval_s <= 0:
        raise ValueError(f"report_metrics: interval_s must be > 0, not {interval_s}")
    with _lock:
        if _reporter is None:
            _reporter = _Reporter(interval_s)
            _reporter.start()


def flush_metrics() -> None:
    """Sends this process's counts to Ray now and stops its reporter (at
    the end of a driver, so the last counts are not left behind)."""
    global _reporter
    with _lock:
        reporter, _reporter = _reporter, None
    if reporter is not None:
        reporter.stop()


def start_from_environment() -> None:
    """In a Ray worker whose environment sets ``CAIRN_RAY_METRICS_INTERVAL_S``:
    starts reporting (called when cairn is loaded)."""
    value = os.environ.get(INTERVAL_VARIABLE)
    if not value:
        return
    try:
        interval_s = float(value)
    except ValueError:
        raise ValueError(
            f"{INTERVAL_VARIABLE}={value!r}: give the reporting interval in seconds, e.g. 5"
        ) from None
    import ray

    if ray.is_initialized():
        report_metrics(interval_s)
