//! The one error type of cairn-dataset.

/// What went wrong in a job, naming the file, column or operator and what to do.
///
/// ```
/// let e = cairn_dataset::Error::Plan { reason: "drop_columns removes the ID column uid".into() };
/// assert!(e.to_string().contains("uid"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The job cannot run as planned; nothing was read or written.
    #[error("invalid job: {reason}")]
    Plan {
        /// What is wrong and what to change.
        reason: String,
    },
    /// An input URL holds no file of the format read; nothing was read.
    #[error("invalid job: no input files at {url} (looked for {looked_for}); {hint}")]
    NoInputFiles {
        /// The input URL.
        url: String,
        /// The file patterns looked for (`*.parquet`).
        looked_for: String,
        /// What to do (another format's files found there, or the URL).
        hint: String,
    },
    /// An input file cannot be read or does not fit the job.
    #[error("input {file}: {reason}")]
    Input {
        /// The file's URL.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A transform failed.
    #[error("transform {operator}: {reason}")]
    Transform {
        /// The operator's name.
        operator: String,
        /// What happened (for a command: its exit status and stderr).
        reason: String,
    },
    /// The same ID appeared twice in the input.
    #[error(
        "duplicate ID {id} in column {column} (input {file}); IDs must identify one input row each, or a resume could skip a row that was never written. Make the IDs unique (or use --include-row-hash and id column row_hash)"
    )]
    DuplicateId {
        /// The ID, as text.
        id: String,
        /// The ID column.
        column: String,
        /// The file where the second copy was seen.
        file: String,
    },
    /// Writing output failed.
    #[error("output {file}: {reason}")]
    Output {
        /// The file's URL.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The job was asked to stop ([`crate::Interrupt`]): the rows it had
    /// taken were committed, the lease given back.
    #[error(
        "interrupted after committing {units_committed} unit(s) in this run; run the same command to resume"
    )]
    Interrupted {
        /// Units this run committed before it stopped.
        units_committed: u64,
    },
    /// Storage failed.
    #[error("{0}")]
    Storage(#[source] cairn_fs::Error),
    /// The checkpoint failed.
    #[error("{0}")]
    Checkpoint(#[source] Box<cairn_checkpoint::Error>),
}

impl From<cairn_fs::Error> for Error {
    fn from(e: cairn_fs::Error) -> Self {
        Error::Storage(e)
    }
}

impl From<cairn_checkpoint::Error> for Error {
    fn from(e: cairn_checkpoint::Error) -> Self {
        Error::Checkpoint(Box::new(e))
    }
}

/// Results of cairn-dataset.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    #[test]
    fn storage_and_checkpoint_errors_keep_the_storage_error_as_source() {
        let storage = || cairn_fs::Error::new(cairn_fs::ErrorKind::NoSuchBucket, "gone");
        let direct = super::Error::from(storage());
        let kind = |e: &(dyn std::error::Error + 'static)| {
            e.downcast_ref::<cairn_fs::Error>()
                .map(cairn_fs::Error::kind)
        };
        assert_eq!(
            direct.source().and_then(kind),
            Some(cairn_fs::ErrorKind::NoSuchBucket)
        );
        let through = super::Error::from(cairn_checkpoint::Error::from(storage()));
        let checkpoint = through.source().expect("the checkpoint error");
        assert_eq!(
            checkpoint.source().and_then(kind),
            Some(cairn_fs::ErrorKind::NoSuchBucket)
        );
    }
}
