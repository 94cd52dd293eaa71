"""Turns benchmark JSON lines (tool, op, ops_per_s, mib_per_s) into a
Markdown table: the median of the rounds per tool and operation, and the
first tool's ratio to each other tool.
  python3 scripts/bench/table.py FILE [TOOL,TOOL,...]   (default cairn,s3fs,opendal)"""

import json
import statistics
import sys
from collections import defaultdict

names = {
    "cairn": "cairn",
    "s3fs": "s3fs",
    "opendal": "bare OpenDAL",
    "obstore": "obstore",
    "pyarrow": "pyarrow S3FileSystem",
}
tools = (sys.argv[2] if len(sys.argv) > 2 else "cairn,s3fs,opendal").split(",")
runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["tool"], r["op"])].append(r)
ops = ["put_1k", "get_1k", "ls", "rm_recursive", "put_large", "get_large"]
ops = [op for op in ops if any(o == op for _, o in runs)]
ops += [op for op in dict.fromkeys(o for _, o in runs) if op not in ops]
unit = {
    op: "MiB/s"
    for op in [
        "put_large",
        "get_large",
        "get_large_contiguous",
        "read_whole",
        "read_column",
        "write_2",
        "ray_job",
    ]
}
# The bare reader's result made one contiguous buffer, as cairn's and s3fs's
# reads return it (their get_large is already that, and stands in the row).


def rate(tool, op):
    key = "mib_per_s" if op in unit else "ops_per_s"
    values = [r[key] for r in runs[(tool, op)]]
    if not values and op == "get_large_contiguous":
        values = [r[key] for r in runs[(tool, "get_large")]]
    return statistics.median(values) if values else float("nan")


first, others = tools[0], tools[1:]
header = ["operation", "unit"] + [names.get(t, t) for t in tools]
header += [f"{names.get(first, first)} / {names.get(t, t)}" for t in others]
print("| " + " | ".join(header) + " |")
print("|---|---|" + "---:|" * (len(header) - 2))
for op in ops:
    rates = [rate(t, op) for t in tools]
    cells = [op, unit.get(op, "ops/s")] + [f"{r:.1f}" for r in rates]
    cells += [f"{rates[0] / r:.2f}x" for r in rates[1:]]
    print("| " + " | ".join(cells) + " |")
