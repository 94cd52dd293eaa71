"""The oracle of cairn's FSSPEC_ differential test: reads one JSON list of
[name, value] pairs per line (an environment, in order), runs fsspec's own
config.set_conf_env on it, and prints the resulting conf dict as one JSON line.
"""

import json
import sys
import warnings

from fsspec.config import set_conf_env

warnings.simplefilter("ignore")
for line in sys.stdin:
    env = dict(json.loads(line))
    conf = {}
    set_conf_env(conf, env)
    print(json.dumps(conf), flush=True)
