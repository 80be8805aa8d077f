//! The name of an entry in its timer's arena (see `slots.rs`): an index,
//! with the packing the arena's and the wheel's links use.

/// The name of an entry in its timer's `Slots`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key(u32);

impl Key {
    /// The key of the entry at `index` in the arena.
    #[inline(always)]
    pub(crate) fn at(index: u32) -> Key {
        Key(index)
    }

    /// The key packed with `Key::pack`, or `None` for 0.
    #[inline(always)]
    pub(crate) fn unpack(link: u32) -> Option<Key> {
        link.checked_sub(1).map(Key)
    }

    /// The key + 1, so that 0 can mean "none" in a link.
    #[inline(always)]
    pub(crate) fn pack(self) -> u32 {
        self.0 + 1
    }

    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}
