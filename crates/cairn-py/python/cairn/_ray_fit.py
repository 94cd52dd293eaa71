"""Whether the actors a resumed Ray Data job keeps alive, with one task
beside them, fit the cluster's nodes, judged before the job starts: cairn's
own actors that no node can hold are refused (:func:`check_fit`), and a job
whose actors leave no room for a read is named with the numbers
(:func:`misfit`; the manager warns, since a cluster whose autoscaler Ray
cannot see may still add the nodes it needs).

A job's actors (its actor pools' smallest size, cairn's filter and shard
actors) hold their resources for the whole job; its tasks (reads, writes,
task-based maps) take turns on what is left. If no node has room for one
read task once the actors are placed, the reads never run and Ray waits
without an end: its autoscaler reports the demand as pending and nothing
fails. Actors are placed first fit, the hardest to place first, over the
nodes alive when the job is planned. :func:`check_fit` does not judge a
cluster whose autoscaler Ray reports can add nodes (what it can grow to is
its provider's to say); the waits of cairn's own actors are bounded there
all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

import ray

from ._ray_compat import cluster_can_grow

_MIB = 1 << 20

#: Node resources that say where a node is or what it holds, never asked for
#: as an amount by a job: left out of the messages.
_LABEL_PREFIXES = ("node:", "accelerator_type:")


@dataclass(frozen=True)
class Demand:
    """What one actor or task asks Ray for: ``resources`` by Ray's names
    (``CPU``, ``GPU``, ``memory`` in bytes, custom names)."""

    what: str
    resources: Mapping[str, float] = field(default_factory=dict)

    @staticmethod
    def of_remote_args(what: str, args: Mapping[str, object], cpus: float = 1.0) -> "Demand":
        """The demand of ``ray.remote`` arguments (``num_cpus``, defaulting
        to ``cpus`` as Ray Data's map operators do; ``num_gpus``,
        ``memory``, ``resources``)."""
        resources: Dict[str, float] = {}
        num_cpus = args.get("num_cpus")
        resources["CPU"] = float(cpus if num_cpus is None else num_cpus)  # type: ignore[arg-type]
        for key, name in (("num_gpus", "GPU"), ("memory", "memory")):
            value = args.get(key)
            if value:
                resources[name] = float(value)  # type: ignore[arg-type]
        custom = args.get("resources") or {}
        for name, value in dict(custom).items():  # type: ignore[call-overload]
            resources[str(name)] = float(value)
        return Demand(what, {k: v for k, v in resources.items() if v > 0})


def _nodes() -> List[Dict[str, float]]:
    return [
        {str(k): float(v) for k, v in node.get("Resources", {}).items()}
        for node in ray.nodes()
        if node.get("Alive", node.get("alive", False))
    ]


def _fits(demand: Demand, free: Mapping[str, float]) -> bool:
    return all(free.get(name, 0.0) + 1e-9 >= amount for name, amount in demand.resources.items())


def _amount(name: str, value: float) -> str:
    if name == "memory":
        return f"{value / _MIB:.0f} MiB"
    return f"{value:g} {name}"


def _described(resources: Mapping[str, float]) -> str:
    shown = [
        _amount(name, value)
        for name, value in sorted(resources.items(), key=lambda kv: (kv[0] != "memory", kv[0]))
        if value > 0 and not name.startswith(_LABEL_PREFIXES) and name != "object_store_memory"
    ]
    return ", ".join(shown) or "nothing"


def check_fit(actors: Sequence[Demand], task: Optional[Demand], advice: str) -> None:
    """Refuses (``ValueError``) ``actors`` that the cluster's live nodes
    cannot hold all at once, or that leave no node room for one ``task``:
    Ray would wait for ever. The message lists what was asked, what each
    node has and ``advice``. Not judged on a cluster that can grow."""
    if cluster_can_grow():
        return
    found = misfit(actors, task)
    if found is not None:
        raise ValueError(f"cairn: {found}: Ray would wait for ever to start them. {advice}")


def misfit(actors: Sequence[Demand], task: Optional[Demand]) -> Optional[str]:
    """None when the cluster's live nodes hold ``actors`` all at once with
    room left on one of them for ``task``; else what was asked and what
    each node has."""
    nodes = _nodes()
    totals: Dict[str, float] = {}
    for node in nodes:
        for name, value in node.items():
            totals[name] = totals.get(name, 0.0) + value

    def hardness(demand: Demand) -> float:
        # The largest share of the cluster's total any of its resources
        # takes: the actors that leave the fewest places go first.
        return (
            max(
                (amount / totals[name] if totals.get(name) else float("inf"))
                for name, amount in demand.resources.items()
            )
            if demand.resources
            else 0.0
        )

    free = [dict(node) for node in nodes]
    placed = True
    for demand in sorted(actors, key=hardness, reverse=True):
        for room in free:
            if _fits(demand, room):
                for name, amount in demand.resources.items():
                    room[name] = room.get(name, 0.0) - amount
                break
        else:
            placed = False
            break
    if placed and (task is None or any(_fits(task, room) for room in free)):
        return None
    kinds: Dict[tuple, int] = {}
    for demand in actors:
        key = (demand.what, _described(demand.resources))
        kinds[key] = kinds.get(key, 0) + 1
    asked = [f"{count} {what} of {needs}" for (what, needs), count in kinds.items()]
    if task is not None:
        asked.append(f"and one {task.what} of {_described(task.resources)} beside them")
    shown = "; ".join(f"node {i + 1}: {_described(node)}" for i, node in enumerate(nodes))
    return (
        f"this job needs {', '.join(asked)}, which the cluster's nodes "
        f"({shown or 'none'}) cannot hold at once"
    )
