//! Doubly-linked lists threaded through the wheel's slab by index.
//!
//! Links are slab keys + 1, so 0 means "none" and an empty list is all
//! zeroes. A bucket stores its list packed into one `Option<NonZeroU64>`
//! (head in the low half, tail in the high half), which lets a large wheel
//! be allocated as lazily-zeroed pages.

use std::num::NonZeroU64;

/// A slab key + 1; 0 is "none".
pub(crate) type Link = u32;

pub(crate) const NONE: Link = 0;

pub(crate) fn link(key: usize) -> Link {
    key as Link + 1
}

pub(crate) fn key(link: Link) -> usize {
    link as usize - 1
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct List {
    pub(crate) head: Link,
    pub(crate) tail: Link,
}

impl List {
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NONE
    }

    pub(crate) fn unpack(packed: Option<NonZeroU64>) -> List {
        let raw = packed.map_or(0, NonZeroU64::get);
        List {
            head: raw as u32,
            tail: (raw >> 32) as u32,
        }
    }

    pub(crate) fn pack(self) -> Option<NonZeroU64> {
        NonZeroU64::new(u64::from(self.head) | (u64::from(self.tail) << 32))
    }
}

/// The links every list member carries.
pub(crate) trait Linked {
    fn links(&mut self) -> (&mut Link, &mut Link);
}

/// Appends `key` at the tail, keeping submission order.
pub(crate) fn push_back<N: Linked>(nodes: &mut slab::Slab<N>, list: &mut List, key: usize) {
    let new = link(key);
    let (prev, next) = nodes[key].links();
    *prev = list.tail;
    *next = NONE;
    if list.tail == NONE {
        list.head = new;
    } else {
        *nodes[self::key(list.tail)].links().1 = new;
    }
    list.tail = new;
}

/// Removes `key` from `list` in O(1).
pub(crate) fn unlink<N: Linked>(nodes: &mut slab::Slab<N>, list: &mut List, key: usize) {
    let (prev, next) = {
        let (prev, next) = nodes[key].links();
        (std::mem::take(prev), std::mem::take(next))
    };
    if prev == NONE {
        list.head = next;
    } else {
        *nodes[self::key(prev)].links().1 = next;
    }
    if next == NONE {
        list.tail = prev;
    } else {
        *nodes[self::key(next)].links().0 = prev;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct N(Link, Link);
    impl Linked for N {
        fn links(&mut self) -> (&mut Link, &mut Link) {
            (&mut self.0, &mut self.1)
        }
    }

    fn collect(nodes: &mut slab::Slab<N>, list: List) -> Vec<usize> {
        let mut out = vec![];
        let mut at = list.head;
        while at != NONE {
            out.push(key(at));
            at = nodes[key(at)].1;
        }
        out
    }

    #[test]
    fn push_and_unlink_keep_order() {
        let mut nodes = slab::Slab::new();
        let keys: Vec<usize> = (0..6).map(|_| nodes.insert(N(NONE, NONE))).collect();
        let mut a = List::default();
        for &k in &keys[..4] {
            push_back(&mut nodes, &mut a, k);
        }
        unlink(&mut nodes, &mut a, keys[0]);
        unlink(&mut nodes, &mut a, keys[2]);
        assert_eq!(collect(&mut nodes, a), vec![keys[1], keys[3]]);
        push_back(&mut nodes, &mut a, keys[4]);
        push_back(&mut nodes, &mut a, keys[5]);
        assert_eq!(
            collect(&mut nodes, a),
            vec![keys[1], keys[3], keys[4], keys[5]]
        );
        unlink(&mut nodes, &mut a, keys[5]);
        unlink(&mut nodes, &mut a, keys[1]);
        assert_eq!(collect(&mut nodes, a), vec![keys[3], keys[4]]);
        assert_eq!(List::unpack(a.pack()), a);
        unlink(&mut nodes, &mut a, keys[3]);
        unlink(&mut nodes, &mut a, keys[4]);
        assert!(a.is_empty());
        assert_eq!(a.pack(), None);
    }
}
