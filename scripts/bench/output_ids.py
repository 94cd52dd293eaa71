"""What a run over a finished job's output pays at its start (issue 64):
reading back the IDs the output holds into cairn's ID set
(cairn._ray_output: a projected scan, file by file, then the set), beside
pyarrow's bare read of the same column (the floor: the bytes read and
decoded, no set) in the same run. Writes `--rows` rows of (uid int64,
text) as `--files` Parquet files under a temporary directory on local
disk, then prints one JSON line per way.

    python3 scripts/bench/output_ids.py --rows 10000000 --files 100
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from cairn import CairnFileSystem
from cairn._ray_output import committed_set, output_ids


class ParquetDatasink:
    """Named as Ray's Parquet sink."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--ids", choices=["int", "string"], default="int")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        out = f"{root}/out"
        os.makedirs(out)
        per = args.rows // args.files
        rng = np.random.default_rng(7)
        for f in range(args.files):
            uids = np.arange(f * per, (f + 1) * per, dtype=np.int64)
            rng.shuffle(uids)
            column = pa.array(uids) if args.ids == "int" else pa.array(uids.astype(str))
            text = pa.array(np.full(per, "x" * 64))
            pq.write_table(
                pa.table({"uid": column, "text": text}), f"{out}/part-{f:05}.parquet"
            )
        size = sum(os.path.getsize(f"{out}/{n}") for n in os.listdir(out))

        started = time.monotonic()
        table = pads.dataset(out, format="parquet").to_table(columns=["uid"])
        bare = time.monotonic() - started
        print(
            json.dumps(
                {"way": "pyarrow column read", "rows": table.num_rows, "seconds": bare}
            )
        )
        del table

        started = time.monotonic()
        fs = CairnFileSystem("file")
        data, count = committed_set(output_ids(ParquetDatasink(), None, fs, out, "uid"))
        took = time.monotonic() - started
        print(
            json.dumps(
                {
                    "way": "cairn read-back + set",
                    "rows": count,
                    "seconds": took,
                    "set_bytes": int(data.nbytes),
                    "bytes_per_id": data.nbytes / max(count, 1),
                    "output_bytes": size,
                }
            )
        )


if __name__ == "__main__":
    main()
