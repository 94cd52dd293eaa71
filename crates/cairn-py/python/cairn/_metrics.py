"""cairn's metrics in this process: requests to stores (count, bytes,
latency, retries by cause, errors by kind, per operation and endpoint) and
checkpoint units and lease renewals, as counted by the Rust core."""

from __future__ import annotations

from typing import Dict, List, TypedDict

from . import _native


class Sample(TypedDict):
    """One sample of a metric: its labels and its value."""

    labels: Dict[str, str]
    value: float


def metrics() -> Dict[str, List[Sample]]:
    """Every cairn metric sample of this process, by sample name (counters
    end in ``_total``; a histogram gives ``_bucket``, ``_sum``, ``_count``).

    >>> import cairn
    >>> m = cairn.metrics()
    >>> m["cairn_checkpoint_units_total"][0]["labels"]["outcome"]
    'committed'
    >>> total = sum(s["value"] for s in m.get("cairn_store_requests_total", []))
    """
    found: Dict[str, List[Sample]] = {}
    for name, labels, value in _native.metric_samples():
        found.setdefault(name, []).append({"labels": dict(labels), "value": value})
    return found


def metrics_text() -> str:
    """Every cairn metric of this process as OpenMetrics text (what
    ``cairn job run --metrics-addr`` serves), for a Prometheus textfile
    collector or a push gateway.

    >>> import cairn
    >>> cairn.metrics_text().endswith("# EOF\\n")
    True
    """
    return _native.metrics_text()
