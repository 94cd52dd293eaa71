//! [`Plan`]: what the executor runs, plain data (a source and operators),
//! so the executor needs nothing of the [`crate::Dataset`] builder.

use crate::ops::Op;
use crate::source::Source;

/// A job's source and its operators, in order.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub source: Source,
    pub ops: Vec<Op>,
}
