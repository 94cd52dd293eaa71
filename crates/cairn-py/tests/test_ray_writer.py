"""The checkpoint writer of write tasks under cairn's manager
(cairn._ray_writer): Ray's pending record, then a commit that is one move
of it, with no checks first. Against Garage behind a counting proxy (the
requests a commit sends), called as Ray's write planning calls it. Runs in
the Ray virtualenv (scripts/test.sh); elsewhere the tests show as
skipped."""

import doctest
import os

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.fs  # noqa: E402, F401 - pa.fs
import pyarrow.parquet as pq  # noqa: E402
from conftest import fresh, garage_options  # noqa: E402
from counting_proxy import CountingProxy  # noqa: E402
from ray.data._internal.planner.checkpoint import plan_write_op  # noqa: E402

import cairn.ray  # noqa: E402
from cairn._ray_writer import MovingCheckpointWriter  # noqa: E402


def _moving_writer(options, proxy, root):
    """The checkpoint config of ``root/ckpt`` through ``proxy`` and the
    writer Ray's write planning makes for it (cairn's)."""
    through = dict(options, endpoint_url=proxy.endpoint)
    config = cairn.ray.checkpoint_config("uid", f"s3://{root}/ckpt", through)
    writer = plan_write_op.CheckpointWriter.create(config)
    assert isinstance(writer, MovingCheckpointWriter)
    return config, writer


def test_a_unit_is_committed_by_one_move():
    """The writer Ray's planning makes for cairn's manager moves a unit's
    pending record (the copy and the delete: the writer wrote the record
    and tells the copy its size, so OpenDAL's copy asks nothing first) with
    no checks before it (Ray's own sends four more). A commit
    tried again after one that moved the record (its answer lost) succeeds
    and changes nothing; a retried task's commit moves its IDs over the
    earlier attempt's; one that finds neither record fails, naming both,
    and changes nothing. Ray's own manager keeps Ray's writer."""
    options = garage_options()
    root = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    with CountingProxy(options["endpoint_url"]) as proxy:
        config, writer = _moving_writer(options, proxy, root)
        ids = pa.array(range(10), pa.int64())
        pending = writer.write_pending_checkpoint(ids, "unit-1")
        proxy.reset()
        writer.commit_checkpoint(pending)
        sent = [(method, copies) for method, _, copies in proxy.log]
        assert sent == [("PUT", True), ("DELETE", False)], proxy.log

        filesystem = config.filesystem
        committed = pq.read_table(pending.committed_path, filesystem=filesystem)
        assert committed["uid"].to_pylist() == list(range(10))
        assert filesystem.get_file_info(pending.pending_path).type == pa.fs.FileType.NotFound

        writer.commit_checkpoint(pending)  # again: already moved
        assert filesystem.get_file_info(pending.committed_path).type == pa.fs.FileType.File

        # A retried task (its data file written again under the same name)
        # commits its own IDs over the earlier attempt's.
        again = writer.write_pending_checkpoint(pa.array(range(100, 105), pa.int64()), "unit-1")
        writer.commit_checkpoint(again)
        committed = pq.read_table(pending.committed_path, filesystem=filesystem)
        assert committed["uid"].to_pylist() == list(range(100, 105))

        filesystem.delete_file(pending.committed_path)
        with pytest.raises(FileNotFoundError, match="neither the pending") as refused:
            writer.commit_checkpoint(pending)
        assert pending.pending_path in str(refused.value)
        assert pending.committed_path in str(refused.value)
        listed = filesystem.get_file_info(pa.fs.FileSelector(f"{root}/ckpt", recursive=True))
        assert [i.path for i in listed if i.type == pa.fs.FileType.File] == []

    ray_config = ray.data.checkpoint.CheckpointConfig(
        id_column="uid",
        checkpoint_path=f"s3://{root}/ray-ckpt",
        override_filesystem=cairn.build_checkpoint_filesystem(f"s3://{root}/ray-ckpt", options),
    )
    assert not isinstance(plan_write_op.CheckpointWriter.create(ray_config), MovingCheckpointWriter)


def test_a_table_sinks_record_is_moved_with_a_look_first():
    """A table sink's pending record is written again with its ledger entry
    before the unit's table commit, so the size its first write had is not
    the record's: the writer gives it no size, and its move heads the
    record first (the copy is made on what the HEAD saw). The record moved
    is the rewritten one, entry and IDs."""
    from cairn._ray_table import LEDGER_KEY, id_record

    options = garage_options()
    root = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    with CountingProxy(options["endpoint_url"]) as proxy:
        config, writer = _moving_writer(options, proxy, root)
        # As where Ray plans a write through a table sink.
        writer._table_sink = True
        ids = pa.array(range(10), pa.int64())
        pending = writer.write_pending_checkpoint(ids, "unit-1")
        assert getattr(pending, "size", None) is None
        filesystem = config.filesystem
        with filesystem.open_output_stream(pending.pending_path) as out:
            out.write(id_record(ids, "uid", '{"snapshot": 7}'))
        proxy.reset()
        writer.commit_checkpoint(pending)
        sent = [(method, copies) for method, _, copies in proxy.log]
        assert sent == [("HEAD", False), ("PUT", True), ("DELETE", False)], proxy.log
        committed = pq.read_table(pending.committed_path, filesystem=filesystem)
        assert committed["uid"].to_pylist() == list(range(10))
        assert committed.schema.metadata[LEDGER_KEY.encode()] == b'{"snapshot": 7}'


def test_a_retry_of_a_unit_handed_to_the_committer_keeps_its_pending_record():
    """A table sink whose tasks hand their units to the job's committer
    (Iceberg's group commits): a retried task's pending record, which the
    committer may be writing the unit's ledger entry into, is kept as it is
    (the entry carried to the task), and written only when there is none;
    a unit handed over is not committed by the writer (no request: the
    committer commits it after its table commit)."""
    from cairn._ray_table import CARRIED_ENTRY, HANDED_OVER_KEY, LEDGER_KEY, id_record
    from ray.data._internal.execution.interfaces.task_context import TaskContext

    options = garage_options()
    root = fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])
    with CountingProxy(options["endpoint_url"]) as proxy:
        config, writer = _moving_writer(options, proxy, root)
        # As where Ray plans a write through a sink that hands units over.
        writer._table_sink = True
        writer._hands_over = True
        filesystem = config.filesystem
        ctx = TaskContext(task_idx=0, op_name="Write")
        TaskContext.set_current(ctx)
        try:
            # Outside a Ray task the attempt is unknown: a retry.
            first = writer.write_pending_checkpoint(pa.array(range(10), pa.int64()), "unit-1")
            with filesystem.open_output_stream(first.pending_path) as out:
                out.write(id_record(pa.array(range(10), pa.int64()), "uid", '{"snapshot": 7}'))
            again = writer.write_pending_checkpoint(pa.array(range(50, 55), pa.int64()), "unit-1")
            assert again.pending_path == first.pending_path
            assert ctx.kwargs[CARRIED_ENTRY] == '{"snapshot": 7}'
            kept = pq.read_table(first.pending_path, filesystem=filesystem)
            assert kept["uid"].to_pylist() == list(range(10))
            assert kept.schema.metadata[LEDGER_KEY.encode()] == b'{"snapshot": 7}'

            ctx.kwargs[HANDED_OVER_KEY] = True
            proxy.reset()
            writer.commit_checkpoint(again)
            assert proxy.log == [], "the writer committed a unit handed over"
            assert filesystem.get_file_info(first.pending_path).type == pa.fs.FileType.File

            # None there (the committer committed it and deleted it): written.
            filesystem.delete_file(first.pending_path)
            written = writer.write_pending_checkpoint(pa.array(range(50, 55), pa.int64()), "unit-1")
            read = pq.read_table(written.pending_path, filesystem=filesystem)
            assert read["uid"].to_pylist() == list(range(50, 55))
        finally:
            TaskContext.reset_current()


def test_the_filesystem_helpers_examples_run():
    import cairn._ray_fs

    failed, tried = doctest.testmod(cairn._ray_fs)
    assert tried > 0 and failed == 0
