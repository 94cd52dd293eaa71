//! ID files: one-column Parquet files holding a unit's IDs, as Ray Data 2.60
//! writes them (the column is named like the ID column; snappy compression).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};

/// Encodes `ids` as a one-column Parquet file whose column is `id_column`.
///
/// ```
/// use std::sync::Arc;
/// let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3]));
/// let bytes = cairn_checkpoint::encode_ids("id", ids).unwrap();
/// let back = cairn_checkpoint::decode_ids("u.parquet", bytes, "id").unwrap();
/// assert_eq!(back.iter().map(|a| a.len()).sum::<usize>(), 3);
/// ```
pub fn encode_ids(id_column: &str, ids: ArrayRef) -> Result<Bytes> {
    encode_unit_ids(id_column, ids, None)
}

/// The key, in an ID file's Parquet key-value metadata, under which cairn
/// records how many data files its unit wrote (readers that do not know it,
/// Ray Data among them, ignore it).
pub const DATA_FILES_KEY: &str = "cairn.data_files";

/// [`encode_ids`], recording that the unit wrote `data_files` data files
/// (0 when a filter dropped all of its rows), so `cairn ckpt verify` can
/// tell a unit without output from one whose data is missing.
pub(crate) fn encode_unit_ids(
    id_column: &str,
    ids: ArrayRef,
    data_files: Option<usize>,
) -> Result<Bytes> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        id_column,
        ids.data_type().clone(),
        ids.null_count() > 0,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![ids]).map_err(|e| Error::Encode {
        reason: e.to_string(),
    })?;
    // IDs are unique: a dictionary never pays, and building one for 100k
    // random 64-bit IDs costs more than the rest of the encoding.
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_key_value_metadata(data_files.map(|n| {
            vec![parquet::file::metadata::KeyValue::new(
                DATA_FILES_KEY.to_string(),
                n.to_string(),
            )]
        }))
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
    decode_unit_ids(file, bytes, id_column).map(|(ids, _)| ids)
}

/// [`decode_ids`], with the number of data files the unit recorded, if any.
pub(crate) fn decode_unit_ids(
    file: &str,
    bytes: Bytes,
    id_column: &str,
) -> Result<(Vec<ArrayRef>, Option<usize>)> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode_checked(file, bytes, id_column)
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

fn decode_checked(
    file: &str,
    bytes: Bytes,
    id_column: &str,
) -> Result<(Vec<ArrayRef>, Option<usize>)> {
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
    let data_files = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|e| e.key == DATA_FILES_KEY))
        .and_then(|e| e.value.as_deref()?.parse().ok());
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
    Ok((ids, data_files))
}
