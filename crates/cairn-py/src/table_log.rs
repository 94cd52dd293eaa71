//! A table output's log as Python answers it: the object `cairn.ray`'s
//! table sinks hand to `open_checkpoint` (its `recorded(units)` gives the
//! units whose table transaction the table holds; its `table` names the
//! table for messages; its optional `committed_records(units, id_column)`
//! gives, by unit, the IDs of its rows in the table as Parquet bytes; its
//! optional `lineage(units)` gives `(recorded, cut)`, where `cut` says why
//! the history stops short, or None; its optional `held(entries)` gives the
//! units of `{unit: ledger entry}` whose rows the table's current files
//! hold; its optional `absent(entries)` the units whose commit the history
//! left shows not landed; its optional `delete_unreferenced(rolled_back)`
//! deletes the files of `{unit: (ledger entry or None, age in seconds or
//! None)}` being rolled back that no table version references, and returns
//! how many: the age is its pending record's, by the store's clock).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use cairn_checkpoint::UnitName;
use cairn_checkpoint::internals::{Lineage, RolledBack, UnitLog};
use futures::future::BoxFuture;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A Python object with `recorded(list[str]) -> iterable of str` and a
/// `table` string.
pub(crate) struct PyUnitLog {
    log: Py<PyAny>,
    table: String,
}

/// The checkpoint's view of a `unit_log=` argument: None when none was
/// given.
pub(crate) fn unit_log_arg(log: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Arc<dyn UnitLog>>> {
    match log {
        Some(log) => Ok(Some(Arc::new(PyUnitLog::new(log)?))),
        None => Ok(None),
    }
}

impl PyUnitLog {
    /// Wraps `log`, reading its `table` now.
    pub(crate) fn new(log: &Bound<'_, PyAny>) -> PyResult<Self> {
        let table: String = log.getattr("table")?.extract()?;
        Ok(Self {
            log: log.clone().unbind(),
            table,
        })
    }

    /// A Python error of the log's, as the checkpoint reports it.
    fn failed(&self, e: PyErr) -> cairn_checkpoint::Error {
        cairn_checkpoint::Error::TableLog {
            table: self.table.clone(),
            reason: e.to_string(),
        }
    }

    fn records_of(
        &self,
        units: &[UnitName],
        id_column: &str,
    ) -> PyResult<HashMap<UnitName, Vec<u8>>> {
        Python::attach(|py| {
            let log = self.log.bind(py);
            if !log.hasattr("committed_records")? {
                return Ok(HashMap::new());
            }
            let names: Vec<&str> = units.iter().map(UnitName::as_str).collect();
            let answer = log.call_method1("committed_records", (names, id_column))?;
            let answer = answer.cast::<PyDict>()?;
            let mut records = HashMap::with_capacity(answer.len());
            for unit in units {
                if let Some(record) = answer.get_item(unit.as_str())? {
                    // A `bytes` object's buffer, not an element-by-element copy.
                    let record: std::borrow::Cow<'_, [u8]> = record.extract()?;
                    records.insert(unit.clone(), record.into_owned());
                }
            }
            Ok(records)
        })
    }

    fn ask(&self, units: &[UnitName]) -> PyResult<HashSet<UnitName>> {
        // Called from a future that `wait` blocks on in this thread, with
        // the GIL released: take it back for the call.
        Python::attach(|py| {
            let names: Vec<&str> = units.iter().map(UnitName::as_str).collect();
            let answer = self.log.bind(py).call_method1("recorded", (names,))?;
            among(units, &answer)
        })
    }

    fn ask_lineage(&self, units: &[UnitName]) -> PyResult<Lineage> {
        Python::attach(|py| {
            let log = self.log.bind(py);
            if !log.hasattr("lineage")? {
                return Ok(Lineage {
                    recorded: self.ask(units)?,
                    cut: None,
                });
            }
            let names: Vec<&str> = units.iter().map(UnitName::as_str).collect();
            let (answer, cut): (Bound<'_, PyAny>, Option<String>) =
                log.call_method1("lineage", (names,))?.extract()?;
            Ok(Lineage {
                recorded: among(units, &answer)?,
                cut,
            })
        })
    }

    /// The units of `entries` that the log's `method` (taking `{unit:
    /// entry}`) names; none when it has no such method.
    fn ask_entries(
        &self,
        method: &str,
        entries: &[(UnitName, String)],
    ) -> PyResult<HashSet<UnitName>> {
        Python::attach(|py| {
            let log = self.log.bind(py);
            if !log.hasattr(method)? {
                return Ok(HashSet::new());
            }
            let asked: std::collections::HashMap<&str, &str> = entries
                .iter()
                .map(|(unit, entry)| (unit.as_str(), entry.as_str()))
                .collect();
            let units: Vec<UnitName> = entries.iter().map(|(unit, _)| unit.clone()).collect();
            let answer = log.call_method1(method, (asked,))?;
            among(&units, &answer)
        })
    }

    /// The log's `delete_unreferenced` of the units being rolled back (0
    /// deleted when it has none).
    fn ask_to_delete(&self, rolled_back: &[RolledBack]) -> PyResult<usize> {
        Python::attach(|py| {
            let log = self.log.bind(py);
            if !log.hasattr("delete_unreferenced")? {
                return Ok(0);
            }
            let asked: std::collections::HashMap<&str, (Option<&str>, Option<f64>)> = rolled_back
                .iter()
                .map(|told| {
                    let age = told.age.map(|age| age.as_secs_f64());
                    (told.unit.as_str(), (told.entry.as_deref(), age))
                })
                .collect();
            log.call_method1("delete_unreferenced", (asked,))?.extract()
        })
    }
}

/// The names in `answer` (an iterable of `str`) that are among `units`:
/// a unit is never made up.
fn among(units: &[UnitName], answer: &Bound<'_, PyAny>) -> PyResult<HashSet<UnitName>> {
    let wanted: HashSet<&str> = units.iter().map(UnitName::as_str).collect();
    let mut found = HashSet::new();
    for name in answer.try_iter()? {
        let name: String = name?.extract()?;
        if wanted.contains(name.as_str()) {
            found.insert(UnitName::from_stem(&name));
        }
    }
    Ok(found)
}

impl fmt::Debug for PyUnitLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PyUnitLog")
            .field("table", &self.table)
            .finish()
    }
}

impl UnitLog for PyUnitLog {
    fn recorded<'a>(
        &'a self,
        units: &'a [UnitName],
    ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
        Box::pin(async move { self.ask(units).map_err(|e| self.failed(e)) })
    }

    fn table(&self) -> String {
        self.table.clone()
    }

    fn lineage<'a>(
        &'a self,
        units: &'a [UnitName],
    ) -> BoxFuture<'a, cairn_checkpoint::Result<Lineage>> {
        Box::pin(async move { self.ask_lineage(units).map_err(|e| self.failed(e)) })
    }

    fn held_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
        Box::pin(async move {
            self.ask_entries("held", entries)
                .map_err(|e| self.failed(e))
        })
    }

    fn absent_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
        Box::pin(async move {
            self.ask_entries("absent", entries)
                .map_err(|e| self.failed(e))
        })
    }

    fn delete_unreferenced<'a>(
        &'a self,
        rolled_back: &'a [RolledBack],
    ) -> BoxFuture<'a, cairn_checkpoint::Result<usize>> {
        Box::pin(async move { self.ask_to_delete(rolled_back).map_err(|e| self.failed(e)) })
    }

    fn committed_records<'a>(
        &'a self,
        units: &'a [UnitName],
        id_column: &'a str,
    ) -> BoxFuture<'a, cairn_checkpoint::Result<HashMap<UnitName, Vec<u8>>>> {
        Box::pin(async move {
            self.records_of(units, id_column)
                .map_err(|e| self.failed(e))
        })
    }
}
