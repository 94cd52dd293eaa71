"""Which units a table holds, as cairn's table sinks answer it
(``recorded``: what recovery settles by and a resume checks) and which
IDs each unit's commit added (``committed_record``: what a unit found in
the table is committed with), against an oracle that reads the table's
rows with the format's own library and the IDs each unit wrote: drawn
histories of unit appends, restores or rollbacks to any earlier version,
overwrites of the whole table, compactions and the format's clean-up of
its history (Delta's checkpoint and log clean-up, Iceberg's snapshot
expiry, Lance's clean-up of old versions), on Delta (deltalake),
Iceberg (pyiceberg, a SQLite catalog) and Lance. A unit writes its own
uids, so it is in the table exactly when all of them are read back. For
Iceberg and Lance, the units the history no longer records are looked up
by their ledger entries (``held``), as a resume does. Recovery's deletion
of the files of units it rolls back (``delete_unreferenced``) must leave
every version the table keeps as it reads, and remove every file of a
commit that never landed.
Runs in the Ray virtualenv (scripts/test.sh), which has the three
libraries; elsewhere the tests show as skipped."""

import contextlib
import json
import os
import tempfile

import pytest

pytest.importorskip("deltalake", reason="scripts/test.sh installs deltalake in its ray-venv")
pytest.importorskip("pyiceberg", reason="scripts/test.sh installs pyiceberg in its ray-venv")
pytest.importorskip("lance", reason="scripts/test.sh installs pylance in its ray-venv")
pytest.importorskip("hypothesis", reason="scripts/test.sh installs hypothesis in its ray-venv")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cairn._ray_delta import APP_ID_PREFIX, UNIT_KEY, DeltaDatasink, DeltaUnitLog  # noqa: E402
from cairn._ray_iceberg import IcebergDatasink, IcebergUnitLog  # noqa: E402
from cairn._ray_lance import LanceDatasink, LanceUnitLog  # noqa: E402

ROWS_PER_UNIT = 3

#: One step of a table's history: a unit appended, two units appended
#: together (one version of the sink's group commit), a unit's commit
#: begun and never landed (its files written, its entry given to the
#: fence, then a kill: the fence refuses, or Delta's committer fails at
#: its failpoint after it), the table restored to
#: the version drawn (an index into the versions before the current one),
#: overwritten with rows of no unit, every row deleted (the format's own
#: delete), compacted, or its history cleaned up to the current version.
STEPS = st.one_of(
    st.just(("append",)),
    st.just(("group",)),
    st.just(("begin",)),
    st.tuples(st.just("restore"), st.integers(min_value=0, max_value=1000)),
    st.just(("overwrite",)),
    st.just(("delete_all",)),
    st.just(("compact",)),
    st.just(("clean",)),
)


def rows(uids):
    return pa.table({"uid": pa.array(uids, pa.int64())})


class Delta:
    def __init__(self, root):
        self.uri = f"{root}/delta"
        self.dir = self.uri

    def append(self, table, unit):
        from deltalake import CommitProperties, Transaction, write_deltalake

        write_deltalake(
            self.uri,
            table,
            mode="append",
            # Kept no longer than the clean-up step is run.
            configuration={"delta.logRetentionDuration": "interval 0 seconds"},
            commit_properties=CommitProperties(
                custom_metadata={UNIT_KEY: unit},
                app_transactions=[Transaction(APP_ID_PREFIX + unit, 1)],
            ),
        )

    def append_group(self, tables, units):
        """The sink's group commit of ``units`` (each with its rows, staged
        as its write task stages them) in one Delta commit, as its
        committer makes it; each unit's ledger entry (its files)."""
        from cairn._ray_committer import COMMITTED, Submission

        sink = DeltaDatasink(self.uri)
        entries = {unit: [] for unit in units}
        group = [
            Submission(
                unit, sink._stage(sink.unit_log()._table(), table, LetThrough(entries[unit]))
            )
            for table, unit in zip(tables, units)
        ]
        outcomes = sink.group_commit().commit_batch(group)
        assert set(outcomes.values()) == {(COMMITTED, "")}, outcomes
        return {unit: given[-1] for unit, given in entries.items()}

    def begin(self, table, unit):
        """A group commit of ``unit`` whose committer dies between its
        fence and its commit (the sink's failpoint there raises): its
        ledger entry, its staged files left."""
        from cairn._ray_committer import Submission

        sink = DeltaDatasink(self.uri)
        entries = []
        staged = sink._stage(sink.unit_log()._table(), table, LetThrough(entries))
        with failpoint("table-after-fence"), pytest.raises(RuntimeError, match="failpoint"):
            sink.group_commit().commit_batch([Submission(unit, staged)])
        assert entries and entries[-1] is not None, unit
        return entries[-1]

    def overwrite(self, table):
        from deltalake import write_deltalake

        write_deltalake(self.uri, table, mode="overwrite")

    def delete_all(self):
        from deltalake import DeltaTable

        if DeltaTable.is_deltatable(self.uri):
            DeltaTable(self.uri).delete()

    def earlier_versions(self):
        """The versions before the current one that the log still keeps."""
        from deltalake import DeltaTable

        table = DeltaTable(self.uri)
        kept = {entry["version"] for entry in table.history()}
        return [v for v in range(table.version()) if v in kept]

    def restore(self, version):
        from deltalake import DeltaTable

        DeltaTable(self.uri).restore(version)

    def compact(self):
        from deltalake import DeltaTable

        DeltaTable(self.uri).optimize.compact()

    def clean(self):
        """A checkpoint at the latest version, then the log before it
        removed (the table keeps its log 0 seconds)."""
        from deltalake import DeltaTable

        table = DeltaTable(self.uri)
        table.create_checkpoint()
        table.cleanup_metadata()

    def uids(self):
        from deltalake import DeltaTable

        return set(DeltaTable(self.uri).to_pyarrow_table(columns=["uid"])["uid"].to_pylist())

    def versions(self):
        """The uids of every version the log keeps, by version."""
        from deltalake import DeltaTable

        return {
            entry["version"]: sorted(
                DeltaTable(self.uri, version=entry["version"])
                .to_pyarrow_table(columns=["uid"])["uid"]
                .to_pylist()
            )
            for entry in DeltaTable(self.uri).history()
        }

    def log(self):
        import pyarrow.fs as pafs

        return DeltaUnitLog(self.uri, filesystem=pafs.LocalFileSystem(), path=self.uri)


class Iceberg:
    def __init__(self, root):
        from pyiceberg.catalog import load_catalog

        self.kwargs = {
            "name": "lineage",
            "type": "sql",
            "uri": f"sqlite:///{root}/catalog.db",
            "warehouse": f"file://{root}/warehouse",
        }
        kwargs = dict(self.kwargs)
        self.catalog = load_catalog(kwargs.pop("name"), **kwargs)
        self.catalog.create_namespace("db")
        self.dir = f"{root}/iceberg"
        self.location = f"file://{self.dir}"
        self.catalog.create_table(
            "db.t", schema=pa.schema([("uid", pa.int64())]), location=self.location
        )

    def _table(self):
        return self.catalog.load_table("db.t")

    def append(self, table, unit):
        """The sink's own commit of a unit; its ledger entry, as the sink
        wrote it before the commit."""
        return sink_append(
            IcebergDatasink("db.t", self.kwargs, max_units_per_commit=1), table, unit
        )

    def append_group(self, tables, units):
        """The sink's group commit of ``units`` (each with its rows) in one
        snapshot, as its committer makes it; each unit's ledger entry (the
        snapshot's)."""
        from cairn._ray_committer import COMMITTED, Submission
        from cairn._ray_iceberg import _GroupCommit

        sink = IcebergDatasink("db.t", self.kwargs, max_units_per_commit=1)
        entries = {unit: [] for unit in units}
        group = [
            Submission(unit, sink._stage(table, LetThrough(entries[unit])))
            for table, unit in zip(tables, units)
        ]
        outcomes = _GroupCommit("db.t", self.kwargs, self.location, {}, 5).commit_batch(group)
        assert set(outcomes.values()) == {(COMMITTED, "")}, outcomes
        last = {unit: given[-1] for unit, given in entries.items()}
        # One snapshot; each entry names its unit's write UUID.
        assert len({json.loads(entry)["snapshot"] for entry in last.values()}) == 1, entries
        assert len({json.loads(entry)["write_uuid"] for entry in last.values()}) == 2, entries
        return last

    def overwrite(self, table):
        self._table().overwrite(table)

    def delete_all(self):
        from pyiceberg.expressions import AlwaysTrue

        self._table().delete(delete_filter=AlwaysTrue())

    def earlier_versions(self):
        """Every snapshot but the current one (a later one too: rolled
        forward)."""
        metadata = self._table().metadata
        return [
            s.snapshot_id
            for s in metadata.snapshots
            if s.snapshot_id != metadata.current_snapshot_id
        ]

    def restore(self, snapshot_id):
        self._table().manage_snapshots().set_current_snapshot(snapshot_id).commit()

    def compact(self):
        """pyiceberg 0.12 has no compaction: a step that changes nothing."""

    def clean(self):
        """Every snapshot but the current one expired."""
        import datetime

        now = datetime.datetime.now(datetime.timezone.utc)
        self._table().maintenance.expire_snapshots().older_than(now).commit()

    def uids(self):
        return set(self._table().scan(selected_fields=("uid",)).to_arrow()["uid"].to_pylist())

    def sink(self):
        return IcebergDatasink("db.t", self.kwargs, max_units_per_commit=1)

    def begin(self, table, unit):
        """The sink's commit of ``unit`` begun and refused at its fence."""
        return sink_begin(self.sink(), table, unit)

    def versions(self):
        """The uids of every snapshot the table keeps, by snapshot."""
        table = self._table()
        return {
            s.snapshot_id: sorted(
                table.scan(snapshot_id=s.snapshot_id).to_arrow()["uid"].to_pylist()
            )
            for s in table.metadata.snapshots
        }

    def log(self):
        return IcebergUnitLog("db.t", self.kwargs, self.location)


class Lance:
    def __init__(self, root):
        self.uri = f"{root}/lance"
        self.dir = self.uri

    def _dataset(self, version=None):
        import lance

        return lance.dataset(self.uri, version=version)

    def append(self, table, unit):
        """The sink's own commit of a unit; its last ledger entry."""
        return sink_append(self.started(table), table, unit)

    def started(self, table):
        """The sink as its write tasks get it: after the driver's
        ``on_write_start`` with the rows' schema, which creates the dataset
        when there is none."""
        sink = self.sink()
        sink.on_write_start(table.schema)
        return sink

    def append_group(self, tables, units):
        """The sink's group commit of ``units`` (each with its rows, its
        fragments written as its write task writes them) in one version, as
        its committer makes it; each unit's ledger entry (its files)."""
        import lance
        import pyarrow.fs as pafs
        from cairn._ray_committer import COMMITTED, Submission
        from cairn._ray_lance import _GroupCommit, _Staged

        entries = {unit: [] for unit in units}
        group = []
        for table, unit in zip(tables, units):
            written = lance.fragment.write_fragments(
                table, self.uri, mode="append", return_transaction=True
            )
            staged = _Staged(list(written.operation.fragments), LetThrough(entries[unit]))
            group.append(Submission(unit, staged))
        since = self._dataset().version
        commit = _GroupCommit(self.uri, None, since, pafs.LocalFileSystem(), self.uri)
        outcomes = commit.commit_batch(group)
        assert set(outcomes.values()) == {(COMMITTED, "")}, outcomes
        return {unit: given[-1] for unit, given in entries.items()}

    def overwrite(self, table):
        import lance

        lance.write_dataset(table, self.uri, mode="overwrite")

    def delete_all(self):
        if os.path.exists(self.uri):
            self._dataset().delete("true")

    def earlier_versions(self):
        """The versions before the latest that the dataset still keeps."""
        latest = self._dataset().version
        return sorted(
            int(v["version"]) for v in self._dataset().versions() if v["version"] < latest
        )

    def restore(self, version):
        self._dataset(version).restore()

    def compact(self):
        self._dataset().optimize.compact_files()

    def clean(self):
        """Every version but the latest removed."""
        import datetime

        self._dataset().cleanup_old_versions(
            older_than=datetime.timedelta(0), delete_unverified=True
        )

    def uids(self):
        return set(self._dataset().to_table(columns=["uid"])["uid"].to_pylist())

    def sink(self):
        return LanceDatasink(self.uri, max_units_per_commit=1)

    def begin(self, table, unit):
        """The sink's commit of ``unit`` begun and refused at its fence."""
        return sink_begin(self.started(table), table, unit)

    def versions(self):
        """The uids of every version the dataset keeps, by version."""
        return {
            int(v["version"]): sorted(
                self._dataset(int(v["version"])).to_table(columns=["uid"])["uid"].to_pylist()
            )
            for v in self._dataset().versions()
        }

    def log(self):
        import pyarrow.fs as pafs

        return LanceUnitLog(self.uri, filesystem=pafs.LocalFileSystem(), path=self.uri)


@contextlib.contextmanager
def failpoint(name):
    """The sinks' failpoint ``name`` raising once while inside."""
    with tempfile.TemporaryDirectory() as flags:
        saved = os.environ.get("CAIRN_PY_FAILPOINT")
        os.environ["CAIRN_PY_FAILPOINT"] = f"{name}:raise:{flags}/flag"
        try:
            yield
        finally:
            if saved is None:
                del os.environ["CAIRN_PY_FAILPOINT"]
            else:
                os.environ["CAIRN_PY_FAILPOINT"] = saved


class LetThrough:
    """A unit's fence, as a group commit calls it, that lets the commit
    through: the ledger entries it is given, in ``entries``; no checkpoint
    record to commit."""

    id_column = "uid"
    #: As a fence of a first attempt whose pending record takes its entry.
    retried = False
    resent = False
    keeps_entry = True

    def __init__(self, entries):
        self.entries = entries

    def __call__(self, entry, landed=False):
        self.entries.append(entry)

    def commit_record(self, entry, record=None):
        pass


def sink_append(sink, table, unit):
    """``sink.append`` of ``table`` as ``unit``, with a fence that lets
    every commit through: the last ledger entry it was given."""
    entries = []
    sink.append(table, unit, lambda entry, landed=False: entries.append(entry))
    assert entries and entries[-1] is not None, unit
    return entries[-1]


class Refused(Exception):
    """A fence's refusal: the commit does not happen."""


def sink_begin(sink, table, unit):
    """``sink.append`` of ``table`` as ``unit`` whose fence takes the
    ledger entry and refuses the commit (a kill between the two): the
    entry."""
    entries = []

    def refuse(entry, landed=False):
        entries.append(entry)
        raise Refused()

    with pytest.raises(Refused):
        sink.append(table, unit, refuse)
    return entries[-1]


def files_under(directory):
    """Every file under ``directory``."""
    return {os.path.join(where, name) for where, _, names in os.walk(directory) for name in names}


FORMATS = {"delta": Delta, "iceberg": Iceberg, "lance": Lance}


@pytest.mark.parametrize("table_format", sorted(FORMATS))
@settings(
    max_examples=int(os.environ.get("CAIRN_LINEAGE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEPS, min_size=1, max_size=8))
def test_a_unit_is_recorded_exactly_when_the_table_holds_its_rows(table_format, steps):
    with tempfile.TemporaryDirectory() as root:
        table = FORMATS[table_format](root)
        units = {}
        cleaned = False
        # The units appended since the last clean-up: their history is kept.
        since_clean = set()
        # Delta's log clean-up can remove a restore's or an overwrite's own
        # commit: then the application transactions of the units it cut
        # still answer (docs/python.md: keep the log longer than the job).
        cut, cut_unseen = False, False
        # Each unit's ledger entry, as its sink writes it before the commit
        # (Iceberg's and Lance's; Delta's log keeps its units).
        entries = {}
        # Iceberg's group commits name no unit: their entries find them.
        unnamed = set()
        # Units whose commit began and never landed: their entry, and the
        # files the commit wrote (a listing's difference, not the entry).
        begun = {}
        # The files each unit's append or begun commit wrote (a listing's
        # difference): the only ones the clean-up may delete.
        wrote = {}
        compacted = False
        # The first step writes a unit, so every format has a table.
        for step in [("append",)] + steps:
            kind = step[0]
            if kind == "group":
                pair = [f"u{len(units)}", f"u{len(units) + 1}"]
                for unit in pair:
                    first = len(units) * ROWS_PER_UNIT
                    units[unit] = set(range(first, first + ROWS_PER_UNIT))
                before = files_under(table.dir)
                given = table.append_group([rows(sorted(units[u])) for u in pair], pair)
                for unit in pair:
                    wrote[unit] = files_under(table.dir) - before
                    since_clean.add(unit)
                    entries[unit] = given[unit]
                    log = table.log()
                    if table_format == "iceberg":
                        unnamed.add(unit)
                        assert log.held({unit: given[unit]}) == [unit], (unit, steps)
                    assert log.ledger_of(unit) == given[unit], (unit, steps)
            elif kind == "append":
                unit = f"u{len(units)}"
                first = len(units) * ROWS_PER_UNIT
                units[unit] = set(range(first, first + ROWS_PER_UNIT))
                before = files_under(table.dir) if table_format != "delta" else set()
                entry = table.append(rows(sorted(units[unit])), unit)
                if table_format != "delta":
                    wrote[unit] = files_under(table.dir) - before
                since_clean.add(unit)
                if table_format != "delta":
                    # The entry the sink wrote before its commit is the one
                    # the table's history gives after it.
                    entries[unit] = entry
                    assert table.log().ledger_of(unit) == entry, (unit, steps)
            elif kind == "begin":
                before = files_under(table.dir)
                unit = f"b{len(begun)}"
                entry = table.begin(rows([-100 - len(begun)]), unit)
                begun[unit] = (entry, files_under(table.dir) - before)
                wrote[unit] = begun[unit][1]
                assert begun[unit][1], (unit, steps)
            elif kind == "restore":
                versions = table.earlier_versions()
                if versions:
                    table.restore(versions[step[1] % len(versions)])
                    cut = True
            elif kind == "overwrite":
                table.overwrite(rows([-1, -2]))
                cut = True
            elif kind == "delete_all":
                table.delete_all()
                cut = True
            elif kind == "clean":
                table.clean()
                cleaned = True
                since_clean = set()
                cut_unseen = cut_unseen or cut
            else:
                table.compact()
                # pyiceberg 0.12 has no compaction.
                compacted = compacted or table_format == "lance"
        present = table.uids()
        held = {u for u, uids in units.items() if uids <= present}
        partial = {u for u, uids in units.items() if uids & present and not uids <= present}
        assert not partial, f"units in the table in part: {partial}"
        log = table.log()
        try:
            recorded = set(log.recorded(sorted(units)))
        except ValueError:
            # Delta and Lance refuse to answer for units whose history the
            # clean-up removed (either answer could be wrong): recovery and
            # the resume refuse, changing nothing.
            assert cleaned and table_format != "iceberg", steps
            recorded = None
        if not cleaned:
            assert recorded == held - unnamed, steps
        elif recorded is not None and table_format == "iceberg":
            # An expired snapshot ends the ancestry: its units are not
            # answered (docs/python.md: expire no snapshot of a job's units
            # before it ends); every unit appended since is.
            assert (held & since_clean) - unnamed <= recorded <= held - unnamed, steps
        elif recorded is not None and not (table_format == "delta" and cut_unseen):
            assert recorded == held, steps
        if table_format != "delta":
            # What recovery settles by once the ledger is asked too: the
            # history's answer, then the entries of the units it lacks.
            found, history_cut = log.lineage(sorted(units))
            assert history_cut is None or isinstance(history_cut, str), history_cut
            found = set(found)
            if history_cut is None:
                assert found == held - unnamed, steps
            lacking = {u: entries[u] for u in units if u not in found}
            answered = found | set(log.held(lacking))
            # A unit the history left shows not landed is written again:
            # never one the table holds.
            gone = set(log.absent({u: entries[u] for u in units if u not in answered}))
            assert not gone & held, steps
            # A unit answered is one whose rows the table holds (a resume
            # skips them); with the history cut, one not answered is
            # refused, never written again; whole, it is written again
            # only when the table lacks it.
            assert answered <= held, steps
            if history_cut is None:
                assert not (set(units) - answered) & held, steps
            # A unit is lost to the ledger only when a compaction rewrote
            # its files.
            if not compacted:
                assert answered == held, steps
        # Each unit's commit added its rows, whatever came after it: the
        # IDs its committed checkpoint record takes from the table (none
        # once the commit's history is cleaned up: the pending record's).
        # Asked for all at once (the table read once), as recovery asks:
        # the same records as asked one by one.
        records = log.committed_records(sorted(units), "uid")
        for unit, uids in units.items():
            record = log.committed_record(unit, "uid")
            assert records.get(unit) == record, (unit, steps)
            if record is None and cleaned and unit not in since_clean:
                continue
            assert record is not None, (unit, steps)
            read = pq.read_table(pa.BufferReader(record))
            assert read.column_names == ["uid"]
            assert sorted(read["uid"].to_pylist()) == sorted(uids), (unit, steps)
        # Recovery's clean-up of the units it rolls back (those that
        # never landed, those the table no longer holds, one without an
        # entry): every version the table keeps reads as before, and
        # every file a commit that never landed wrote is gone.
        kept = table.versions()
        # Entries an hour old (by the store's clock, as recovery reads
        # their records' ages).
        asked = {unit: (entry, 3600.0) for unit, (entry, _) in begun.items()}
        asked.update({unit: (entries.get(unit), 3600.0) for unit in units if unit not in held})
        asked["never-fenced"] = (None, None)
        present = files_under(table.dir)
        deleted = table.log().delete_unreferenced(asked)
        left = files_under(table.dir)
        assert table.versions() == kept, steps
        for unit, (_, written) in begun.items():
            assert not written & left, (unit, sorted(written & left), steps)
        assert deleted == len(present - left), steps
        # Only files the asked units' commits wrote (the listings'
        # differences around each) are gone.
        theirs = set().union(*(wrote[unit] for unit in asked if unit in wrote))
        assert present - left <= theirs, (sorted(present - left - theirs), steps)


def test_a_delta_restore_to_a_version_the_log_no_longer_keeps_answers_no_unit_it_cut():
    """u0, u1 and u2 appended, a checkpoint at u2's version, the table
    restored to u0's version, then the log before the checkpoint cleaned
    up: u1's commit is gone from the log, and its application transaction,
    which the restore keeps, still names it (u1 is not in the table; u0 is).
    The walk reaches the restore, whose target the log no longer keeps:
    the answer is a refusal, never u1 (its rows would be lost on resume)
    nor a silence on u0 (a pending u0 would be written twice)."""
    from deltalake import DeltaTable

    with tempfile.TemporaryDirectory() as root:
        table = Delta(root)
        for n in range(3):
            table.append(rows([n]), f"u{n}")
        DeltaTable(table.uri).create_checkpoint()
        table.restore(0)
        DeltaTable(table.uri).cleanup_metadata()
        assert 1 not in {e["version"] for e in DeltaTable(table.uri).history()}
        assert table.uids() == {0}
        with pytest.raises(ValueError, match="older than its log keeps"):
            table.log().recorded(["u0", "u1", "u2"])


@pytest.mark.parametrize("table_format", ["iceberg", "lance"])
def test_a_commit_that_never_landed_on_a_table_cleaned_before_is_absent(table_format):
    """Two units appended and the table's history cleaned (as routine
    maintenance leaves it before a job); a third unit's commit begins (the
    sink's fence gets its entry) and never lands (the fence refuses). Its
    entry finds nothing in the table and the history is cut below, yet the
    history left reaches the commit's base: it is answered absent (written
    again), not undecided (a refused resume)."""
    with tempfile.TemporaryDirectory() as root:
        table = FORMATS[table_format](root)
        table.append(rows([0, 1, 2]), "u0")
        table.append(rows([3, 4, 5]), "u1")
        table.clean()
        sink = (
            IcebergDatasink("db.t", table.kwargs, max_units_per_commit=1)
            if table_format == "iceberg"
            else LanceDatasink(table.uri, max_units_per_commit=1)
        )
        entries = []

        def refuse(entry, landed=False):
            entries.append(entry)
            raise Refused()

        before = files_under(table.dir)
        with pytest.raises(Refused):
            sink.append(rows([6, 7, 8]), "u2", refuse)
        log = table.log()
        found, cut = log.lineage(["u0", "u1", "u2"])
        assert cut is not None and "u2" not in found
        assert log.held({"u2": entries[-1]}) == []
        assert log.absent({"u2": entries[-1]}) == ["u2"]
        assert table.uids() == set(range(6))
        # Its files are kept while a killed run's worker may still be
        # making the commit (the grace period: 60 s, and for Iceberg the 30
        # minutes pyiceberg goes on retrying a commit), or when the age of
        # its entry is unknown; deleted after.
        grace = 60.0 + (1800.0 if table_format == "iceberg" else 0.0)
        written = files_under(table.dir) - before
        assert written
        assert log.delete_unreferenced({"u2": (entries[-1], grace - 1)}) == 0
        assert log.delete_unreferenced({"u2": (entries[-1], None)}) == 0
        assert written <= files_under(table.dir)
        assert log.delete_unreferenced({"u2": (entries[-1], grace)}) == len(written)
        assert not written & files_under(table.dir)
        assert table.uids() == set(range(6))


def test_the_lance_orphan_warnings_advice_removes_an_orphan_and_keeps_every_row(tmp_path):
    """The advice the warning about a rolled-back unit's files gives for
    Lance, run as written: a data file no version references is removed,
    the dataset's rows are not."""
    import datetime
    import glob
    import shutil

    import lance

    from cairn._ray_lance import ORPHAN_CLEAN_UP

    uri = str(tmp_path / "dataset")
    lance.write_dataset(pa.table({"uid": pa.array(range(10), pa.int64())}), uri)
    orphan = f"{uri}/data/orphan-0000.lance"
    shutil.copy(glob.glob(f"{uri}/data/*.lance")[0], orphan)
    call = ORPHAN_CLEAN_UP.split(", run once")[0]
    eval(call, {"lance": lance, "datetime": datetime, "uri": uri})
    assert not os.path.exists(orphan)
    assert sorted(lance.dataset(uri).to_table()["uid"].to_pylist()) == list(range(10))


def test_an_iceberg_unit_retried_after_a_lost_race_leaves_no_unreferenced_copy(tmp_path):
    """The Iceberg sink's own commit of a unit (``max_units_per_commit=1``)
    loses its first race: another writer commits between the unit's
    fence and its commit. The retry commits the unit on the new metadata,
    and every data file in the table's directory is one a snapshot of the
    table names (before, each retry wrote the rows again and left the
    earlier copy unreferenced)."""
    table = Iceberg(str(tmp_path))
    # pyiceberg's own retries (which reuse the files) off: the lost race
    # reaches the sink's.
    with table._table().transaction() as transaction:
        transaction.set_properties({"commit.retry.num-retries": "0"})
    sink = IcebergDatasink("db.t", table.kwargs, max_units_per_commit=1)
    given = []

    def fence(entry, landed=False):
        given.append(entry)
        if len(given) == 1:
            table._table().append(rows([-1]))  # another writer wins the race

    sink.append(rows([1, 2, 3]), "u0", fence)
    assert len(given) == 2, given  # fenced again for the retry's snapshot
    assert table.uids() == {-1, 1, 2, 3}
    iceberg = table._table()
    named = {
        entry["data_file"]["file_path"].removeprefix("file://")
        for snapshot in iceberg.metadata.snapshots
        for entry in iceberg.inspect.entries(snapshot_id=snapshot.snapshot_id)
        .select(["data_file"])
        .to_pylist()
    }
    on_disk = {p for p in files_under(table.dir) if p.endswith(".parquet")}
    assert on_disk - named == set(), sorted(on_disk - named)
    assert IcebergUnitLog("db.t", table.kwargs, table.location).landed("u0")
