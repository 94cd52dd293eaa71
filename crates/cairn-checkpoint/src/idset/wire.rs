//! The byte primitives of the set's byte form: a writer and a checked
//! reader of little-endian counts and arrays (the 16-byte alignment of big
//! arrays included), shared by the int and string sets and the codec.

use bytes::Bytes;

use super::keys::{Keys, Plain};
use crate::error::{Error, Result};

/// Appends fixed-width integers and counted sequences: to a growing vector,
/// into a slice of the right length, or nowhere (to count the length).
#[derive(Default)]
pub(crate) struct Writer<'a> {
    sink: Sink<'a>,
    /// What a growing writer wrote.
    vec: Vec<u8>,
    /// Bytes written so far.
    len: usize,
}

#[derive(Default)]
enum Sink<'a> {
    #[default]
    Grow,
    Fill(&'a mut [u8]),
    Count,
}

impl<'a> Writer<'a> {
    /// A writer into a vector ([`Writer::into_bytes`]).
    pub(crate) fn grow() -> Self {
        Self::default()
    }

    /// A writer that only counts ([`Writer::len`]).
    pub(crate) fn count_only() -> Self {
        Writer {
            sink: Sink::Count,
            ..Self::default()
        }
    }

    /// A writer into `out`, which must be exactly as long as what is
    /// written (a [`Writer::count_only`] pass tells).
    pub(crate) fn fill(out: &'a mut [u8]) -> Self {
        Writer {
            sink: Sink::Fill(out),
            ..Self::default()
        }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) {
        match &mut self.sink {
            Sink::Grow => self.vec.extend_from_slice(bytes),
            Sink::Fill(out) => out[self.len..self.len + bytes.len()].copy_from_slice(bytes),
            Sink::Count => {}
        }
        self.len += bytes.len();
    }

    pub(crate) fn u8(&mut self, value: u8) {
        self.put(&[value]);
    }

    pub(crate) fn u64(&mut self, value: u64) {
        self.put(&value.to_le_bytes());
    }

    pub(crate) fn u128(&mut self, value: u128) {
        self.put(&value.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, value: u32) {
        self.put(&value.to_le_bytes());
    }

    /// `values` as little-endian words, in one copy on a little-endian
    /// machine (the big arrays of a set: gigabytes at a billion IDs).
    pub(crate) fn words<T: Plain>(&mut self, values: &[T], to_le: impl Fn(T) -> T) {
        if cfg!(target_endian = "little") {
            // SAFETY: `T` is Plain (a fixed-width integer, no padding), so
            // its slice is `size_of_val(values)` initialized bytes; u8 has
            // alignment 1.
            let bytes = unsafe {
                std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values))
            };
            self.put(bytes);
        } else {
            for &value in values {
                let le = to_le(value);
                // SAFETY: as above, for one value.
                self.put(unsafe {
                    std::slice::from_raw_parts((&le as *const T).cast::<u8>(), size_of::<T>())
                });
            }
        }
    }

    pub(crate) fn count(&mut self, len: usize) {
        self.u64(len as u64);
    }

    /// Zero bytes up to the next multiple of 16 from the start.
    pub(crate) fn pad(&mut self) {
        let padding = self.len.next_multiple_of(16) - self.len;
        self.put(&[0; 16][..padding]);
    }

    /// What a [`Writer::grow`] wrote.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.vec
    }
}

/// Reads what [`Writer`] wrote, refusing to read past the end.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    /// Bytes read so far (the offset of `bytes` in the whole).
    pos: usize,
    /// The whole, when the big arrays may be used in place.
    shared: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`, copying the big arrays out.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            shared: None,
        }
    }

    /// A reader of `whole` that uses the big arrays in place when aligned.
    pub(crate) fn shared(whole: &'a Bytes) -> Self {
        Self {
            bytes: whole,
            pos: 0,
            shared: Some(whole),
        }
    }

    /// Whether every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(corrupt("it ends early"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        self.pos += n;
        Ok(head)
    }

    /// `n` keys after the padding [`Writer::pad`] wrote: in place in the
    /// shared bytes when they allow it, else parsed with `parse`.
    pub(crate) fn keys<T: Plain>(
        &mut self,
        n: usize,
        parse: impl Fn(&[u8]) -> T,
    ) -> Result<Keys<T>> {
        let padding = self.pos.next_multiple_of(16) - self.pos;
        self.take(padding)?;
        let start = self.pos;
        let raw = self.take(n * std::mem::size_of::<T>())?;
        Ok(match self.shared {
            Some(whole) => Keys::from_le_bytes(whole.slice(start..self.pos), n, parse),
            None => Keys::Owned(
                raw.chunks_exact(std::mem::size_of::<T>())
                    .map(parse)
                    .collect(),
            ),
        })
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A count of items of `item_bytes` each, checked against what is left
    /// so a damaged count cannot make a huge allocation.
    pub(crate) fn count(&mut self, item_bytes: usize) -> Result<usize> {
        let n = self.u64()?;
        match (n as usize).checked_mul(item_bytes) {
            Some(total) if n <= usize::MAX as u64 && total <= self.bytes.len() => Ok(n as usize),
            _ => Err(corrupt("a count is larger than the bytes that follow")),
        }
    }

    pub(crate) fn raw(&mut self, n: usize) -> Result<&'a [u8]> {
        self.take(n)
    }
}

pub(crate) fn corrupt(reason: &str) -> Error {
    Error::CorruptIdSet {
        reason: reason.to_string(),
    }
}
