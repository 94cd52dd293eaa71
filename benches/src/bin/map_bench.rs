//! Row transforms through the library: the same 1-to-1 transform (add a
//! column with the text's length) as a JSON-row `map`, a typed `map_rows`
//! (serde_arrow) and an Arrow-kernel `with_column`, over the same rows in
//! memory, written as Parquet to local disk. Prints one JSON object per form.
//!
//! Usage: map_bench [ROWS] [DIR]   (default 1000000 rows, a temporary dir)

use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use cairn_dataset::{Dataset, JobContext};

#[derive(serde::Deserialize)]
struct Doc {
    uid: i64,
    text: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Measured {
    uid: i64,
    text: String,
    chars: u64,
}

fn batches(rows: usize) -> Vec<RecordBatch> {
    (0..rows)
        .step_by(10_000)
        .map(|start| {
            let end = (start + 10_000).min(rows);
            RecordBatch::try_from_iter([
                (
                    "uid",
                    Arc::new(Int64Array::from_iter_values(start as i64..end as i64)) as ArrayRef,
                ),
                (
                    "text",
                    Arc::new(StringArray::from_iter_values(
                        (start..end).map(|i| format!("document number {i} with some words")),
                    )) as ArrayRef,
                ),
            ])
            .unwrap()
        })
        .collect()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(1_000_000, |r| r.parse().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let dir = args
        .next()
        .unwrap_or_else(|| tmp.path().to_str().unwrap().to_string());
    let input = batches(rows);
    for form in ["json map", "typed map_rows", "arrow with_column"] {
        let data = Dataset::from_items(input.clone());
        let data = match form {
            "json map" => data.map("chars", |mut row| {
                let chars = row["text"].as_str().unwrap().len() as u64;
                row.insert("chars".into(), chars.into());
                Ok(row)
            }),
            "typed map_rows" => data.map_rows("chars", |d: Doc| {
                Ok(Measured {
                    chars: d.text.len() as u64,
                    uid: d.uid,
                    text: d.text,
                })
            }),
            _ => data.with_column("chars", |b: &RecordBatch| {
                let text = b.column_by_name("text").unwrap().as_string::<i32>();
                Ok(Arc::new(UInt64Array::from_iter_values(
                    text.iter().map(|t| t.map_or(0, str::len) as u64),
                )) as ArrayRef)
            }),
        };
        let out = format!("{dir}/{}", form.replace(' ', "-"));
        let started = Instant::now();
        let summary = data.write_parquet(&JobContext::new(), &out).await.unwrap();
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(summary.rows_written as usize, rows);
        println!(
            "{}",
            serde_json::json!({"form": form, "rows": rows, "seconds": seconds,
                               "rows_per_s": rows as f64 / seconds})
        );
    }
}
