//! ID files: one-column Parquet files holding a unit's IDs, as Ray Data 2.60
//! writes them (the column is named like the ID column; snappy compression).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};
use crate::idset::{MAX_RUNS, id_runs};

/// Encodes `ids` as a one-column Parquet file whose column is `id_column`.
///
/// ```
/// use std::sync::Arc;
/// let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3]));
/// let bytes = cairn_checkpoint::internals::encode_ids("id", ids).unwrap();
/// let back = cairn_checkpoint::internals::decode_ids("u.parquet", bytes, "id").unwrap();
/// assert_eq!(back.iter().map(|a| a.len()).sum::<usize>(), 3);
/// ```
pub fn encode_ids(id_column: &str, ids: ArrayRef) -> Result<Bytes> {
    encode_unit_ids(id_column, ids, None, &[])
}

/// The key, in an ID file's Parquet key-value metadata, under which cairn
/// records how many data files its unit wrote (readers that do not know it,
/// Ray Data among them, ignore it).
pub const DATA_FILES_KEY: &str = "cairn.data_files";

/// The key, in an ID file's Parquet key-value metadata, under which cairn
/// records that the file's IDs are a few runs of consecutive 64-bit
/// integers, as `first-last,first-last,...` (their 64-bit patterns, in
/// decimal), so a resume can add the runs without decoding the column.
pub const ID_RUNS_KEY: &str = "cairn.id_runs";

/// The key, in a pending record's Parquet key-value metadata, under which
/// cairn lists the partition directories (relative to the output, as a JSON
/// array of strings) its unit writes into, so that rolling the unit back
/// lists those directories and nothing else.
pub const PARTITIONS_KEY: &str = "cairn.partitions";

/// The key, in a unit's record's Parquet key-value metadata, under which a
/// table sink writes its ledger entry: where in the table its unit's rows
/// are (an Iceberg snapshot ID, the data files of a Lance version), as the
/// sink encodes it. Written into the pending record before the unit's table
/// commit, so it is there whenever the commit may have landed; read only
/// when the table's history no longer tells (maintenance removed it).
pub const TABLE_LEDGER_KEY: &str = "cairn.table_ledger";

/// The ledger entry ([`TABLE_LEDGER_KEY`]) of the record `file` whose
/// bytes are `bytes`, if it has one; only the footer is decoded.
pub(crate) fn table_ledger(file: &str, bytes: Bytes) -> Result<Option<String>> {
    let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes)
        .map_err(|e| Error::CorruptIdFile {
            file: file.to_string(),
            reason: format!("not a readable Parquet file ({e})"),
        })?;
    Ok(metadata
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|e| e.key == TABLE_LEDGER_KEY))
        .and_then(|e| e.value.clone()))
}

/// [`encode_ids`], recording that the unit wrote `data_files` data files
/// (0 when a filter dropped all of its rows), so `cairn ckpt verify` can
/// tell a unit without output from one whose data is missing, and the
/// partition directories it writes into (none: the output itself).
pub(crate) fn encode_unit_ids(
    id_column: &str,
    ids: ArrayRef,
    data_files: Option<usize>,
    partitions: &[String],
) -> Result<Bytes> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        id_column,
        ids.data_type().clone(),
        ids.null_count() > 0,
    )]));
    let mut metadata = Vec::new();
    if let Some(n) = data_files {
        metadata.push(KeyValue::new(DATA_FILES_KEY.to_string(), n.to_string()));
    }
    if !partitions.is_empty() {
        let list = serde_json::to_string(partitions).expect("strings serialize");
        metadata.push(KeyValue::new(PARTITIONS_KEY.to_string(), list));
    }
    if let Some(runs) = id_runs(ids.as_ref()) {
        let text: Vec<String> = runs.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        metadata.push(KeyValue::new(ID_RUNS_KEY.to_string(), text.join(",")));
    }
    let batch = RecordBatch::try_new(schema.clone(), vec![ids]).map_err(|e| Error::Encode {
        reason: e.to_string(),
    })?;
    // IDs are unique: a dictionary never pays, and building one for 100k
    // random 64-bit IDs costs more than the rest of the encoding. Integer
    // IDs are delta-encoded: sequential IDs shrink to a few bytes per
    // thousand (less to store, read and decompress on every resume), random
    // ones stay about their plain size.
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false);
    if schema.field(0).data_type().is_integer() {
        props =
            props.set_column_encoding(ColumnPath::from(id_column), Encoding::DELTA_BINARY_PACKED);
    }
    let props = props
        .set_key_value_metadata((!metadata.is_empty()).then_some(metadata))
        .build();
    let mut out = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut out, schema, Some(props)).map_err(|e| Error::Encode {
            reason: e.to_string(),
        })?;
    writer.write(&batch).map_err(|e| Error::Encode {
        reason: e.to_string(),
    })?;
    writer.close().map_err(|e| Error::Encode {
        reason: e.to_string(),
    })?;
    Ok(Bytes::from(out))
}

/// Decodes the IDs of the ID file `file` (named in errors). The file must
/// hold exactly one column, named `id_column`. A file damaged so that the
/// Parquet decoder panics is an error naming it, like any other damage.
pub fn decode_ids(file: &str, bytes: Bytes, id_column: &str) -> Result<Vec<ArrayRef>> {
    decode_unit_ids(file, bytes, id_column, false).map(|ids| ids.arrays)
}

/// The partition directories a pending record lists (under `cairn.partitions`):
/// `Ok(None)` when it lists none (a flat unit's record, or Ray's); an
/// error when the file is not a readable Parquet file or a listed
/// directory is not a plain relative path under the output (empty,
/// absolute, or with a `.` or `..` segment), so that a damaged record can
/// never send a roll-back outside the output.
///
/// ```
/// use std::sync::Arc;
/// let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1]));
/// let bytes = cairn_checkpoint::internals::encode_ids("id", ids).unwrap();
/// assert_eq!(cairn_checkpoint::internals::recorded_partitions("u.pending.parquet", bytes).unwrap(), None);
/// ```
pub fn recorded_partitions(file: &str, bytes: Bytes) -> Result<Option<Vec<String>>> {
    let corrupt = |reason: String| Error::CorruptIdFile {
        file: file.to_string(),
        reason,
    };
    let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes)
        .map_err(|e| corrupt(format!("not a readable Parquet file ({e})")))?;
    let Some(list) = metadata
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|e| e.key == PARTITIONS_KEY))
        .and_then(|e| e.value.as_deref())
    else {
        return Ok(None);
    };
    let dirs: Vec<String> = serde_json::from_str(list)
        .map_err(|e| corrupt(format!("its {PARTITIONS_KEY} is not a list of paths ({e})")))?;
    if let Some(bad) = dirs.iter().find(|d| !is_relative_dir(d)) {
        return Err(corrupt(format!(
            "its {PARTITIONS_KEY} names {bad:?}, which is not a directory under the output"
        )));
    }
    Ok(Some(dirs))
}

/// A relative directory path of plain segments (`a=1/b=2`).
fn is_relative_dir(dir: &str) -> bool {
    !dir.is_empty()
        && dir
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// The IDs of a unit's ID file.
#[derive(Debug)]
pub(crate) struct UnitIds {
    /// The ID arrays; empty when `runs` holds the IDs.
    pub(crate) arrays: Vec<ArrayRef>,
    /// The IDs as runs of consecutive 64-bit keys, when the file records
    /// them (`ID_RUNS_KEY`) and `decode_unit_ids` was asked to use them.
    pub(crate) runs: Option<Vec<(u64, u64)>>,
    /// The number of data files the unit recorded, if any.
    pub(crate) data_files: Option<usize>,
}

/// [`decode_ids`], with the number of data files the unit recorded, if any;
/// with `use_runs`, a file recording its IDs as runs (`ID_RUNS_KEY`,
/// checked against the file's row count and column type) is not decoded.
pub(crate) fn decode_unit_ids(
    file: &str,
    bytes: Bytes,
    id_column: &str,
    use_runs: bool,
) -> Result<UnitIds> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode_checked(file, bytes, id_column, use_runs)
    }))
    .unwrap_or_else(|panic| {
        let reason = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("the decoder failed");
        Err(Error::CorruptIdFile {
            file: file.to_string(),
            reason: format!("the Parquet decoder gave up on it ({reason})"),
        })
    })
}

fn decode_checked(file: &str, bytes: Bytes, id_column: &str, use_runs: bool) -> Result<UnitIds> {
    let corrupt = |reason: String| Error::CorruptIdFile {
        file: file.to_string(),
        reason,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| corrupt(format!("not a readable Parquet file ({e})")))?;
    let columns: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    if columns.len() != 1 || columns[0] != id_column {
        return Err(Error::WrongIdColumn {
            file: file.to_string(),
            expected: id_column.to_string(),
            found: columns,
        });
    }
    let file_metadata = builder.metadata().file_metadata();
    let value_of = |key: &str| {
        file_metadata
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|e| e.key == key))
            .and_then(|e| e.value.as_deref())
    };
    let data_files = value_of(DATA_FILES_KEY).and_then(|v| v.parse().ok());
    if use_runs && let Some(runs) = value_of(ID_RUNS_KEY).and_then(parse_runs) {
        let type_ok = matches!(
            builder.schema().field(0).data_type(),
            DataType::Int64 | DataType::UInt64
        );
        // The runs must account for every row of the file.
        let rows: u128 = runs.iter().map(|&(a, b)| u128::from(b - a) + 1).sum();
        if type_ok && rows == file_metadata.num_rows() as u128 {
            return Ok(UnitIds {
                arrays: Vec::new(),
                runs: Some(runs),
                data_files,
            });
        }
    }
    let reader = builder
        .build()
        .map_err(|e| corrupt(format!("cannot read its row groups ({e})")))?;
    let ids = reader
        .map(|batch| {
            batch
                .map(|b| b.column(0).clone())
                .map_err(|e| corrupt(format!("damaged data ({e})")))
        })
        .collect::<Result<_>>()?;
    Ok(UnitIds {
        arrays: ids,
        runs: None,
        data_files,
    })
}

/// The runs `first-last,first-last,...` of [`ID_RUNS_KEY`]: at most
/// [`MAX_RUNS`], each `first <= last`; anything else is not runs.
fn parse_runs(text: &str) -> Option<Vec<(u64, u64)>> {
    let runs = text
        .split(',')
        .map(|run| {
            let (first, last) = run.split_once('-')?;
            let run = (first.parse::<u64>().ok()?, last.parse::<u64>().ok()?);
            (run.0 <= run.1).then_some(run)
        })
        .collect::<Option<Vec<_>>>()?;
    (runs.len() <= MAX_RUNS).then_some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};

    fn keys(ids: &UnitIds) -> Vec<u64> {
        ids.arrays
            .iter()
            .flat_map(|a| {
                a.as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .map(|v| v as u64)
            .collect()
    }

    #[test]
    fn runs_of_ids_are_recorded_and_read_without_decoding() {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(-3..1_000));
        let bytes = encode_unit_ids("id", ids, Some(1), &[]).unwrap();
        let read = decode_unit_ids("f", bytes, "id", true).unwrap();
        // -3..0 then 0..1000 wrap in key space: two runs of keys.
        let runs = vec![(-3i64 as u64, u64::MAX), (0, 999)];
        assert_eq!(
            (read.runs, read.arrays.len(), read.data_files),
            (Some(runs), 0, Some(1))
        );
        // Row groups of a unit read by turns: a run each.
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (10..1_010).chain(5_000..5_100),
        ));
        let bytes = encode_unit_ids("id", ids, None, &[]).unwrap();
        let fast = decode_unit_ids("f", bytes.clone(), "id", true).unwrap();
        assert_eq!(
            (fast.runs, fast.arrays.len()),
            (Some(vec![(10, 1009), (5_000, 5_099)]), 0)
        );
        // decode_ids (and use_runs = false) still hands back the arrays.
        let slow = decode_unit_ids("f", bytes, "id", false).unwrap();
        let expected: Vec<u64> = (10..1_010).chain(5_000..5_100).collect();
        assert_eq!(keys(&slow), expected);
    }

    #[test]
    fn a_run_that_does_not_match_the_rows_is_ignored() {
        // A recorded run one longer than the file: decoded instead.
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![ids]).unwrap();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![KeyValue::new(
                ID_RUNS_KEY.to_string(),
                "1-2,3-4".to_string(),
            )]))
            .build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let read = decode_unit_ids("f", Bytes::from(out), "id", true).unwrap();
        assert_eq!((read.runs.is_none(), keys(&read)), (true, vec![1, 2, 3]));
        for text in ["", "1-", "2-1", "a-b", "1-2;3-4"] {
            assert_eq!(parse_runs(text), None, "{text:?}");
        }
        // String IDs never record a run.
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        let read = decode_unit_ids(
            "f",
            encode_unit_ids("id", ids, None, &[]).unwrap(),
            "id",
            true,
        );
        assert!(read.unwrap().runs.is_none());
    }
}
