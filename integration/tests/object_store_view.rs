//! cairn's `ObjectStoreView` against object_store's own behaviour suite
//! (`object_store::integration`, the tests every object_store backend
//! passes) on memory, local disk, Garage and fake-gcs-server; and parquet's
//! async reader (`ParquetObjectReader`) reading a cairn URL through it.

use std::sync::Arc;

use cairn_conformance::Target;
use cairn_fs::ObjectStoreView;
use object_store::integration::*;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// The view rooted at the target's fresh test root.
fn view(target: &Target) -> ObjectStoreView {
    ObjectStoreView::new(target.fs.clone(), &target.root).unwrap()
}

/// One `#[tokio::test]` per (backend, suite body). `$make` gives the target;
/// `$update` says whether the store honours If-Match writes.
macro_rules! suite {
    ($backend:ident, $make:expr, update: $update:expr, conditions: $conditions:meta, multipart: $multipart:meta) => {
        mod $backend {
            use super::*;

            fn target(test: &str) -> Option<Target> {
                ($make)(test)
            }

            #[tokio::test]
            async fn put_get_delete_list_() {
                let Some(t) = target("osv-put-get") else {
                    return;
                };
                put_get_delete_list(&view(&t)).await;
            }

            #[tokio::test]
            async fn list_uses_directories_correctly_() {
                let Some(t) = target("osv-list-dirs") else {
                    return;
                };
                list_uses_directories_correctly(&view(&t)).await;
            }

            #[tokio::test]
            async fn list_with_delimiter_() {
                let Some(t) = target("osv-delimiter") else {
                    return;
                };
                list_with_delimiter(&view(&t)).await;
            }

            #[tokio::test]
            async fn rename_and_copy_() {
                let Some(t) = target("osv-rename") else {
                    return;
                };
                rename_and_copy(&view(&t)).await;
            }

            #[tokio::test]
            async fn copy_if_not_exists_() {
                let Some(t) = target("osv-copy-create") else {
                    return;
                };
                copy_if_not_exists(&view(&t)).await;
            }

            #[tokio::test]
            async fn copy_rename_nonexistent_object_() {
                let Some(t) = target("osv-copy-missing") else {
                    return;
                };
                copy_rename_nonexistent_object(&view(&t)).await;
            }

            #[tokio::test]
            async fn get_nonexistent_object_() {
                let Some(t) = target("osv-missing") else {
                    return;
                };
                let err = get_nonexistent_object(&view(&t), None).await.unwrap_err();
                assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
            }

            #[tokio::test]
            #[$multipart]
            async fn stream_get_() {
                let Some(t) = target("osv-stream") else {
                    return;
                };
                stream_get(&view(&t)).await;
            }

            #[tokio::test]
            async fn put_opts_() {
                let Some(t) = target("osv-put-opts") else {
                    return;
                };
                put_opts(&view(&t), $update).await;
            }

            #[tokio::test]
            #[$conditions]
            async fn get_opts_() {
                let Some(t) = target("osv-get-opts") else {
                    return;
                };
                get_opts(&view(&t)).await;
            }

            #[tokio::test]
            async fn list_with_offset_exclusivity_() {
                let Some(t) = target("osv-offset") else {
                    return;
                };
                list_with_offset_exclusivity(&view(&t)).await;
            }
        }
    };
}

suite!(memory, Target::memory, update: false,
    conditions: ignore = "OpenDAL's memory service keeps no ETag or modification time, which get_opts's conditions need",
    multipart: cfg(all()));
suite!(file, Target::file, update: false, conditions: cfg(all()), multipart: cfg(all()));
suite!(
    garage,
    |test| Target::s3("GARAGE", cairn_fs::backend::ConditionalWrites::Emulated, test),
    update: false,
    conditions: cfg(all()),
    multipart: cfg(all())
);
suite!(gcs, Target::gcs, update: false, conditions: cfg(all()),
    multipart: ignore = "fake-gcs-server lacks the XML multipart-upload API that OpenDAL's GCS writer uses");

/// parquet's async reader reads a Parquet file of a cairn URL through the
/// view: the footer, the metadata and the column chunks all go through
/// cairn (its options, retries and hooks), and the rows come back whole.
// parquet 60 deprecates ParquetObjectReader (arrow-rs#10308) in favour of
// readers that implement AsyncFileReader themselves; it is still how
// object_store users read Parquet, so it is what this test drives.
#[allow(deprecated)]
#[tokio::test]
async fn parquet_object_reader_reads_a_cairn_url_on_garage() {
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use futures::TryStreamExt;
    use parquet::arrow::ParquetRecordBatchStreamBuilder;
    use parquet::arrow::async_reader::ParquetObjectReader;

    let Some(t) = Target::s3(
        "GARAGE",
        cairn_fs::backend::ConditionalWrites::Emulated,
        "osv-parquet",
    ) else {
        return;
    };
    let rows = 50_000i64;
    let batch = RecordBatch::try_from_iter([
        ("uid", Arc::new(Int64Array::from_iter_values(0..rows)) as _),
        (
            "text",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("row {i}")),
            )) as _,
        ),
    ])
    .unwrap();
    let mut file = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut file, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let store: Arc<dyn ObjectStore> = view(&t).into_dyn();
    store
        .put(&Path::from("tables/part-0.parquet"), file.into())
        .await
        .unwrap();

    let reader = ParquetObjectReader::new(store, Path::from("tables/part-0.parquet"));
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
    assert_eq!(builder.metadata().num_row_groups(), 5);
    let stream = builder.build().unwrap();
    let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
    let uids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(uids, (0..rows).collect::<Vec<_>>());
    // The same object, read with cairn-fs directly, is the same file.
    let direct = t.fs.cat(&t.url("tables/part-0.parquet")).await.unwrap();
    assert_eq!(&direct[..4], b"PAR1");
}
