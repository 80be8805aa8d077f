//! Where a reset puts a timeout's new deadline: one `AtomicU64` per key,
//! beside the arena rather than in it (see `entry/reset.rs` for why the
//! entry's own `deadline` cannot take it).
//!
//! A timer that never resets a timeout allocates nothing here. The first
//! reset allocates the directory; the first reset of a key in a block of
//! `BLOCK` keys allocates that block's 8 KiB. So resets cost 8 bytes per
//! key of the blocks they touch, and entries stay 40 bytes.

use std::sync::OnceLock;

use crate::engine::key::Key;
use crate::engine::slots::MAX_ENTRIES;
use crate::engine::sync::AtomicU64;

const BLOCK_BITS: u32 = if cfg!(loom) { 2 } else { 10 };
const BLOCK: usize = 1 << BLOCK_BITS;
/// Blocks per table, and tables in the directory: enough for every key.
const TABLE_BITS: u32 = (MAX_ENTRIES.trailing_zeros() - BLOCK_BITS).div_ceil(2);
const TABLE: usize = 1 << TABLE_BITS;

type Block = Box<[AtomicU64]>;
type Table = Box<[OnceLock<Block>]>;

#[derive(Default)]
pub(crate) struct ResetTable {
    directory: OnceLock<Box<[OnceLock<Table>]>>,
}

impl ResetTable {
    /// `key`'s cell, allocated if it is the first of its block.
    #[inline]
    pub(crate) fn cell(&self, key: Key) -> &AtomicU64 {
        let i = key.index();
        let directory = get_or_make(&self.directory, || lazy_cells(TABLE));
        let table = get_or_make(
            &directory[(i >> (BLOCK_BITS + TABLE_BITS)) & (TABLE - 1)],
            || lazy_cells(TABLE),
        );
        let block = get_or_make(&table[(i >> BLOCK_BITS) & (TABLE - 1)], || {
            (0..BLOCK).map(|_| AtomicU64::new(0)).collect()
        });
        &block[i & (BLOCK - 1)]
    }
}

/// `OnceLock::get_or_init` with the common case, already made, inlined
/// and the making kept out of line.
#[inline(always)]
fn get_or_make<T>(lock: &OnceLock<T>, make: impl FnOnce() -> T) -> &T {
    match lock.get() {
        Some(made) => made,
        None => make_cold(lock, make),
    }
}

#[cold]
#[inline(never)]
fn make_cold<T>(lock: &OnceLock<T>, make: impl FnOnce() -> T) -> &T {
    lock.get_or_init(make)
}

fn lazy_cells<T>(n: usize) -> Box<[OnceLock<T>]> {
    (0..n).map(|_| OnceLock::new()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sync::Ordering;

    #[test]
    fn every_key_has_its_own_cell() {
        let table = ResetTable::default();
        let keys = [0, 1, BLOCK as u32, MAX_ENTRIES as u32 - 1].map(Key::at);
        for (n, key) in keys.iter().enumerate() {
            table.cell(*key).store(n as u64 + 1, Ordering::Relaxed);
        }
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(table.cell(*key).load(Ordering::Relaxed), n as u64 + 1);
        }
    }
}
