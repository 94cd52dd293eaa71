"""Ray 2.60's streaming-generator replay, alone: a generator task yields 4
objects on worker node A; the driver reads 2; node A is removed while the
task runs (a preempted machine); Ray retries the task on a new node, and
that attempt raises before its second object. Prints what the driver's
generator gives next: "ERROR <type>" when the failure reaches it, "ENDED
after 2 of 4" when the stream just ends, "TIMEOUT" when nothing comes.

Ray Data's own read_parquet lists the input in such a task (ListFiles)
and reads what the stream gave: when the listing's attempt on a new node
fails, Ray 2.60 ends the stream as if complete and the files not yet
listed are never read, the job ending with exit 0 (seen in cairn's CI:
half of a 20-file input never read). test_ray_upstream.py runs this."""

import os
import sys
import time

import ray
from ray.cluster_utils import Cluster

FLAG = sys.argv[1]


@ray.remote(num_returns="streaming", resources={"a": 0.1}, max_retries=3)
def listing():
    replay = os.path.exists(FLAG)
    open(FLAG, "w").close()
    for i in range(4):
        if replay and i == 1:
            raise RuntimeError("the replay failed")
        if i == 2 and not replay:
            time.sleep(60)  # node A is removed meanwhile
        yield bytes(300_000)  # in the object store of the node that ran it


def main() -> None:
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    node_a = cluster.add_node(num_cpus=1, resources={"a": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    stream = listing.remote()
    for _ in range(2):
        ray.get(next(stream))
    cluster.remove_node(node_a, allow_graceful=False)
    cluster.add_node(num_cpus=1, resources={"a": 1})
    read = 2
    try:
        while True:
            ray.get(next(stream), timeout=120)
            read += 1
    except StopIteration:
        print(f"ENDED after {read} of 4", flush=True)
    except ray.exceptions.GetTimeoutError:
        print("TIMEOUT: no answer in 120 s", flush=True)
    except Exception as e:  # noqa: BLE001 - the task's failure reaching the driver is the fix
        print(f"ERROR {type(e).__name__}", flush=True)
    # The cluster's exit handlers trip over the removed node.
    os._exit(0)


if __name__ == "__main__":
    main()
