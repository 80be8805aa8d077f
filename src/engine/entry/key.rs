//! The name of an entry in its timer's arena: an index, packed for links.

use std::num::NonZeroU32;

/// An entry's index + 1: an `Option<Key>` takes 4 bytes (a `Sleep` holds one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key(NonZeroU32);

impl Key {
    /// The key packed with `Key::pack`, or `None` for 0.
    #[inline(always)]
    pub(crate) fn unpack(link: u32) -> Option<Key> {
        NonZeroU32::new(link).map(Key)
    }

    /// The key as a nonzero `u32`, so that 0 can mean "none" in a link.
    #[inline(always)]
    pub(crate) fn pack(self) -> u32 {
        self.0.get()
    }

    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}
