"""Which of Ray 2.60's sinks cairn.ray's checkpoint manager takes: its file
sinks (exactly once under cairn), and no sink that writes no files (a table:
write_delta; a database: write_sql), whose units Ray checkpoints after their
rows are sent and whose table commit waits for the end of the job, so a
killed job would lose or repeat rows. Refused on the first run already,
before anything is written. Runs in the Ray virtualenv (scripts/test.sh);
elsewhere the tests show as skipped."""

import os
import sqlite3

import pytest

ray = pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import cairn.ray  # noqa: E402


def write_input(root):
    os.makedirs(f"{root}/in")
    table = pa.table(
        {"uid": pa.array(range(100), pa.int64()), "text": [str(i) for i in range(100)]}
    )
    pq.write_table(table, f"{root}/in/part-0.parquet")


def test_a_file_sink_is_taken(local_ray, no_checkpoint, tmp_path):
    """And Ray's delete of the checkpoint on success is cairn's clean-up,
    which deletes what the protocol wrote and keeps anyone else's file; its
    completion marker stays until the driver exits."""
    root = str(tmp_path)
    write_input(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config("uid", f"{root}/ckpt")
    with open(f"{root}/ckpt/notes.txt", "w") as f:
        f.write("not cairn's")
    ray.data.read_parquet(f"{root}/in").write_json(f"{root}/out")
    written = [n for n in os.listdir(f"{root}/out") if n.endswith(".json")]
    assert written, "the json sink wrote its files"
    assert sorted(os.listdir(f"{root}/ckpt")) == [".cairn-complete", "notes.txt"]
    cairn._ray_manager._remove_markers()  # what the exit handler does, Ray kept up
    assert os.listdir(f"{root}/ckpt") == ["notes.txt"]


def test_a_failed_jobs_checkpoint_deleted_by_hand_is_a_plain_delete(
    local_ray, no_checkpoint, tmp_path
):
    """cairn's clean-up (which marks the job finished while it deletes)
    runs only for Ray's delete after a job succeeded; the user's own
    delete_dir of a failed job's checkpoint, through the same filesystem,
    removes the directory whole and leaves no marker behind."""
    root = str(tmp_path)
    write_input(root)
    config = cairn.ray.checkpoint_config("uid", f"{root}/ckpt")
    no_checkpoint.checkpoint_config = config

    def fail(batch):
        raise RuntimeError("the transform failed")

    with pytest.raises(Exception, match="the transform failed"):
        ray.data.read_parquet(f"{root}/in").map_batches(fail).write_json(f"{root}/out")
    assert os.path.exists(f"{root}/ckpt/.cairn-job.json"), "the run bound its checkpoint"
    with open(f"{root}/ckpt/notes.txt", "w") as f:
        f.write("not cairn's")
    config.filesystem.delete_dir(f"{root}/ckpt")
    assert not os.path.exists(f"{root}/ckpt")


def test_a_table_sink_is_refused_before_anything_is_written(local_ray, no_checkpoint, tmp_path):
    pytest.importorskip(
        "deltalake", reason="write_delta needs deltalake: scripts/test.sh installs it"
    )
    root = str(tmp_path)
    write_input(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config("uid", f"{root}/ckpt")
    with pytest.raises(Exception, match=r"refuses .* DeltaDatasink.*write_parquet"):
        ray.data.read_parquet(f"{root}/in").write_delta(f"{root}/table")
    assert not os.path.exists(f"{root}/table/_delta_log"), "no table commit"
    assert not [n for n in os.listdir(f"{root}/ckpt") if n.endswith(".parquet")], "no unit"


def test_a_database_sink_is_refused_before_anything_is_written(local_ray, no_checkpoint, tmp_path):
    root = str(tmp_path)
    write_input(root)
    database = f"{root}/rows.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE rows (uid INTEGER, text TEXT)")
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config("uid", f"{root}/ckpt")
    with pytest.raises(Exception, match=r"refuses .* SQLDatasink"):
        ray.data.read_parquet(f"{root}/in").write_sql(
            "INSERT INTO rows VALUES (?, ?)", lambda: sqlite3.connect(database)
        )
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT COUNT(*) FROM rows").fetchone() == (0,)


def test_a_delta_table_through_cairns_sink_is_taken_and_bound_to_its_log(
    local_ray, no_checkpoint, tmp_path
):
    """cairn.ray.DeltaDatasink is taken: each unit lands in the table with
    its transaction. A run again on the same checkpoint after the table was
    replaced (its log no longer records the committed units) is refused
    before anything is written, naming the table."""
    pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake")
    import shutil

    from deltalake import DeltaTable

    root = str(tmp_path)
    write_input(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config(
        "uid", f"{root}/ckpt", delete_checkpoint_on_success=False
    )
    ray.data.read_parquet(f"{root}/in").write_datasink(cairn.ray.DeltaDatasink(f"{root}/table"))
    table = DeltaTable(f"{root}/table")
    assert sorted(table.to_pyarrow_table()["uid"].to_pylist()) == list(range(100))
    units = [n[: -len(".parquet")] for n in os.listdir(f"{root}/ckpt") if n.endswith(".parquet")]
    assert units and all(table.transaction_version(f"cairn:{u}") == 1 for u in units)

    shutil.rmtree(f"{root}/table")
    with pytest.raises(Exception, match=r"not in the table .*table's log"):
        ray.data.read_parquet(f"{root}/in").write_datasink(cairn.ray.DeltaDatasink(f"{root}/table"))
    assert not os.path.exists(f"{root}/table/_delta_log"), "nothing written"


def test_cairns_delta_sink_refuses_rays_own_manager(local_ray, no_checkpoint, tmp_path):
    """Ray's manager would roll back a unit the table already holds (its rows
    then written twice): the sink refuses it before anything is written."""
    pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake")
    from ray.data.checkpoint import CheckpointConfig

    root = str(tmp_path)
    write_input(root)
    no_checkpoint.checkpoint_config = CheckpointConfig(
        id_column="uid", checkpoint_path=f"{root}/ckpt"
    )
    with pytest.raises(Exception, match=r"needs cairn's checkpoint manager"):
        ray.data.read_parquet(f"{root}/in").write_datasink(cairn.ray.DeltaDatasink(f"{root}/table"))
    assert not os.path.exists(f"{root}/table/_delta_log"), "no table commit"


def test_cairns_iceberg_sink_names_a_missing_table(tmp_path):
    pytest.importorskip("pyiceberg", reason="scripts/test.sh installs pyiceberg")
    catalog = {"name": "t", "type": "sql", "uri": f"sqlite:///{tmp_path}/c.db"}
    catalog["warehouse"] = f"file://{tmp_path}/wh"
    with pytest.raises(ValueError, match=r"no table 'db.missing'; create it first"):
        cairn.ray.IcebergDatasink("db.missing", catalog)
