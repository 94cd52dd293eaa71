//! Hive-style partitioned output: a unit's rows grouped by the values of
//! the partition columns, each group written as one file in the directory
//! `<col>=<value>/<col>=<value>/...` under the output, named and escaped as
//! pyarrow's `write_dataset(partitioning=..., partitioning_flavor="hive")`
//! names them, so pyarrow, Ray, DuckDB and Spark read the output as a
//! partitioned dataset. The partition columns are left out of the files
//! (their values are in the path), as pyarrow leaves them out.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::ops::column_names;

/// The directory name of a null partition value (Hive's, pyarrow's and
/// Spark's).
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// One partition of a unit: its directory relative to the output, and its
/// rows without the partition columns.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) dir: String,
    pub(crate) batches: Vec<RecordBatch>,
}

/// A partition value as a path segment's value: every byte but the
/// unreserved characters of URIs (`A-Z a-z 0-9 - . _ ~`) percent-encoded,
/// as Arrow's hive partitioning encodes segments (`segment_encoding="uri"`,
/// pyarrow's default), so `/`, `=`, `%`, spaces and non-ASCII text never
/// break the layout and read back as written.
///
/// ```
/// use cairn_dataset::escape_partition_value as esc;
/// assert_eq!(esc("web"), "web");
/// assert_eq!(esc("a/b=c%d"), "a%2Fb%3Dc%25d");
/// assert_eq!(esc("2026-11-30"), "2026-11-30");
/// assert_eq!(esc("é x"), "%C3%A9%20x");
/// ```
pub fn escape_partition_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for &byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Refuses partition columns that cannot make a readable layout: none
/// named twice, no name empty, holding `/` or `=`, or starting with `.` or
/// `_` (readers skip such directories as hidden), and never the ID column
/// (its values would leave the files, and the IDs with them).
pub(crate) fn check_partition_columns(columns: &[String], id_column: Option<&str>) -> Result<()> {
    let refuse = |reason: String| Err(Error::Plan { reason });
    for (i, column) in columns.iter().enumerate() {
        if column.is_empty() || column.contains(['/', '=']) {
            return refuse(format!(
                "partition column {column:?} cannot name a directory (empty, or holding '/' or '='); rename the column first"
            ));
        }
        if column.starts_with(['.', '_']) {
            return refuse(format!(
                "partition column {column:?} starts with '{}': readers (pyarrow, Ray, Spark) skip such directories as hidden, so its rows would vanish; rename the column first",
                &column[..1]
            ));
        }
        if columns[..i].contains(column) {
            return refuse(format!("partition column {column:?} is named twice"));
        }
        if Some(column.as_str()) == id_column {
            return refuse(format!(
                "the output cannot be partitioned by the ID column {column:?}: its values would live only in directory names, not in the files. Partition by another column"
            ));
        }
    }
    Ok(())
}

/// Whether values of `data_type` can name partitions: text, integers,
/// booleans and dates, whose text form every reader parses back the same.
fn partitionable(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, value) => partitionable(value),
        t => {
            t.is_integer()
                || matches!(
                    t,
                    DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                        | DataType::Boolean
                        | DataType::Date32
                        | DataType::Date64
                )
        }
    }
}

/// The schema of the files of a job whose output rows have `schema`: the
/// partition columns left out. An error names a partition column the rows
/// lack or one whose type cannot name a directory; `file` is named in it.
pub(crate) fn file_schema(schema: &Schema, columns: &[String], file: &str) -> Result<SchemaRef> {
    for column in columns {
        let field = schema.field_with_name(column).map_err(|_| Error::Output {
            file: file.to_string(),
            reason: format!(
                "the rows have no partition column {column:?} (columns: {}); name one of them in --partition-by",
                column_names(schema)
            ),
        })?;
        if !partitionable(field.data_type()) {
            return Err(Error::Output {
                file: file.to_string(),
                reason: format!(
                    "partition column {column:?} is {}; partition by text, integer, boolean or date columns",
                    field.data_type()
                ),
            });
        }
    }
    let kept: Vec<_> = schema
        .fields()
        .iter()
        .filter(|f| !columns.contains(f.name()))
        .cloned()
        .collect();
    Ok(Arc::new(Schema::new_with_metadata(
        kept,
        schema.metadata().clone(),
    )))
}

/// Groups the rows of `batches` (all of one schema holding `columns`) by
/// their partition, in order of first appearance; each partition's rows
/// keep their order and lose the partition columns.
pub(crate) fn split(
    batches: &[RecordBatch],
    columns: &[String],
    file_schema: &SchemaRef,
    file: &str,
) -> Result<Vec<Partition>> {
    let fail = |reason: String| Error::Output {
        file: file.to_string(),
        reason,
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut partitions: Vec<Partition> = Vec::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let values: Vec<StringArray> = columns
            .iter()
            .map(|name| {
                let column = batch.column_by_name(name).expect("checked by file_schema");
                let text = arrow_cast::cast(column, &DataType::Utf8)
                    .map_err(|e| fail(format!("partition column {name:?} as text: {e}")))?;
                Ok(text
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("cast to Utf8 gives a StringArray")
                    .clone())
            })
            .collect::<Result<_>>()?;
        // This batch's rows of each partition (by its index in
        // `partitions`), in order.
        let mut rows: Vec<Vec<u32>> = Vec::new();
        let mut dir = String::new();
        for row in 0..batch.num_rows() {
            dir.clear();
            for (name, text) in columns.iter().zip(&values) {
                if !dir.is_empty() {
                    dir.push('/');
                }
                dir.push_str(name);
                dir.push('=');
                if text.is_null(row) {
                    dir.push_str(NULL_PARTITION);
                } else {
                    dir.push_str(&escape_partition_value(text.value(row)));
                }
            }
            let at = match index.get(dir.as_str()) {
                Some(&at) => at,
                None => {
                    index.insert(dir.clone(), partitions.len());
                    partitions.push(Partition {
                        dir: dir.clone(),
                        batches: Vec::new(),
                    });
                    partitions.len() - 1
                }
            };
            if rows.len() <= at {
                rows.resize_with(at + 1, Vec::new);
            }
            rows[at].push(row as u32);
        }
        let kept: Vec<ArrayRef> = file_schema
            .fields()
            .iter()
            .map(|f| batch.column_by_name(f.name()).expect("same schema").clone())
            .collect();
        for (at, taken) in rows.into_iter().enumerate() {
            if taken.is_empty() {
                continue;
            }
            let taken = UInt32Array::from(taken);
            let columns = kept
                .iter()
                .map(|c| arrow_select::take::take(c.as_ref(), &taken, None))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| fail(format!("cannot gather a partition's rows ({e})")))?;
            let part = RecordBatch::try_new(file_schema.clone(), columns)
                .map_err(|e| fail(format!("cannot gather a partition's rows ({e})")))?;
            partitions[at].batches.push(part);
        }
    }
    Ok(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::Field;

    fn batch(uids: Vec<i64>, sources: Vec<Option<&str>>, buckets: Vec<i64>) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("uid", Arc::new(Int64Array::from(uids)) as ArrayRef),
            ("source", Arc::new(StringArray::from(sources)) as ArrayRef),
            ("bucket", Arc::new(Int64Array::from(buckets)) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn rows_are_grouped_by_partition_in_order_without_the_partition_columns() {
        let columns = vec!["source".to_string(), "bucket".to_string()];
        let batches = vec![
            batch(
                vec![1, 2, 3],
                vec![Some("web"), None, Some("web")],
                vec![0, 0, 0],
            ),
            batch(vec![4, 5], vec![Some("a/b"), Some("web")], vec![1, 0]),
        ];
        let schema = file_schema(&batches[0].schema(), &columns, "f").unwrap();
        assert_eq!(schema.fields().len(), 1);
        let parts = split(&batches, &columns, &schema, "f").unwrap();
        let seen: Vec<(String, Vec<i64>)> = parts
            .iter()
            .map(|p| {
                let uids = p
                    .batches
                    .iter()
                    .flat_map(|b| {
                        let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                        a.values().to_vec()
                    })
                    .collect();
                (p.dir.clone(), uids)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("source=web/bucket=0".to_string(), vec![1, 3, 5]),
                (format!("source={NULL_PARTITION}/bucket=0"), vec![2]),
                ("source=a%2Fb/bucket=1".to_string(), vec![4]),
            ]
        );
    }

    #[test]
    fn bad_partition_columns_are_refused_with_the_reason() {
        let refused = |columns: &[&str]| {
            let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
            check_partition_columns(&columns, Some("uid"))
                .unwrap_err()
                .to_string()
        };
        assert!(refused(&["uid"]).contains("ID column"));
        assert!(refused(&["_x"]).contains("hidden"));
        assert!(refused(&["a/b"]).contains("'/'"));
        assert!(refused(&["a", "a"]).contains("twice"));
        check_partition_columns(&["source".into()], Some("uid")).unwrap();
        let schema = Schema::new(vec![
            Field::new("uid", DataType::Int64, false),
            Field::new("score", DataType::Float64, false),
        ]);
        let float = file_schema(&schema, &["score".into()], "f").unwrap_err();
        assert!(float.to_string().contains("Float64"), "{float}");
        let missing = file_schema(&schema, &["nope".into()], "f").unwrap_err();
        assert!(missing.to_string().contains("uid, score"), "{missing}");
    }
}
