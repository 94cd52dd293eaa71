//! Typed rows for [`Dataset::map_rows`](crate::Dataset::map_rows) and
//! [`Dataset::flat_map_rows`](crate::Dataset::flat_map_rows): each batch is
//! read into a `Vec` of the caller's serde type and the results written
//! back as a batch by serde_arrow, column by column (no JSON in between).

use arrow_array::RecordBatch;
use arrow_schema::FieldRef;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_arrow::schema::{SchemaLike, TracingOptions};

use crate::ops::BoxError;

/// The Arrow fields of `U`, with the 32-bit-offset string, binary and list
/// types Parquet files and Ray use (serde_arrow's default is the large ones).
fn fields_of<U: DeserializeOwned>() -> Result<Vec<FieldRef>, String> {
    let options = TracingOptions::default()
        .strings_as_large_utf8(false)
        .bytes_as_large_binary(false)
        .sequence_as_large_list(false);
    Vec::<FieldRef>::from_type::<U>(options).map_err(|e| {
        format!(
            "cannot derive the output columns from {}: {e}",
            std::any::type_name::<U>()
        )
    })
}

/// A batch function applying `f` to each row read as a `T`, writing the
/// rows it returns as `U`s (in order, any number per input row).
pub(crate) fn rows_fn<T, U>(
    f: impl Fn(T) -> Result<Vec<U>, BoxError> + Send + Sync + 'static,
) -> impl Fn(RecordBatch) -> Result<RecordBatch, BoxError> + Send + Sync + 'static
where
    T: DeserializeOwned,
    U: Serialize + DeserializeOwned,
{
    let fields = fields_of::<U>();
    move |batch| {
        let fields = fields.as_ref().map_err(|e| e.clone())?;
        let rows: Vec<T> = serde_arrow::from_record_batch(&batch).map_err(|e| {
            format!(
                "cannot read the rows as {}: {e}",
                std::any::type_name::<T>()
            )
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.extend(f(row)?);
        }
        Ok(serde_arrow::to_record_batch(fields, &out)?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{ArrayRef, Int64Array, StringArray};
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct In {
        uid: i64,
        text: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    struct Out {
        uid: i64,
        words: u32,
    }

    #[test]
    fn rows_become_typed_values_and_back() {
        let batch = RecordBatch::try_from_iter([
            ("uid", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "text",
                Arc::new(StringArray::from(vec![Some("a b"), None, Some("c")])) as ArrayRef,
            ),
        ])
        .unwrap();
        let f = rows_fn(|row: In| {
            let words = row.text.map_or(0, |t| t.split_whitespace().count() as u32);
            let copies = if row.uid == 2 { 0 } else { 2 };
            Ok((0..copies)
                .map(|_| Out {
                    uid: row.uid,
                    words,
                })
                .collect())
        });
        let out = f(batch).unwrap();
        assert_eq!(out.schema().field(0).name(), "uid");
        let uid = out.column(0).as_primitive::<Int64Type>();
        assert_eq!(uid.values().to_vec(), vec![1, 1, 3, 3]);
        // A type the batch does not fit: an error naming the type.
        let wrong = rows_fn(|row: Out| Ok(vec![row]));
        let batch = RecordBatch::try_from_iter([(
            "uid",
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        )])
        .unwrap();
        let err = wrong(batch).unwrap_err().to_string();
        assert!(err.contains("Out"), "{err}");
    }
}
