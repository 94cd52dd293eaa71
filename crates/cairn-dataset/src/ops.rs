//! The map-like operators a job may apply between read and write, and how a
//! worker applies them to one batch.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use serde_json::{Map, Value};

use crate::command::CommandProcess;
use crate::error::{Error, Result};

/// An error a user's transform returns.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One row, as a JSON object (for [`crate::Dataset::map`] and
/// [`crate::Dataset::flat_map`]).
pub type Row = Map<String, Value>;

type BatchFn = Arc<dyn Fn(RecordBatch) -> std::result::Result<RecordBatch, BoxError> + Send + Sync>;
type RowFn = Arc<dyn Fn(Row) -> std::result::Result<Row, BoxError> + Send + Sync>;
type RowsFn = Arc<dyn Fn(Row) -> std::result::Result<Vec<Row>, BoxError> + Send + Sync>;
type MaskFn =
    Arc<dyn Fn(&RecordBatch) -> std::result::Result<BooleanArray, BoxError> + Send + Sync>;
type ColumnFn = Arc<dyn Fn(&RecordBatch) -> std::result::Result<ArrayRef, BoxError> + Send + Sync>;

/// One operator of a plan.
#[derive(Clone)]
pub(crate) enum Op {
    MapBatches {
        name: String,
        batch_size: Option<usize>,
        f: BatchFn,
    },
    Map {
        name: String,
        f: RowFn,
    },
    FlatMap {
        name: String,
        f: RowsFn,
    },
    Filter {
        name: String,
        f: MaskFn,
    },
    WithColumn {
        column: String,
        f: ColumnFn,
    },
    Select(Vec<String>),
    Drop(Vec<String>),
    Command {
        command: String,
        /// Longest wait for one answer; the process is killed after it.
        timeout: Option<std::time::Duration>,
    },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Op {
    /// How errors and plan checks name the operator.
    pub(crate) fn describe(&self) -> String {
        match self {
            Op::MapBatches { name, .. } => format!("map_batches({name})"),
            Op::Map { name, .. } => format!("map({name})"),
            Op::FlatMap { name, .. } => format!("flat_map({name})"),
            Op::Filter { name, .. } => format!("filter({name})"),
            Op::WithColumn { column, .. } => format!("with_column({column})"),
            Op::Select(columns) => format!("select_columns({})", columns.join(", ")),
            Op::Drop(columns) => format!("drop_columns({})", columns.join(", ")),
            Op::Command { command, .. } => format!("map command `{command}`"),
        }
    }
}

/// Checks, before anything runs, that no operator removes or replaces the
/// ID column (`id_column`), and that the columns named exist where they can
/// be known (up to the first opaque transform).
pub(crate) fn validate_plan(ops: &[Op], input: &Schema, id_column: Option<&str>) -> Result<()> {
    let mut known: Option<Vec<String>> =
        Some(input.fields().iter().map(|f| f.name().clone()).collect());
    for op in ops {
        match op {
            Op::Select(columns) => {
                if let Some(names) = &known
                    && let Some(missing) = columns.iter().find(|c| !names.contains(c))
                {
                    return plan_error(format!(
                        "{} names column {missing:?}, which the input does not have (columns: {})",
                        op.describe(),
                        names.join(", ")
                    ));
                }
                if let Some(id) = id_column.filter(|id| !columns.iter().any(|c| c == id)) {
                    return plan_error(format!(
                        "{} drops the ID column {id:?}; checkpointing needs it in every row up to the write. Add it to the selection",
                        op.describe()
                    ));
                }
                known = Some(columns.clone());
            }
            Op::Drop(columns) => {
                if let Some(id) = id_column.filter(|id| columns.iter().any(|c| c == id)) {
                    return plan_error(format!(
                        "{} drops the ID column {id:?}; checkpointing needs it in every row up to the write",
                        op.describe()
                    ));
                }
                if let Some(names) = &mut known {
                    names.retain(|n| !columns.contains(n));
                }
            }
            Op::WithColumn { column, .. } => {
                if id_column == Some(column.as_str()) {
                    return plan_error(format!(
                        "{} replaces the ID column; the IDs must reach the write unchanged. Write the new values to another column",
                        op.describe()
                    ));
                }
                if let Some(names) = &mut known
                    && !names.contains(column)
                {
                    names.push(column.clone());
                }
            }
            Op::Filter { .. } => {}
            Op::MapBatches { .. } | Op::Map { .. } | Op::FlatMap { .. } | Op::Command { .. } => {
                known = None
            }
        }
    }
    Ok(())
}

fn plan_error<T>(reason: String) -> Result<T> {
    Err(Error::Plan { reason })
}

/// One worker's copy of the operators, holding its own transform processes.
pub(crate) struct Pipeline {
    stages: Vec<Stage>,
    /// The key's columns, each kept in every output row.
    id_columns: Vec<String>,
}

struct Stage {
    op: Op,
    process: Option<CommandProcess>,
}

impl Pipeline {
    pub(crate) fn new(ops: &[Op], id_columns: &[String]) -> Self {
        Self {
            stages: ops
                .iter()
                .map(|op| Stage {
                    op: op.clone(),
                    process: None,
                })
                .collect(),
            id_columns: id_columns.to_vec(),
        }
    }

    /// Applies every operator to `batch`; may return several batches (or none).
    pub(crate) fn apply(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        let mut batches = vec![batch];
        for stage in &mut self.stages {
            let mut next = Vec::with_capacity(batches.len());
            for batch in batches {
                stage.apply(batch, &mut next)?;
            }
            for id in &self.id_columns {
                let Some(bad) = next.iter().find(|b| b.schema().index_of(id).is_err()) else {
                    continue;
                };
                return Err(Error::Transform {
                    operator: stage.op.describe(),
                    reason: format!(
                        "returned rows without the ID column {id:?} (columns: {}); keep it in every output row, checkpointing needs it",
                        column_names(&bad.schema())
                    ),
                });
            }
            batches = next;
        }
        Ok(batches)
    }
}

impl Stage {
    fn apply(&mut self, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let op = &self.op;
        let fail = |reason: String| Error::Transform {
            operator: op.describe(),
            reason,
        };
        match op {
            Op::MapBatches { batch_size, f, .. } => {
                let size = batch_size.unwrap_or(usize::MAX).max(1);
                let mut offset = 0;
                while offset < batch.num_rows() || (offset == 0 && batch.num_rows() == 0) {
                    let len = size.min(batch.num_rows() - offset);
                    let piece = batch.slice(offset, len);
                    out.push(f(piece).map_err(|e| fail(e.to_string()))?);
                    offset += len.max(1);
                }
            }
            Op::Map { f, .. } => {
                let rows = batch_to_rows(&batch).map_err(&fail)?;
                let mapped = rows
                    .into_iter()
                    .map(|r| f(r).map_err(|e| fail(e.to_string())))
                    .collect::<Result<Vec<_>>>()?;
                out.push(rows_to_batch(&mapped, &batch.schema()).map_err(&fail)?);
            }
            Op::FlatMap { f, .. } => {
                let rows = batch_to_rows(&batch).map_err(&fail)?;
                let mut mapped = Vec::new();
                for row in rows {
                    mapped.extend(f(row).map_err(|e| fail(e.to_string()))?);
                }
                if !mapped.is_empty() {
                    out.push(rows_to_batch(&mapped, &batch.schema()).map_err(&fail)?);
                }
            }
            Op::Filter { f, .. } => {
                let mask = f(&batch).map_err(|e| fail(e.to_string()))?;
                if mask.len() != batch.num_rows() {
                    return Err(fail(format!(
                        "returned {} flags for {} rows",
                        mask.len(),
                        batch.num_rows()
                    )));
                }
                let kept = arrow_select::filter::filter_record_batch(&batch, &mask)
                    .map_err(|e| fail(e.to_string()))?;
                out.push(kept);
            }
            Op::WithColumn { column, f } => {
                let values = f(&batch).map_err(|e| fail(e.to_string()))?;
                out.push(with_column(&batch, column, values).map_err(&fail)?);
            }
            Op::Select(columns) => {
                let indices = columns
                    .iter()
                    .map(|c| {
                        batch.schema().index_of(c).map_err(|_| {
                            fail(format!(
                                "no column {c:?} (columns: {})",
                                column_names(&batch.schema())
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                out.push(batch.project(&indices).map_err(|e| fail(e.to_string()))?);
            }
            Op::Drop(columns) => {
                let schema = batch.schema();
                let indices: Vec<usize> = (0..schema.fields().len())
                    .filter(|&i| !columns.contains(schema.field(i).name()))
                    .collect();
                out.push(batch.project(&indices).map_err(|e| fail(e.to_string()))?);
            }
            Op::Command { command, timeout } => {
                if self.process.is_none() {
                    self.process = Some(CommandProcess::spawn(command, *timeout)?);
                }
                let process = self.process.as_mut().expect("spawned above");
                out.push(process.transform(&batch)?);
            }
        }
        Ok(())
    }
}

/// The column names of a schema, for messages.
pub(crate) fn column_names(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns of a schema with their types (`uid: Int64, text: Utf8`), for messages.
pub(crate) fn describe_fields(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `batch` with `column` set to `values` (replaced in place, or appended).
fn with_column(
    batch: &RecordBatch,
    column: &str,
    values: ArrayRef,
) -> std::result::Result<RecordBatch, String> {
    if values.len() != batch.num_rows() {
        return Err(format!(
            "returned {} values for {} rows",
            values.len(),
            batch.num_rows()
        ));
    }
    let schema = batch.schema();
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    let field = Arc::new(Field::new(column, values.data_type().clone(), true));
    match schema.index_of(column) {
        Ok(i) => {
            fields[i] = field;
            columns[i] = values;
        }
        Err(_) => {
            fields.push(field);
            columns.push(values);
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// The rows of a batch as JSON objects (nulls kept as explicit nulls).
fn batch_to_rows(batch: &RecordBatch) -> std::result::Result<Vec<Row>, String> {
    let mut buffer = Vec::new();
    let mut writer = arrow_json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow_json::writer::JsonArray>(&mut buffer);
    writer.write(batch).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    if buffer.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&buffer).map_err(|e| e.to_string())
}

/// Rows back into a batch. Columns the input had keep the input's type;
/// new columns get the type their values suggest.
fn rows_to_batch(rows: &[Row], input: &SchemaRef) -> std::result::Result<RecordBatch, String> {
    let inferred = arrow_json::reader::infer_json_schema_from_iterator(
        rows.iter().map(|r| Ok(Value::Object(r.clone()))),
    )
    .map_err(|e| e.to_string())?;
    let mut fields: Vec<Arc<Field>> = Vec::new();
    for field in input.fields() {
        if rows.iter().any(|r| r.contains_key(field.name())) {
            fields.push(field.clone());
        }
    }
    for field in inferred.fields() {
        if input.field_with_name(field.name()).is_err() {
            fields.push(field.clone());
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.len().max(1))
        .build_decoder()
        .map_err(|e| e.to_string())?;
    decoder.serialize(rows).map_err(|e| e.to_string())?;
    Ok(decoder
        .flush()
        .map_err(|e| e.to_string())?
        .unwrap_or_else(|| RecordBatch::new_empty(schema)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray, UInt64Array};

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
            ("uid", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "h",
                Arc::new(UInt64Array::from(vec![u64::MAX, 0, 5])) as ArrayRef,
            ),
            (
                "text",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("ccc")])) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn rows_round_trip_keeps_types_and_nulls() {
        let b = batch();
        let rows = batch_to_rows(&b).unwrap();
        assert_eq!(rows.len(), 3);
        let back = rows_to_batch(&rows, &b.schema()).unwrap();
        assert_eq!(back, b);
    }

    #[test]
    fn flat_map_fans_out_and_keeps_the_id() {
        let op = Op::FlatMap {
            name: "explode".into(),
            f: Arc::new(|row: Row| {
                Ok((0..2)
                    .map(|i| {
                        let mut r = row.clone();
                        r.insert("clip".into(), Value::from(i));
                        r
                    })
                    .collect())
            }),
        };
        let mut pipeline = Pipeline::new(&[op], &["uid".to_string()]);
        let out = pipeline.apply(batch()).unwrap();
        assert_eq!(out[0].num_rows(), 6);
        assert!(out[0].schema().index_of("clip").is_ok());
    }

    #[test]
    fn plan_refuses_dropping_the_id_column() {
        let schema = batch().schema();
        let err = validate_plan(&[Op::Drop(vec!["uid".into()])], &schema, Some("uid")).unwrap_err();
        assert!(
            err.to_string().contains("drops the ID column \"uid\""),
            "{err}"
        );
        let err =
            validate_plan(&[Op::Select(vec!["text".into()])], &schema, Some("uid")).unwrap_err();
        assert!(err.to_string().contains("select_columns(text)"), "{err}");
        let err = validate_plan(&[Op::Select(vec!["nope".into()])], &schema, None).unwrap_err();
        assert!(err.to_string().contains("\"nope\""), "{err}");
        validate_plan(&[Op::Drop(vec!["text".into()])], &schema, Some("uid")).unwrap();
    }

    #[test]
    fn a_transform_that_loses_the_id_column_is_an_error() {
        let op = Op::MapBatches {
            name: "bad".into(),
            batch_size: None,
            f: Arc::new(|b: RecordBatch| Ok(b.project(&[2])?)),
        };
        let err = Pipeline::new(&[op], &["uid".to_string()])
            .apply(batch())
            .unwrap_err();
        assert!(err.to_string().contains("map_batches(bad)"), "{err}");
    }
}
