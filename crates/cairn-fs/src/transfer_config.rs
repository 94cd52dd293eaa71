//! [`TransferConfig`]: how large files move, set by two storage options any
//! protocol accepts: `part_size` (cairn's: bytes per part of a multipart
//! upload or of a ranged read) and `max_concurrency` (s3fs's name: parts in
//! flight per file).

use crate::error::Result;
use crate::options::{BackendOptions, ConfigLine, Setting, Source, config_error, value_as_f64};

/// Part size when none is set: 8 MiB.
pub const DEFAULT_PART_SIZE: usize = 8 << 20;
/// Parts in flight per file when none is set.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// The smallest part S3 accepts in a multipart upload (all but the last).
const MIN_PART_SIZE: usize = 5 << 20;
/// The largest part S3 accepts.
const MAX_PART_SIZE: usize = 5 << 30;

/// Part size and parts in flight of large reads (whose size is known) and
/// of streaming writes.
///
/// ```
/// let options = serde_json::json!({"memory": {"part_size": 16777216, "max_concurrency": 8}});
/// let options = cairn_fs::StorageOptions::from_json(options).unwrap();
/// let (fs, _) = cairn_fs::FileSystem::from_url("memory:///x", &options).unwrap();
/// assert_eq!((fs.transfer().part_size.value, fs.transfer().concurrency.value), (16 << 20, 8));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TransferConfig {
    /// `part_size`: bytes per part (5 MiB to 5 GiB).
    pub part_size: Setting<usize>,
    /// `max_concurrency`: parts in flight per file (1 to 64).
    pub concurrency: Setting<usize>,
}

impl Default for TransferConfig {
    fn default() -> Self {
        Self {
            part_size: Setting::new(DEFAULT_PART_SIZE, Source::Default),
            concurrency: Setting::new(DEFAULT_CONCURRENCY, Source::Default),
        }
    }
}

impl TransferConfig {
    /// Takes the transfer options out of a backend's options.
    pub(crate) fn take_from(options: &mut BackendOptions) -> Result<Self> {
        let mut config = Self::default();
        let part_sizes = MIN_PART_SIZE as f64..=MAX_PART_SIZE as f64;
        if let Some(setting) = take_number(
            options,
            "part_size",
            |n| part_sizes.contains(&n),
            " bytes; give 5 MiB (5242880) to 5 GiB, the part sizes S3 multipart uploads accept",
        )? {
            config.part_size = setting;
        }
        if let Some(setting) = take_number(
            options,
            "max_concurrency",
            |n| (1.0..=64.0).contains(&n) && n.fract() == 0.0,
            "; give a whole number of parts in flight per file, 1 to 64",
        )? {
            config.concurrency = setting;
        }
        Ok(config)
    }

    /// Report lines for `cairn config`.
    pub(crate) fn describe(&self) -> Vec<ConfigLine> {
        vec![
            ConfigLine {
                name: "part_size".into(),
                value: self.part_size.value.to_string(),
                source: self.part_size.source.clone(),
                note: None,
                unset: false,
            },
            ConfigLine {
                name: "max_concurrency".into(),
                value: self.concurrency.value.to_string(),
                source: self.concurrency.source.clone(),
                note: None,
                unset: false,
            },
        ]
    }
}

/// Takes the number option `key` out of `options`; a value `valid` refuses
/// is an error naming the option, the value and, in `fix`, what to give.
fn take_number(
    options: &mut BackendOptions,
    key: &str,
    valid: impl Fn(f64) -> bool,
    fix: &str,
) -> Result<Option<Setting<usize>>> {
    let Some((value, source)) = options.take(key) else {
        return Ok(None);
    };
    let at = options.at(key, &source);
    let n = value_as_f64(&value, &at.label())?;
    if !valid(n) {
        return Err(config_error(format!("option {} is {n}{fix}", at.label())));
    }
    Ok(Some(at.setting(n as usize)))
}

#[cfg(test)]
mod tests {
    use crate::{ErrorKind, FileSystem, StorageOptions};

    fn build(json: &str) -> crate::Result<FileSystem> {
        let options = StorageOptions::from_json(serde_json::from_str(json).unwrap()).unwrap();
        FileSystem::from_url("memory:///x", &options).map(|f| f.0)
    }

    #[test]
    fn options_set_the_transfer_and_bad_values_name_the_option() {
        let fs = build(r#"{"memory": {}}"#).unwrap();
        assert_eq!(fs.transfer().part_size.value, 8 << 20);
        assert_eq!(fs.transfer().concurrency.value, 4);
        let fs = build(r#"{"memory": {"max_concurrency": "2"}}"#).unwrap();
        assert_eq!(fs.transfer().concurrency.value, 2);
        for (json, names) in [
            (r#"{"memory": {"part_size": 1024}}"#, "memory.part_size"),
            (
                r#"{"memory": {"max_concurrency": 0}}"#,
                "memory.max_concurrency",
            ),
            (
                r#"{"memory": {"max_concurrency": 2.5}}"#,
                "memory.max_concurrency",
            ),
        ] {
            let err = build(json).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config);
            assert!(err.to_string().contains(names), "{err}");
        }
    }
}
