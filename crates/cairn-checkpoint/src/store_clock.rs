//! The store's clock: times judged by the store that keeps the files, not
//! by the clocks of the hosts that wrote them (which may differ).

use cairn_fs::WriteMode;

use crate::commit::CheckpointDir;
use crate::error::Result;

/// Milliseconds since the Unix epoch of a time as OpenDAL gives it (RFC 3339).
pub(crate) fn epoch_millis(time: &str) -> Option<i64> {
    time.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// How far a store's time of a file may lag the instant it was written:
/// S3's `Last-Modified` is an HTTP date, whole seconds, cut down.
pub(crate) const STORE_CLOCK_GRAIN_MS: i64 = 1000;

impl CheckpointDir {
    /// The checkpoint store's time now, in milliseconds since the Unix
    /// epoch: the time it gives a short-lived empty object written beside
    /// the checkpoint's records (a probe file, which listings of the
    /// checkpoint skip), deleted again. None when the store gives no times.
    pub(crate) async fn store_now_millis(&self) -> Result<Option<i64>> {
        let probe = self.file(&format!(
            "{}clock-{}",
            cairn_fs::PROBE_PREFIX,
            crate::token::random_token()
        ));
        self.fs
            .pipe(&probe, bytes::Bytes::new(), WriteMode::Overwrite)
            .await?;
        let now = self.fs.info(&probe).await;
        self.fs.rm_file(&probe).await?;
        Ok(now?.last_modified.as_deref().and_then(epoch_millis))
    }
}
