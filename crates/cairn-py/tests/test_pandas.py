"""pandas reads and writes a `cos://` URL with `storage_options` once the
package is installed (fsspec finds cairn through its `cos` entry point);
COS is Garage in virtual-host style. Runs where pandas is installed (the Ray
virtualenv in scripts/test.sh); elsewhere it shows as skipped."""

import os

import pytest

pd = pytest.importorskip("pandas", reason="needs pandas: scripts/test.sh runs this in its ray-venv")

from conftest import fresh, garage_options  # noqa: E402


def test_pandas_reads_and_writes_cos_urls():
    options = garage_options()
    options["endpoint_url"] = os.environ["CAIRN_TEST_GARAGE_VHOST_ENDPOINT"]
    url = f"cos://{fresh(os.environ['CAIRN_TEST_GARAGE_BUCKET'])}/frame.parquet"
    frame = pd.DataFrame({"uid": range(1000), "text": [f"row {i}" for i in range(1000)]})
    frame.to_parquet(url, storage_options=options)
    back = pd.read_parquet(url, storage_options=options)
    assert back["uid"].tolist() == list(range(1000))
    csv = url.replace(".parquet", ".csv")
    frame.to_csv(csv, storage_options=options, index=False)
    assert pd.read_csv(csv, storage_options=options)["text"][999] == "row 999"
    with pytest.raises(ValueError, match="no_such_option"):
        pd.read_parquet(url, storage_options=dict(options, no_such_option=1))
