//! The limit a job runner can reach: a bare arrow-rs Parquet read -> write
//! of every file of a directory, nothing else (no checkpoint, no listing
//! through a filesystem layer, no transform), one file per thread at a
//! time, written with the settings cairn's sink uses (snappy; the ID
//! column without a dictionary).
//!
//! Usage: arrow_copy IN_DIR OUT_DIR [THREADS] [ID_COLUMN]   (THREADS: cores)
//! Prints one JSON object: seconds, rows, files.

use std::fs::File;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow_array::RecordBatchReader;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

fn main() {
    let mut args = std::env::args().skip(1);
    let input = args.next().expect("input directory");
    let output = args.next().expect("output directory");
    let threads: usize = args.next().map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |t| t.parse().expect("threads is a number"),
    );
    let id_column = args.next().unwrap_or_else(|| "uid".into());
    std::fs::create_dir_all(&output).unwrap();
    let started = Instant::now();
    let mut files: Vec<_> = std::fs::read_dir(&input)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    let count = files.len();
    let queue = Mutex::new(files);
    let rows = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(path) = queue.lock().unwrap().pop() {
                    let reader =
                        ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
                            .unwrap()
                            .build()
                            .unwrap();
                    let schema = reader.schema();
                    let props = WriterProperties::builder()
                        .set_compression(Compression::SNAPPY)
                        .set_column_dictionary_enabled(ColumnPath::from(id_column.as_str()), false)
                        .build();
                    let out =
                        File::create(std::path::Path::new(&output).join(path.file_name().unwrap()))
                            .unwrap();
                    let mut writer = ArrowWriter::try_new(out, schema, Some(props)).unwrap();
                    for batch in reader {
                        let batch = batch.unwrap();
                        rows.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                        writer.write(&batch).unwrap();
                    }
                    writer.close().unwrap();
                }
            });
        }
    });
    println!(
        "{}",
        serde_json::json!({
            "seconds": started.elapsed().as_secs_f64(),
            "rows": rows.load(Ordering::Relaxed),
            "files": count,
        })
    );
}
