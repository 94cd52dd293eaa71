//! Jobs through the library on local files: resume after failures, 1:N,
//! plan checks, bad input. Exactly-once is checked by reading the output.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use cairn_checkpoint::internals::CheckpointConfig;
use cairn_dataset::{Dataset, Error, JobContext, Row, SaveMode, Sink, Source};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

/// Writes `files` Parquet files of `per_file` rows (`uid`, `text`) under `dir`.
fn write_input(dir: &std::path::Path, files: usize, per_file: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for f in 0..files {
        let start = (f * per_file) as i64;
        let uid = Int64Array::from_iter_values(start..start + per_file as i64);
        let text =
            StringArray::from_iter_values((0..per_file).map(|i| format!("t{}", start + i as i64)));
        write_batch(
            &dir.join(format!("part-{f:03}.parquet")),
            RecordBatch::try_from_iter([
                ("uid", Arc::new(uid) as ArrayRef),
                ("text", Arc::new(text) as ArrayRef),
            ])
            .unwrap(),
        );
    }
}

fn write_batch(path: &std::path::Path, batch: RecordBatch) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        batch.schema(),
        Some(props),
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// A temporary directory and a job's `in`, `out` and `ckpt` paths in it.
struct Dirs {
    tmp: tempfile::TempDir,
    input: std::path::PathBuf,
    output: std::path::PathBuf,
    ckpt: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| tmp.path().join(name);
    Dirs {
        input: path("in"),
        output: path("out"),
        ckpt: path("ckpt"),
        tmp,
    }
}

fn ctx(ckpt: &std::path::Path, commit_rows: usize) -> JobContext {
    let mut config = CheckpointConfig::new("uid", ckpt.to_str().unwrap());
    config.commit_rows = commit_rows;
    JobContext::new()
        .checkpoint(config)
        .workers(2)
        .batch_size(50)
}

#[tokio::test]
async fn a_failed_transform_resumes_exactly_once() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 4, 500);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let failing =
        Dataset::read_parquet([input.to_str().unwrap()]).map_batches("flaky", None, move |b| {
            if counter.fetch_add(b.num_rows(), Ordering::SeqCst) > 1000 {
                return Err("model server went away".into());
            }
            Ok(b)
        });
    let err = failing
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("map_batches(flaky)") && err.to_string().contains("went away"),
        "{err}"
    );
    let partial = output_counts(&output);
    assert!(
        !partial.is_empty() && partial.len() < 2000,
        "partial output: {}",
        partial.len()
    );
    assert!(ckpt.exists(), "a failed run keeps its checkpoint");

    let summary = Dataset::read_parquet([input.to_str().unwrap()])
        .map_batches("fixed", None, Ok)
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap();
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 2000);
    assert!(counts.values().all(|&n| n == 1), "duplicates in the output");
    assert_eq!(summary.rows_skipped as usize, partial.len());
    assert_eq!(summary.rows_written as usize, 2000 - partial.len());
    assert!(summary.checkpoint_removed && !ckpt.exists());
}

/// How often each uid occurs in the Parquet files under `dir` (at any
/// depth; none when `dir` is missing), read with the parquet crate, not
/// through cairn. A file that cannot be read fails the test.
fn output_counts(dir: &std::path::Path) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    if !dir.exists() {
        return counts;
    }
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "parquet") {
                continue;
            }
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                std::fs::File::open(&path).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .build()
            .unwrap();
            for batch in reader {
                let batch = batch.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let uid = batch
                    .column_by_name("uid")
                    .unwrap()
                    .as_primitive::<Int64Type>();
                for v in uid.values() {
                    *counts.entry(*v).or_default() += 1;
                }
            }
        }
    }
    counts
}

#[derive(serde::Deserialize)]
struct Doc {
    uid: i64,
    text: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Clip {
    uid: i64,
    clip: u32,
    text: String,
}

/// A 1:3 job that fails on uid 450 (`explode(Some(450))`), then runs again
/// without failing: no source row is ever half committed, and the end
/// holds each uid in three rows, once each (read with the parquet crate).
/// Returns the output directory's first Parquet file, for its schema.
async fn one_to_three_resumes_exactly_once(
    explode: impl Fn(Dataset, Option<i64>) -> Dataset,
) -> parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder<std::fs::File> {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 2, 300);
    let source = || Dataset::read_parquet([input.to_str().unwrap()]);
    let first = explode(source(), Some(450))
        .write_parquet(&ctx(&ckpt, 60), output.to_str().unwrap())
        .await;
    assert!(first.unwrap_err().to_string().contains("bad sample 450"));
    let partial = output_counts(&output);
    assert!(!partial.is_empty(), "units committed before the failure");
    assert!(
        partial.values().all(|&n| n == 3),
        "a source row was half committed"
    );
    let summary = explode(source(), None)
        .write_parquet(&ctx(&ckpt, 60), output.to_str().unwrap())
        .await
        .unwrap();
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 600);
    assert!(
        counts.values().all(|&n| n == 3),
        "each uid in three rows, once each"
    );
    assert_eq!(summary.rows_skipped as usize, partial.len());
    let any_file = std::fs::read_dir(&output)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(any_file).unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn flat_map_outputs_of_one_row_commit_together() {
    one_to_three_resumes_exactly_once(|data, fail_at| {
        data.flat_map("clips", move |row: Row| {
            let uid = row["uid"].as_i64().unwrap();
            if Some(uid) == fail_at {
                return Err(format!("bad sample {uid}").into());
            }
            Ok((0..3)
                .map(|clip| {
                    let mut r = row.clone();
                    r.insert("clip".into(), Value::from(clip));
                    r
                })
                .collect())
        })
    })
    .await;
}

#[tokio::test]
async fn typed_flat_map_resumes_exactly_once() {
    let file = one_to_three_resumes_exactly_once(|data, fail_at| {
        data.flat_map_rows("clips", move |doc: Doc| {
            if Some(doc.uid) == fail_at {
                return Err(format!("bad sample {}", doc.uid).into());
            }
            Ok((0..3)
                .map(|clip| Clip {
                    uid: doc.uid,
                    clip,
                    text: doc.text.clone(),
                })
                .collect::<Vec<_>>())
        })
    })
    .await;
    // The typed output's columns are Clip's fields, in order.
    let names: Vec<_> = file
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["uid", "clip", "text"]);
    assert_eq!(
        file.schema().field(2).data_type(),
        &arrow_schema::DataType::Utf8
    );
}

#[tokio::test]
async fn row_hash_resume_skips_committed_row_groups_unread() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 3, 1000);
    let mut config = CheckpointConfig::new("row_hash", ckpt.to_str().unwrap());
    config.commit_rows = 100;
    let ctx = JobContext::new()
        .checkpoint(config)
        .workers(1)
        .batch_size(100);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let err = Dataset::from_source(Source::parquet([input.to_str().unwrap()]).with_row_hash())
        .map_batches("stop", None, move |b| {
            if counter.fetch_add(1, Ordering::SeqCst) == 17 {
                return Err("preempted".into());
            }
            Ok(b)
        })
        .write_parquet(&ctx, output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("preempted"));
    let summary = Dataset::from_source(Source::parquet([input.to_str().unwrap()]).with_row_hash())
        .write_parquet(&ctx, output.to_str().unwrap())
        .await
        .unwrap();
    // One worker, 100-row units over 100-row row groups: the 17 committed
    // units are whole row groups, skipped without being read.
    assert_eq!(
        (summary.rows_skipped_unread, summary.row_groups_skipped),
        (1700, 17)
    );
    assert_eq!(summary.files_skipped, 1);
    assert_eq!(summary.rows_read, 1300);
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 3000);
    assert!(counts.values().all(|&n| n == 1));
}

#[tokio::test]
async fn a_finished_run_with_a_kept_checkpoint_writes_nothing_and_says_so() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 1, 200);
    let mut config = CheckpointConfig::new("uid", ckpt.to_str().unwrap());
    config.delete_checkpoint_on_success = false;
    let ctx = JobContext::new().checkpoint(config);
    let job = || Dataset::read_parquet([input.to_str().unwrap()]);
    let first = job()
        .write_parquet(&ctx, output.to_str().unwrap())
        .await
        .unwrap();
    assert!(!first.all_already_committed() && ckpt.exists());
    let again = job()
        .write_parquet(&ctx, output.to_str().unwrap())
        .await
        .unwrap();
    assert!(again.all_already_committed());
    assert_eq!((again.rows_skipped, again.rows_written), (200, 0));
    // Overwrite would delete the committed rows while the checkpoint skips them.
    let err = job()
        .write(
            &ctx,
            Sink::parquet(output.to_str().unwrap()).mode(SaveMode::Overwrite),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("mode overwrite would delete"),
        "{err}"
    );
    assert_eq!(output_counts(&output).len(), 200, "nothing deleted");
}

#[tokio::test]
async fn plan_errors_come_before_any_write() {
    let Dirs {
        tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 1, 10);
    let ctx = ctx(&ckpt, 100);
    let input_url = input.to_str().unwrap();
    let out = output.to_str().unwrap();
    let cases: Vec<(Dataset, &str)> = vec![
        (
            Dataset::read_parquet([input_url]).drop_columns(["uid"]),
            "drop_columns(uid) drops the ID column",
        ),
        (
            Dataset::read_parquet([input_url]).select_columns(["text"]),
            "select_columns(text) drops the ID column",
        ),
        (
            Dataset::read_parquet([input_url])
                .with_column("uid", |b: &RecordBatch| Ok(b.column(0).clone())),
            "with_column(uid) replaces the ID column",
        ),
        (
            Dataset::read_parquet([tmp.path().join("nope").to_str().unwrap()]),
            "nope",
        ),
    ];
    for (dataset, expected) in cases {
        let err = dataset.write_parquet(&ctx, out).await.unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
    let mut config = CheckpointConfig::new("row_hash", ckpt.to_str().unwrap());
    config.commit_rows = 5;
    let err = Dataset::read_parquet([input_url])
        .write_parquet(&JobContext::new().checkpoint(config), out)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--include-row-hash"), "{err}");
    let err = Dataset::read_parquet([input_url])
        .write_parquet(&ctx, &format!("{input_url}/out"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("overlap"), "{err}");
    assert!(!output.exists(), "a refused job wrote output");
    assert!(
        !ckpt.exists(),
        "a refused job left the checkpoint it made (lease, job record)"
    );
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let Dirs {
        tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 2, 10);
    // A duplicated ID: a resume could skip the second copy, so it is an error.
    write_batch(
        &input.join("part-dup.parquet"),
        RecordBatch::try_from_iter([
            ("uid", Arc::new(Int64Array::from(vec![3])) as ArrayRef),
            (
                "text",
                Arc::new(StringArray::from(vec!["again"])) as ArrayRef,
            ),
        ])
        .unwrap(),
    );
    let err = Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::DuplicateId { ref id, .. } if id == "3"),
        "{err}"
    );
    std::fs::remove_file(input.join("part-dup.parquet")).unwrap();

    // A file whose schema differs from the others.
    write_batch(
        &input.join("part-zzz.parquet"),
        RecordBatch::try_from_iter([("uid", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
            .unwrap(),
    );
    let err = Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("part-zzz.parquet") && err.to_string().contains("schema"),
        "{err}"
    );
    std::fs::remove_file(input.join("part-zzz.parquet")).unwrap();

    // Not Parquet at all.
    std::fs::write(input.join("part-bad.parquet"), b"not parquet").unwrap();
    let err = Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("part-bad.parquet")
            && err.to_string().contains("not a readable Parquet"),
        "{err}"
    );
    std::fs::remove_file(input.join("part-bad.parquet")).unwrap();

    // Empty input files are fine: nothing to do.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    write_batch(
        &empty.join("e.parquet"),
        RecordBatch::try_from_iter([(
            "uid",
            Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef,
        )])
        .unwrap(),
    );
    let summary = Dataset::read_parquet([empty.to_str().unwrap()])
        .write_parquet(
            &ctx(&tmp.path().join("ckpt-empty"), 100),
            tmp.path().join("out-empty").to_str().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            summary.rows_read,
            summary.rows_written,
            summary.units_committed
        ),
        (0, 0, 0)
    );
    // After all that, the real job still runs exactly once.
    Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap();
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 20);
}

#[tokio::test]
async fn json_lines_in_and_out_with_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(
        input.join("a.jsonl"),
        "{\"uid\": 1, \"text\": \"a\"}\n{\"uid\": 2, \"text\": null}\n",
    )
    .unwrap();
    std::fs::write(input.join("b.jsonl"), "{\"uid\": 3, \"score\": 0.5}\n").unwrap();
    let output = tmp.path().join("out");
    let summary = Dataset::from_source(Source::json([input.to_str().unwrap()]).with_paths())
        .write_json(
            &ctx(&tmp.path().join("ckpt"), 100),
            output.to_str().unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(summary.rows_written, 3);
    let written: Vec<Value> = std::fs::read_dir(&output)
        .unwrap()
        .flat_map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect();
    assert_eq!(written.len(), 3);
    assert!(
        written
            .iter()
            .all(|row| row["path"].as_str().unwrap().ends_with(".jsonl"))
    );
}

#[tokio::test]
async fn running_a_finished_job_again_is_refused_instead_of_duplicating() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 1, 50);
    let job = || Dataset::read_parquet([input.to_str().unwrap()]);
    job()
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap();
    let err = job()
        .write_parquet(&ctx(&ckpt, 100), output.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already holds files"), "{err}");
    assert_eq!(output_counts(&output).len(), 50);
    // Asked for explicitly, append adds the rows again; overwrite replaces them.
    let sink = |mode| Sink::parquet(output.to_str().unwrap()).mode(mode);
    job()
        .write(&ctx(&ckpt, 100), sink(SaveMode::Append))
        .await
        .unwrap();
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 50);
    assert!(counts.values().all(|&n| n == 2), "{counts:?}");
    job()
        .write(&ctx(&ckpt, 100), sink(SaveMode::Overwrite))
        .await
        .unwrap();
    let counts = output_counts(&output);
    assert_eq!(counts.len(), 50);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
}

#[tokio::test]
async fn a_field_the_schema_sample_missed_is_an_error_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // The schema is inferred from the first 1,000 lines; line 1,500 has a
    // field none of them had.
    let mut text = String::new();
    for uid in 1..=2000 {
        if uid == 1500 {
            text.push_str(&format!(
                "{{\"uid\": {uid}, \"text\": \"x\", \"late\": 7}}\n"
            ));
        } else {
            text.push_str(&format!("{{\"uid\": {uid}, \"text\": \"x\"}}\n"));
        }
    }
    std::fs::write(input.join("a.jsonl"), text).unwrap();
    let output = tmp.path().join("out");
    let err = Dataset::from_source(Source::json([input.to_str().unwrap()]))
        .write_parquet(
            &ctx(&tmp.path().join("ckpt"), 100_000),
            output.to_str().unwrap(),
        )
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("a.jsonl")
            && message.contains("line 1500")
            && message.contains("\"late\""),
        "{message}"
    );
    assert!(
        output_counts(&output).is_empty(),
        "nothing was dropped into the output"
    );
}

#[tokio::test]
async fn batch_size_zero_through_the_library_reads_one_row_at_a_time() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 1, 10);
    let summary = Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&ctx(&ckpt, 100).batch_size(0), output.to_str().unwrap())
        .await
        .unwrap();
    assert_eq!(summary.rows_written, 10);
    assert_eq!(output_counts(&output).len(), 10);
    // The field set directly skips the builder's clamp: a clear refusal.
    let mut zero = ctx(&ckpt, 100);
    zero.batch_size = 0;
    let other = output.with_file_name("out-zero");
    let err = Dataset::read_parquet([input.to_str().unwrap()])
        .write_parquet(&zero, other.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("batch_size is 0"), "{err}");
    assert!(!other.exists());
}

#[tokio::test]
async fn a_unit_whose_rows_were_all_filtered_out_records_that_it_wrote_no_data() {
    let Dirs {
        tmp: _tmp,
        input,
        output,
        ckpt,
    } = dirs();
    write_input(&input, 2, 100);
    let mut config = CheckpointConfig::new("uid", ckpt.to_str().unwrap());
    config.commit_rows = 50;
    config.delete_checkpoint_on_success = false;
    let ctx = JobContext::new()
        .checkpoint(config.clone())
        .workers(1)
        .batch_size(50);
    // Keeps only uids >= 150: the first units have no output at all.
    let summary = Dataset::read_parquet([input.to_str().unwrap()])
        .filter("uid >= 150", |batch| {
            let uids = batch
                .column_by_name("uid")
                .unwrap()
                .as_primitive::<Int64Type>();
            Ok(uids.iter().map(|u| u.map(|u| u >= 150)).collect())
        })
        .write_parquet(&ctx, output.to_str().unwrap())
        .await
        .unwrap();
    assert_eq!(summary.rows_written, 50);
    let state = config
        .dir()
        .unwrap()
        .load(Default::default())
        .await
        .unwrap();
    assert_eq!(state.committed.len(), 4);
    assert_eq!(state.units_without_output.len(), 3, "{state:?}");
    assert_eq!(output_counts(&output).len(), 50);
}
