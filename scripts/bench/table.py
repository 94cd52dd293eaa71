"""Turns fs_bench JSON lines into a Markdown table: median of the rounds per
tool and operation, with cairn's ratio to s3fs and to bare OpenDAL."""
import json
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["tool"], r["op"])].append(r)
ops = ["put_1k", "get_1k", "ls", "rm_recursive", "put_large", "get_large"]
unit = {"put_large": "MiB/s", "get_large": "MiB/s"}


def rate(tool, op):
    key = "mib_per_s" if op in unit else "ops_per_s"
    values = [r[key] for r in runs[(tool, op)]]
    return statistics.median(values) if values else float("nan")


print("| operation | unit | cairn | s3fs | bare OpenDAL | cairn / s3fs | cairn / OpenDAL |")
print("|---|---|---:|---:|---:|---:|---:|")
for op in ops:
    c, s, o = rate("cairn", op), rate("s3fs", op), rate("opendal", op)
    print(f"| {op} | {unit.get(op, 'ops/s')} | {c:.1f} | {s:.1f} | {o:.1f} | {c / s:.2f}x | {c / o:.2f}x |")
