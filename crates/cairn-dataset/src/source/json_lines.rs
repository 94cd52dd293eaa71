//! JSON-lines input: one piece per file; the schema inferred from the first
//! 1,000 lines of each file (at most 4 MiB read) and merged across files.

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
    for (fs, path, size) in listed {
        let url = fs.url(&path);
        let head = fs.cat_range(&path, 0, Some(size.min(4 << 20))).await?;
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
        merged = Schema::try_merge([merged, schema]).map_err(|e| Error::Input {
            file: url.clone(),
            reason: format!("its columns conflict with the files before it ({e})"),
        })?;
        files.push(Arc::new(InputFile {
            fs,
            url,
            path,
            format: FileFormat::Json,
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
    })
}
