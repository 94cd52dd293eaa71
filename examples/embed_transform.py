#!/usr/bin/env python3
"""An embedding-style transform for `cairn job run --map-cmd`.

cairn starts one copy of this program per worker and keeps it running. It
sends Arrow IPC stream batches on stdin; for each batch read, the program
writes one batch on stdout (any number of rows, keeping the ID column).

Here each `text` gets a small vector: a stand-in for a real model call
(load the model once at start, call it per batch). Only pyarrow is needed.

    cairn job run --input in/ --output out/ --checkpoint /abs/ckpt \
        --id-column uid --map-cmd 'python3 examples/embed_transform.py'

Options (environment): EMBED_DIM (default 8); EMBED_FAIL_ON_UID makes the
program exit with an error when it sees that uid (to try fail-and-resume);
EMBED_SLEEP_MS sleeps per batch (to imitate a slow model).
"""
import hashlib
import os
import sys
import time

import pyarrow as pa

DIM = int(os.environ.get("EMBED_DIM", "8"))
FAIL_ON = os.environ.get("EMBED_FAIL_ON_UID")
SLEEP = float(os.environ.get("EMBED_SLEEP_MS", "0")) / 1000.0


def embed(text):
    digest = hashlib.sha256((text or "").encode()).digest()
    return [(digest[i] - 128) / 128.0 for i in range(DIM)]


def transform(batch):
    if FAIL_ON is not None and "uid" in batch.schema.names:
        if int(FAIL_ON) in batch.column("uid").to_pylist():
            print(f"embed_transform: refusing uid {FAIL_ON} (EMBED_FAIL_ON_UID)", file=sys.stderr)
            sys.exit(3)
    if SLEEP:
        time.sleep(SLEEP)
    texts = batch.column("text").to_pylist()
    vectors = pa.array([embed(t) for t in texts], type=pa.list_(pa.float32(), DIM))
    return batch.append_column("embedding", vectors)


def main():
    reader = pa.ipc.open_stream(sys.stdin.buffer)
    out = sys.stdout.buffer
    writer = None
    for batch in reader:
        result = transform(batch)
        if writer is None:
            writer = pa.ipc.new_stream(out, result.schema)
        writer.write_batch(result)
        out.flush()
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main()
