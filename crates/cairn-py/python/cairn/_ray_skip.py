"""``skip_committed``: the checkpoint filter placed after the step that
makes the key (a 1:N explode: a video's shots, a document's chunks), not
after the read, where the key does not exist yet.

Ray plans the filter where it plans the read: cairn's planning of it (see
``_ray_compat.plan_filter_operator``) asks :func:`take_for_skip` first.
When the plan being planned holds a ``skip_committed`` step, the read gets
no filter, and the committed set (the reference cairn's manager loaded) is
kept for that step under the token ``skip_committed`` made. The step's
actors get it through their constructor's argument, a :class:`_PlannedSet`
that becomes the planned set when Ray serialises the step (when the job
starts, after its planning); one made before any planning says so."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import ray
from ray.data import Dataset

from ._ray_compat import logical_ops_of, ops_being_planned
from ._ray_read import offer_committed, withdraw_committed

#: The set each skip step's token was planned with: (the checkpoint config,
#: the manager's reference, or None when nothing is committed).
_PLANNED: Dict[str, Tuple[Any, Any]] = {}


class _PlannedSet:
    """The committed set a skip step's actors filter by: resolved in the
    driver when Ray serialises the step, after cairn's planning of the job
    kept it under ``token``."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __reduce__(self) -> Any:
        # Taken once: Ray serialises a step's function once per job it
        # starts, and a later plan of the same dataset that cairn did not
        # plan (a take() after the write) must not filter by this job's set.
        planned = _PLANNED.pop(self.token, None)
        if planned is None:
            return (_unplanned, (self.token,))
        return (_ResolvedSet, planned)

    # Ray Data copies the logical plan while it optimises it: a copy is
    # the same handle, resolved only when serialised.
    def __copy__(self) -> "_PlannedSet":
        return self

    def __deepcopy__(self, memo: Any) -> "_PlannedSet":
        return self


class _ResolvedSet:
    """The checkpoint config and committed set (None: nothing committed) a
    skip step's actor filters by."""

    def __init__(self, config: Any, ref: Any) -> None:
        self.config = config
        self.ref = ref


class _Unplanned:
    """A skip step serialised before cairn planned a set for it."""

    def __init__(self, token: str) -> None:
        self.token = token


def _unplanned(token: str) -> _Unplanned:
    return _Unplanned(token)


def _refuse_unplanned(token: str) -> None:
    raise RuntimeError(
        "cairn.ray.skip_committed: this plan was not planned by cairn's checkpoint manager, "
        "so there is no committed set to skip by. A dataset with a skip step runs as the "
        "input of a write (ds.write_parquet(...), ...) under DataContext.get_current()."
        "checkpoint_config = cairn.ray.checkpoint_config(...), read with a Ray reader "
        "(read_parquet, read_json, ...); not through take(), count(), show(), iter_batches(), "
        f"streaming_split() or Ray Train's datasets= (step {token})"
    )


class _SkipCommitted:
    """The skip step's actor: the rows of each batch whose key is not
    committed, in their order."""

    def __init__(self, planned: Any) -> None:
        if isinstance(planned, _Unplanned):
            _refuse_unplanned(planned.token)
        if isinstance(planned, _PlannedSet):
            # Not serialised (run in the driver's process): resolved here.
            found = _PLANNED.get(planned.token)
            if found is None:
                _refuse_unplanned(planned.token)
            planned = _ResolvedSet(*found)
        config = planned.config
        self._filter = (
            None if planned.ref is None else config.checkpoint_filter_cls(config, planned.ref)
        )

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self._filter is None:
            return batch
        return self._filter.filter_rows_for_block(batch)


def _skip_steps(ops: List[Any]) -> List[Any]:
    """The skip steps among the logical operators ``ops``."""
    return [op for op in ops if getattr(op, "fn", None) is _SkipCommitted]


def skip_committed(ds: Dataset, *, concurrency: Optional[Tuple[int, int]] = None) -> Dataset:
    """``ds`` without the rows whose key is committed in the job's
    checkpoint, for a key made after the read (an explode: a video's shots,
    a document's chunks). Call it after the step that makes the key and
    before the expensive one, which then never runs again for a committed
    key; the read is not filtered. Once per job, as the input of a write.
    ``concurrency`` bounds the step's actors (each holds the committed set;
    they take no CPU): by default one to the cluster's CPU count when Ray
    is running at the call, else one.

    The step that makes the key must make the same keys from the same input
    on every run (a shot index from a deterministic detector, a chunk's
    number): a key made differently on a resume is a different row.

    Example::

        DataContext.get_current().checkpoint_config = cairn.ray.checkpoint_config(
            ["video", "shot_idx"], "s3://bucket/ckpt/shots"
        )
        shots = ray.data.read_parquet("s3://bucket/videos").flat_map(detect_shots)
        scored = cairn.ray.skip_committed(shots).map_batches(Captioner, concurrency=4)
        scored.write_parquet("s3://bucket/shots")
    """
    if _skip_steps(logical_ops_of(ds._logical_plan.dag)):
        raise ValueError(
            "cairn.ray.skip_committed was called on a dataset that already has a skip step: "
            "call it once, after the step that makes the key"
        )
    if concurrency is None:
        cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
        concurrency = (1, max(1, cpus))
    low, high = concurrency
    return ds.map_batches(
        _SkipCommitted,
        fn_constructor_args=(_PlannedSet(uuid.uuid4().hex),),
        batch_format="pyarrow",
        batch_size=None,
        zero_copy_batch=True,
        num_cpus=0,
        concurrency=(low, high),
    )


def take_for_skip(manager: Any, config: Any, ref: Any) -> Optional[Tuple[Any, Any, int]]:
    """When the plan being planned has a skip step, the step takes the
    committed set ``ref`` (None: nothing committed) of ``config``, and the
    read's filter is returned: (its config, its set's reference or None,
    the set's size), the set of the sources all of whose outputs are
    committed under source lineage (``manager.complete_sources``), else
    none. None when the plan has no skip step. Refuses a plan with more
    than one."""
    ops = ops_being_planned() or []
    steps = _skip_steps(ops)
    if not steps:
        return None
    if len(steps) > 1:
        raise ValueError(
            f"this job has {len(steps)} cairn.ray.skip_committed steps (a union or a join of "
            "datasets that each had one?): call it once, on the dataset that is written"
        )
    sources = [op for op in ops if not getattr(op, "input_dependencies", None)]
    if len(sources) > 1:
        raise ValueError(
            f"this job has a cairn.ray.skip_committed step and {len(sources)} sources (a union "
            "or a join): the reads the step does not follow would not be filtered. Skip "
            "after one read, or run one job per source"
        )
    token = steps[0].fn_constructor_args[0].token
    _PLANNED[token] = (config, ref)
    # The composite key's set is not offered to cairn's reader (the rows it
    # reads have no key); under source lineage, the complete sources' set
    # is, so the row groups of sources all of whose outputs are committed
    # are left unread.
    withdraw_committed(config.checkpoint_path)
    read_filter = getattr(manager, "complete_sources", None)
    if read_filter is None:
        return (config, None, 0)
    read_config, read_ref, size = read_filter
    if read_config is not config and read_ref is not None:
        offer_committed(
            getattr(manager, "_data_context", None),
            config.checkpoint_path,
            read_ref,
            column=read_config.id_column,
        )
    return read_filter
