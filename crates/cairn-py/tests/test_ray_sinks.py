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
    root = str(tmp_path)
    write_input(root)
    no_checkpoint.checkpoint_config = cairn.ray.checkpoint_config("uid", f"{root}/ckpt")
    ray.data.read_parquet(f"{root}/in").write_json(f"{root}/out")
    written = [n for n in os.listdir(f"{root}/out") if n.endswith(".json")]
    assert written, "the json sink wrote its files"


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
