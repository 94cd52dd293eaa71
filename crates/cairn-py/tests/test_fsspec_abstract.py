"""fsspec's own abstract test suite (shipped inside fsspec) run unchanged
against CairnFileSystem on memory, local disk, Garage (s3, path-style) and
cos on Garage (virtual-host style: `bucket.s3.garage.localhost`, which
cairn resolves to the loopback address as RFC 6761 says)."""

import os

import pytest
from fsspec.tests import abstract
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

from cairn.fsspec import CairnFileSystem
from conftest import fresh, garage_options


class MemoryFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self):
        return CairnFileSystem("memory")

    @pytest.fixture
    def fs_path(self):
        return fresh("")

    @pytest.fixture
    def supports_empty_directories(self):
        return True


class LocalFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self):
        return CairnFileSystem("file")

    @pytest.fixture
    def fs_path(self, tmp_path):
        return str(tmp_path / "remote")

    @pytest.fixture
    def supports_empty_directories(self):
        return True


class GarageFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self):
        return CairnFileSystem("s3", **garage_options())

    @pytest.fixture
    def fs_path(self):
        return fresh(os.environ["CAIRN_TEST_GARAGE_BUCKET"])

    @pytest.fixture
    def supports_empty_directories(self):
        return False


class CosFixtures(GarageFixtures):
    """Garage as cos: the same bucket, addressed in virtual-host style."""

    @pytest.fixture
    def fs(self):
        options = garage_options()
        options["endpoint_url"] = os.environ["CAIRN_TEST_GARAGE_VHOST_ENDPOINT"]
        return CairnFileSystem("cos", **options)


SUITES = (
    AbstractCopyTests,
    AbstractGetTests,
    AbstractPutTests,
    AbstractPipeTests,
    AbstractOpenTests,
)


class TestMemory(MemoryFixtures, *SUITES):
    pass


class TestLocal(LocalFixtures, *SUITES):
    pass


class TestGarage(GarageFixtures, *SUITES):
    pass


class TestCosOnGarage(CosFixtures, *SUITES):
    pass
