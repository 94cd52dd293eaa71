//! Multipart uploads of the view, through a cairn [`FileWriter`].

use bytes::Bytes;
use object_store::path::Path;
use object_store::{MultipartUpload, PutPayload, PutResult, UploadPart};
use tokio::sync::{mpsc, oneshot};

use super::STORE;
use super::convert::to_store_error;
use crate::filesystem::FileWriter;

/// A multipart upload through a [`FileWriter`]: parts are handed, in the
/// order `put_part` was called, to a task that writes them one after the
/// other; each part's future resolves once its bytes are accepted.
pub(super) struct Upload {
    parts: Option<mpsc::UnboundedSender<(Bytes, oneshot::Sender<object_store::Result<()>>)>>,
    task: Option<tokio::task::JoinHandle<object_store::Result<FileWriter>>>,
    location: Path,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Upload {
    pub(super) fn start(mut writer: FileWriter, location: Path) -> Self {
        let (parts, mut incoming) =
            mpsc::unbounded_channel::<(Bytes, oneshot::Sender<object_store::Result<()>>)>();
        let path = location.clone();
        let task = tokio::spawn(async move {
            while let Some((data, done)) = incoming.recv().await {
                let result = writer.write(data).await;
                let failed = result.is_err();
                let _ = done.send(result.map_err(|e| to_store_error(e, &path)));
                if failed {
                    writer.abort().await.ok();
                    return Err(object_store::Error::Generic {
                        store: STORE,
                        source: "a part of the upload failed; the upload was aborted".into(),
                    });
                }
            }
            Ok(writer)
        });
        Self {
            parts: Some(parts),
            task: Some(task),
            location,
        }
    }

    async fn finish(&mut self) -> object_store::Result<FileWriter> {
        self.parts.take();
        let task = self
            .task
            .take()
            .ok_or_else(|| object_store::Error::Generic {
                store: STORE,
                source: "the upload was already completed or aborted".into(),
            })?;
        task.await.map_err(|e| object_store::Error::Generic {
            store: STORE,
            source: Box::new(e),
        })?
    }
}

#[async_trait::async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let (done, acked) = oneshot::channel();
        let sent = self
            .parts
            .as_ref()
            .map(|parts| parts.send((Bytes::from(data), done)).is_ok());
        Box::pin(async move {
            if sent != Some(true) {
                return Err(object_store::Error::Generic {
                    store: STORE,
                    source: "the upload is finished; no part can be added".into(),
                });
            }
            acked.await.unwrap_or_else(|_| {
                Err(object_store::Error::Generic {
                    store: STORE,
                    source: "the upload stopped before this part was written".into(),
                })
            })
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let writer = self.finish().await?;
        let meta = writer
            .close_with_metadata()
            .await
            .map_err(|e| to_store_error(e, &self.location))?;
        Ok(PutResult {
            e_tag: meta.as_ref().and_then(|m| m.etag()).map(str::to_string),
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        let writer = self.finish().await?;
        writer
            .abort()
            .await
            .map_err(|e| to_store_error(e, &self.location))
    }
}
