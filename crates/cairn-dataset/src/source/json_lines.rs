//! JSON-lines input: one piece per file; the schema inferred from the first
//! 1,000 lines of each file (at most 4 MiB read) and merged across files.
//! Files are decoded as they stream in (memory: one read-ahead window and one
//! batch per worker), and a field the schema sample did not see is an error
//! naming the file and line, never dropped.

use std::io::Cursor;
use std::sync::Arc;

use arrow_schema::Schema;
use cairn_fs::StorageOptions;

use super::listing::list_inputs;
use super::{FileFormat, InputFile, Piece, PlannedSource, with_extra_fields};
use crate::error::{Error, Result};

pub(super) async fn plan_json(
    urls: &[String],
    options: &StorageOptions,
    include_paths: bool,
) -> Result<PlannedSource> {
    let listed = list_inputs(urls, options, &["json", "jsonl", "ndjson"]).await?;
    let mut merged = Schema::empty();
    let mut files = Vec::new();
    let inputs = listed.iter().map(|l| l.fingerprint.clone()).collect();
    for super::listing::Listed { fs, path, size, .. } in listed {
        let url = fs.url(&path);
        let head = fs
            .cat_range_with_size(&path, 0, Some(4 << 20), size)
            .await?;
        let complete = if size <= 4 << 20 {
            &head[..]
        } else {
            let end = head.iter().rposition(|&b| b == b'\n').unwrap_or(0);
            &head[..end]
        };
        let (schema, _) = arrow_json::reader::infer_json_schema(Cursor::new(complete), Some(1000))
            .map_err(|e| Error::Input {
                file: url.clone(),
                reason: format!("not JSON lines ({e}); give one JSON object per line"),
            })?;
        let schema = in_document_order(schema, complete);
        merged = Schema::try_merge([merged, schema]).map_err(|e| Error::Input {
            file: url.clone(),
            reason: format!("its columns conflict with the files before it ({e})"),
        })?;
        files.push(Arc::new(InputFile {
            fs,
            url,
            path,
            size,
            format: FileFormat::Json,
            held: None,
        }));
    }
    let json_schema = Arc::new(merged);
    let schema = with_extra_fields(&json_schema, false, include_paths, urls)?;
    Ok(PlannedSource {
        schema,
        total_rows: None,
        rows_skipped_unread: 0,
        row_groups_skipped: 0,
        files: files.len(),
        files_skipped: 0,
        pieces: files.into_iter().map(Piece::JsonFile).collect(),
        include_row_hash: false,
        include_paths,
        json_schema: Some(json_schema),
        id_range: None,
        inputs,
    })
}

/// `schema` (inferred; its fields come out sorted by name) with its fields
/// in the order the lines of `text` first name them, so the output keeps
/// the input's column order.
fn in_document_order(schema: Schema, text: &[u8]) -> Schema {
    let mut order: Vec<String> = Vec::new();
    for line in text.split(|&b| b == b'\n').take(1000) {
        let mut de = serde_json::Deserializer::from_slice(line);
        if let Ok(keys) = serde::de::Deserializer::deserialize_map(&mut de, KeysInOrder) {
            for key in keys {
                if !order.contains(&key) {
                    order.push(key);
                }
            }
        }
        if order.len() >= schema.fields().len() {
            break;
        }
    }
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.sort_by_key(|f| {
        order
            .iter()
            .position(|k| k == f.name())
            .unwrap_or(usize::MAX)
    });
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// A JSON object's keys, in the order they are written.
struct KeysInOrder;

impl<'de> serde::de::Visitor<'de> for KeysInOrder {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Vec<String>, A::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<serde::de::IgnoredAny>()?;
            keys.push(key);
        }
        Ok(keys)
    }
}

/// Bytes read from storage at a time.
const READ_CHUNK: usize = 1 << 20;

/// A JSON-lines file being decoded as it streams in.
struct JsonStream {
    reader: cairn_fs::FileReader,
    decoder: arrow_json::reader::Decoder,
    batch_size: usize,
    /// Read but not yet given to the decoder.
    buffer: Vec<u8>,
    at: usize,
    /// Given to the decoder since the last batch (to find a bad line).
    fed: Vec<u8>,
    /// The line number of the first line of `fed`.
    fed_first_line: u64,
    eof: bool,
    url: String,
    fields: Arc<Schema>,
}

/// The batches of the JSON-lines file `path` on `fs`, decoded with `schema`
/// as the file streams in.
pub(super) fn stream_json(
    fs: cairn_fs::FileSystem,
    path: String,
    url: String,
    schema: Arc<Schema>,
    batch_size: usize,
) -> futures::stream::BoxStream<'static, Result<arrow_array::RecordBatch>> {
    use futures::{StreamExt, TryStreamExt};
    let start = async move {
        let reader = fs.open_read(&path).await?;
        let decoder = arrow_json::ReaderBuilder::new(schema.clone())
            .with_batch_size(batch_size)
            .with_strict_mode(true)
            .build_decoder()
            .map_err(|e| Error::Input {
                file: url.clone(),
                reason: format!("cannot decode its JSON lines ({e})"),
            })?;
        Ok::<_, Error>(JsonStream {
            reader,
            decoder,
            batch_size,
            buffer: Vec::new(),
            at: 0,
            fed: Vec::new(),
            fed_first_line: 1,
            eof: false,
            url,
            fields: schema,
        })
    };
    futures::stream::once(start)
        .map_ok(|state| {
            futures::stream::try_unfold(state, |mut s| async move {
                s.next_batch().await.map(|b| b.map(|b| (b, s)))
            })
        })
        .try_flatten()
        .boxed()
}

impl JsonStream {
    async fn next_batch(&mut self) -> Result<Option<arrow_array::RecordBatch>> {
        use futures::AsyncReadExt;
        loop {
            if self.at == self.buffer.len() && !self.eof {
                self.buffer.resize(READ_CHUNK, 0);
                let n = self
                    .reader
                    .read(&mut self.buffer)
                    .await
                    .map_err(|e| Error::Input {
                        file: self.url.clone(),
                        reason: format!("cannot read it ({e})"),
                    })?;
                self.buffer.truncate(n);
                self.at = 0;
                self.eof = n == 0;
            }
            let rest = &self.buffer[self.at..];
            let consumed = match self.decoder.decode(rest) {
                Ok(n) => n,
                Err(e) => return Err(self.bad_line(e, rest.to_vec())),
            };
            self.fed.extend_from_slice(&rest[..consumed]);
            self.at += consumed;
            let drained = self.eof && self.at == self.buffer.len();
            if self.decoder.len() >= self.batch_size || drained {
                let batch = match self.decoder.flush() {
                    Ok(batch) => batch,
                    Err(e) => return Err(self.bad_line(e, Vec::new())),
                };
                self.fed_first_line += self.fed.iter().filter(|&&b| b == b'\n').count() as u64;
                self.fed.clear();
                match batch {
                    Some(batch) => return Ok(Some(batch)),
                    None if drained => return Ok(None),
                    None => {}
                }
            }
        }
    }

    /// The error for a decoding failure, naming the first line of the
    /// current batch that has a field the schema lacks, or else the lines
    /// the batch spans.
    fn bad_line(&self, e: arrow_schema::ArrowError, unfed: Vec<u8>) -> Error {
        let mut text = self.fed.clone();
        text.extend_from_slice(&unfed);
        for (offset, line) in text.split(|&b| b == b'\n').enumerate() {
            let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(line) else {
                continue;
            };
            if let Some(field) = object
                .keys()
                .find(|k| self.fields.field_with_name(k).is_err())
            {
                return Error::Input {
                    file: self.url.clone(),
                    reason: format!(
                        "line {} has the field {field:?}, which the schema inferred from the first lines of the input files does not have ({}); put a line with that field among the first 1,000 lines, or give every line the same fields",
                        self.fed_first_line + offset as u64,
                        crate::ops::describe_fields(&self.fields)
                    ),
                };
            }
        }
        let last = self.fed_first_line + text.iter().filter(|&&b| b == b'\n').count() as u64;
        Error::Input {
            file: self.url.clone(),
            reason: format!(
                "cannot decode its JSON lines ({e}), in lines {} to {last}",
                self.fed_first_line
            ),
        }
    }
}
