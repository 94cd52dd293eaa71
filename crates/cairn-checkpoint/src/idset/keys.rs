//! [`Keys`]: the sorted keys of a set, owned, or read in place from shared
//! bytes (a set shipped through Ray's object store is used where it lies,
//! one copy per machine instead of one per filter actor).

use std::fmt;

use bytes::Bytes;

/// Fixed-width integers for which every bit pattern is a value, so bytes of
/// the right length and alignment can be read as a slice of them.
///
/// # Safety
/// Implementors must be plain integers with no padding and no invalid values.
pub(crate) unsafe trait Plain:
    Copy + Ord + fmt::Debug + Send + Sync + 'static
{
}
// SAFETY: plain integers.
unsafe impl Plain for u32 {}
// SAFETY: plain integers.
unsafe impl Plain for u64 {}

/// Sorted keys: a vector, or a little-endian array inside shared bytes.
pub(crate) enum Keys<T: Plain> {
    Owned(Vec<T>),
    Shared { bytes: Bytes, len: usize },
}

impl<T: Plain> Keys<T> {
    /// `len` keys at the start of `bytes`, in place when the bytes are
    /// aligned for `T` (and the machine is little-endian), else copied.
    pub(crate) fn from_le_bytes(bytes: Bytes, len: usize, parse: impl Fn(&[u8]) -> T) -> Self {
        let size = std::mem::size_of::<T>();
        debug_assert!(bytes.len() >= len * size);
        let aligned = (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>());
        if cfg!(target_endian = "little") && aligned {
            return Keys::Shared {
                bytes: bytes.slice(..len * size),
                len,
            };
        }
        Keys::Owned(bytes[..len * size].chunks_exact(size).map(parse).collect())
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Keys::Owned(keys) => keys,
            // SAFETY: `from_le_bytes` checked length and alignment; `T` is
            // Plain (any bit pattern is a value) and the machine is
            // little-endian, the order the bytes were written in. `bytes`
            // keeps the memory alive and is never written through.
            Keys::Shared { bytes, len } => unsafe {
                std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), *len)
            },
        }
    }

    /// Heap bytes this process holds for the keys (shared keys: none).
    pub(crate) fn owned_bytes(&self) -> usize {
        match self {
            Keys::Owned(keys) => keys.capacity() * std::mem::size_of::<T>(),
            Keys::Shared { .. } => 0,
        }
    }
}

impl<T: Plain> Default for Keys<T> {
    fn default() -> Self {
        Keys::Owned(Vec::new())
    }
}

impl<T: Plain> Clone for Keys<T> {
    fn clone(&self) -> Self {
        match self {
            Keys::Owned(keys) => Keys::Owned(keys.clone()),
            Keys::Shared { bytes, len } => Keys::Shared {
                bytes: bytes.clone(),
                len: *len,
            },
        }
    }
}

impl<T: Plain> PartialEq for Keys<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Plain> Eq for Keys<T> {}

impl<T: Plain> fmt::Debug for Keys<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Keys::Owned(_) => "owned",
            Keys::Shared { .. } => "shared",
        };
        write!(f, "Keys({} {kind})", self.as_slice().len())
    }
}

impl<T: Plain> From<Vec<T>> for Keys<T> {
    fn from(keys: Vec<T>) -> Self {
        Keys::Owned(keys)
    }
}
