//! Helpers the checkpoint crate's test files share.

use cairn_checkpoint::internals::CheckpointDir;
use cairn_fs::{StorageOptions, build_checkpoint_filesystem};

/// The checkpoint directory at `root` (a URL or path), on the filesystem
/// its scheme names, with the checkpoint preset.
pub fn dir_on(root: &str) -> CheckpointDir {
    let (fs, _) = build_checkpoint_filesystem(root, &StorageOptions::new()).unwrap();
    CheckpointDir::new(fs, root, "id")
}
