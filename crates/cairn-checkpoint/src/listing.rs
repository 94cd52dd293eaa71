//! Listings of an output directory that may not exist yet (a first run, or
//! one killed before its first data file): a missing directory lists
//! nothing, whether the store says so when the listing starts or as its
//! first item.

use cairn_fs::{ErrorKind, FileInfo};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, future};

use crate::error::Result;

/// A listing as cairn-fs opens it (`find_stream`, `ls_stream`).
type Listing = BoxStream<'static, cairn_fs::Result<FileInfo>>;

/// `listing`, with a missing directory listing nothing: a `NotFound` when
/// it starts gives an empty listing, one among its items ends it. Other
/// errors stay errors.
pub(crate) fn missing_as_empty(listing: cairn_fs::Result<Listing>) -> Result<Listing> {
    match listing {
        Ok(listing) => Ok(listing
            .take_while(|item| {
                let missing = matches!(item, Err(e) if e.kind() == ErrorKind::NotFound);
                future::ready(!missing)
            })
            .boxed()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(stream::empty().boxed()),
        Err(e) => Err(e.into()),
    }
}
