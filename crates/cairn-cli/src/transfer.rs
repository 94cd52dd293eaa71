//! `cairn cp`/`mv` between two stores: the library's transfer, with a
//! progress bar of the bytes written (on a terminal) for large copies.

use std::sync::Arc;
use std::time::Duration;

use cairn_fs::{FileSystem, FindOptions, TransferProgress, TreeOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Copies (or, with `remove_source`, moves) `src` on `src_fs` to `dst` on
/// `dst_fs`, two filesystems of different protocols.
pub async fn between_stores(
    src_fs: &FileSystem,
    src: &str,
    dst_fs: &FileSystem,
    dst: &str,
    options: TreeOptions,
    remove_source: bool,
) -> cairn_fs::Result<()> {
    let bar = progress_bar(src_fs, src, options).await;
    let progress: Option<TransferProgress> = bar.clone().map(|bar| {
        let report: TransferProgress = Arc::new(move |bytes| bar.inc(bytes));
        report
    });
    let result = if remove_source {
        src_fs.mv_to(src, dst_fs, dst, options, progress).await
    } else {
        src_fs.cp_to(src, dst_fs, dst, options, progress).await
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// A bar sized by the bytes under `src` when stderr is a terminal (one
/// listing of the source); `None` otherwise, or when the size cannot be
/// known before the copy (globs).
async fn progress_bar(fs: &FileSystem, src: &str, options: TreeOptions) -> Option<ProgressBar> {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) || cairn_fs::has_magic(src) {
        return None;
    }
    let depth = if options.recursive {
        options.max_depth
    } else {
        Some(1)
    };
    let total = fs
        .du_with(src, FindOptions::new().max_depth_opt(depth))
        .await
        .ok()?
        .bytes;
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .ok()?,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}
