//! The one error type of cairn-checkpoint.

use arrow_schema::DataType;

/// What went wrong in a checkpoint operation, with what to do about it.
///
/// ```
/// let e = cairn_checkpoint::Error::UnsupportedIdType { data_type: arrow_schema::DataType::Float64 };
/// assert!(e.to_string().contains("Float64"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The ID column has a type that cannot identify rows.
    #[error(
        "ID column type {data_type} is not supported; use an integer (Int8..Int64, UInt8..UInt64) or a string/binary column"
    )]
    UnsupportedIdType {
        /// The offending type.
        data_type: DataType,
    },
    /// Two parts of one ID set disagree on the kind of ID.
    #[error(
        "ID column type changed from {expected} to {found}; every committed file and every batch of a job must use the same ID type"
    )]
    IdTypeMismatch {
        /// The kind seen first (`integer` or `string`).
        expected: &'static str,
        /// The kind seen now.
        found: &'static str,
    },
}

/// The result type of cairn-checkpoint.
pub type Result<T, E = Error> = std::result::Result<T, E>;
