"""A `--map-cmd` transform that returns each batch unchanged (the benchmark's
trivial transform on cairn's side, in Python like Ray's); exits with an error
on the uid given in FAIL_AT_UID."""

import os
import sys

import pyarrow as pa

fail_at = os.environ.get("FAIL_AT_UID")
reader = pa.ipc.open_stream(sys.stdin.buffer)
writer = None
for batch in reader:
    if fail_at is not None and int(fail_at) in batch.column("uid").to_pylist():
        sys.exit(f"injected failure at uid {fail_at}")
    if writer is None:
        writer = pa.ipc.new_stream(sys.stdout.buffer, batch.schema)
    writer.write_batch(batch)
    sys.stdout.buffer.flush()
