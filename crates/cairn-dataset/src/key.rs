//! A job's key: one ID column, or a composite key of several columns
//! (`video` and `shot_idx`) whose values are encoded into one binary ID per
//! row, as `cairn.ray` encodes them (so both doors give a row the same ID).
//!
//! The encoding is exact and self-delimiting: each column's value is a tag
//! byte and its bytes. An integer of any width and sign is `+` or `-` and
//! its 8 bytes (two's complement, big-endian), so `7` is the same key in an
//! `Int32` and a `UInt64` column; a string is `s`, a binary `b`, each with
//! its length in 4 bytes, big-endian, before its bytes. A composite key's
//! name (the ID column its checkpoint records, the column of its ID files)
//! is the JSON list of its columns: [`composite_key`].

use std::sync::Arc;

use arrow_array::builder::BinaryBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// The ID column name of the composite key made of `columns`: their JSON
/// list, as [`CheckpointConfig::id_column`](crate::CheckpointConfig) takes
/// it (`cairn job run --id-column video,shot_idx` passes this).
///
/// ```
/// assert_eq!(cairn_dataset::composite_key(&["video", "shot_idx"]), r#"["video","shot_idx"]"#);
/// ```
pub fn composite_key(columns: &[&str]) -> String {
    serde_json::to_string(columns).expect("a list of strings is JSON")
}

/// A job's key: the name its checkpoint records and the columns it is
/// made of (one, or several for a composite key).
#[derive(Debug, Clone)]
pub(crate) struct IdKey {
    name: String,
    columns: Vec<String>,
}

impl IdKey {
    /// The key named `name`: a JSON list of two or more column names is a
    /// composite key, anything else one column.
    pub(crate) fn parse(name: &str) -> Self {
        let columns = serde_json::from_str::<Vec<String>>(name)
            .ok()
            .filter(|columns| columns.len() >= 2)
            .unwrap_or_else(|| vec![name.to_string()]);
        Self {
            name: name.to_string(),
            columns,
        }
    }

    /// The columns the key is made of.
    pub(crate) fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Whether the key is made of several columns.
    pub(crate) fn is_composite(&self) -> bool {
        self.columns.len() > 1
    }

    /// The IDs of `batch`'s rows: its ID column, or the composite key
    /// encoded. `label` names the rows' file in errors.
    pub(crate) fn ids(&self, batch: &RecordBatch, label: &str) -> Result<ArrayRef> {
        let fail = |reason: String| Error::Input {
            file: label.to_string(),
            reason,
        };
        if !self.is_composite() {
            return batch
                .column_by_name(&self.name)
                .cloned()
                .ok_or_else(|| fail(format!("no ID column {:?}", self.name)));
        }
        let mut parts = Vec::with_capacity(self.columns.len());
        for name in &self.columns {
            let column = batch.column_by_name(name).ok_or_else(|| {
                fail(format!(
                    "the key column {name:?} of the key {} is not in the rows",
                    self.name
                ))
            })?;
            if column.null_count() > 0 {
                return Err(fail(format!(
                    "{} rows have no value in the key column {name:?}; every row needs its whole key",
                    column.null_count()
                )));
            }
            parts.push(Part::of(column, name).map_err(fail)?);
        }
        let mut builder = BinaryBuilder::with_capacity(batch.num_rows(), batch.num_rows() * 16);
        let mut id = Vec::with_capacity(64);
        for row in 0..batch.num_rows() {
            id.clear();
            for part in &parts {
                part.append(row, &mut id);
            }
            builder.append_value(&id);
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// One key column, its values cast to the form the encoding reads.
enum Part {
    Signed(ArrayRef),
    Unsigned(ArrayRef),
    Str(ArrayRef),
    Bin(ArrayRef),
}

impl Part {
    fn of(column: &ArrayRef, name: &str) -> std::result::Result<Self, String> {
        let mut kind = column.data_type().clone();
        if let DataType::Dictionary(_, values) = &kind {
            kind = values.as_ref().clone();
        }
        let cast = |to: DataType| {
            arrow_cast::cast(column, &to)
                .map_err(|e| format!("the key column {name:?} cannot be read as {to} ({e})"))
        };
        Ok(match kind {
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                Part::Signed(cast(DataType::Int64)?)
            }
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                Part::Unsigned(cast(DataType::UInt64)?)
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                Part::Str(cast(DataType::LargeBinary)?)
            }
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => Part::Bin(cast(DataType::LargeBinary)?),
            other => {
                return Err(format!(
                    "the key column {name:?} has type {other}; a key is made of integer, string and binary columns"
                ));
            }
        })
    }

    fn append(&self, row: usize, id: &mut Vec<u8>) {
        match self {
            Part::Signed(values) => {
                let v = values.as_primitive::<Int64Type>().value(row);
                id.push(if v < 0 { b'-' } else { b'+' });
                id.extend_from_slice(&v.to_be_bytes());
            }
            Part::Unsigned(values) => {
                id.push(b'+');
                id.extend_from_slice(&values.as_primitive::<UInt64Type>().value(row).to_be_bytes());
            }
            Part::Str(values) | Part::Bin(values) => {
                let bytes = values.as_binary::<i64>().value(row);
                id.push(if matches!(self, Part::Str(_)) {
                    b's'
                } else {
                    b'b'
                });
                id.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                id.extend_from_slice(bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray, UInt64Array};
    use arrow_schema::{Field, Schema};

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    #[test]
    fn the_encoding_is_cairn_rays() {
        // The bytes tests/test_keys.py checks for cairn.ray's encoding.
        let key = IdKey::parse(&composite_key(&["v", "i"]));
        let rows = batch(vec![
            (
                "v",
                Arc::new(StringArray::from(vec!["x", "bb"])) as ArrayRef,
            ),
            ("i", Arc::new(Int32Array::from(vec![7, -1]))),
        ]);
        let ids = key.ids(&rows, "f").unwrap();
        let ids = ids.as_binary::<i32>();
        assert_eq!(
            ids.value(0),
            b"s\x00\x00\x00\x01x+\x00\x00\x00\x00\x00\x00\x00\x07"
        );
        assert_eq!(
            ids.value(1),
            b"s\x00\x00\x00\x02bb-\xff\xff\xff\xff\xff\xff\xff\xff"
        );
        let unsigned = batch(vec![
            ("v", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("i", Arc::new(UInt64Array::from(vec![7]))),
        ]);
        assert_eq!(
            key.ids(&unsigned, "f").unwrap().as_binary::<i32>().value(0),
            ids.value(0)
        );
    }

    #[test]
    fn one_column_is_not_composite_and_bad_columns_are_named() {
        assert!(!IdKey::parse("uid").is_composite());
        assert!(!IdKey::parse(r#"["uid"]"#).is_composite());
        let key = IdKey::parse(&composite_key(&["v", "missing"]));
        let rows = batch(vec![(
            "v",
            Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
        )]);
        let e = key.ids(&rows, "f").unwrap_err().to_string();
        assert!(e.contains("\"missing\""), "{e}");
        let key = IdKey::parse(&composite_key(&["v", "v2"]));
        let rows = batch(vec![
            (
                "v",
                Arc::new(StringArray::from(vec![Some("x"), None])) as ArrayRef,
            ),
            ("v2", Arc::new(Int32Array::from(vec![1, 2]))),
        ]);
        let e = key.ids(&rows, "f").unwrap_err().to_string();
        assert!(
            e.contains("1 rows have no value in the key column \"v\""),
            "{e}"
        );
    }
}
