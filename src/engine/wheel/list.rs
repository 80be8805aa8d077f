//! Doubly-linked lists through the entries' own links, by key. A bucket
//! keeps its list packed in one `Option<NonZeroU64>` (low half head + 1,
//! high half tail + 1), so a large wheel is allocated as lazily-zeroed pages.

use std::num::NonZeroU64;

use crate::engine::entry::arena::Slots;
use crate::engine::entry::key::Key;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct List {
    pub(crate) head: Option<Key>,
    pub(crate) tail: Option<Key>,
}

impl List {
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    pub(crate) fn unpack(packed: Option<NonZeroU64>) -> List {
        let raw = packed.map_or(0, NonZeroU64::get);
        List {
            head: Key::unpack(raw as u32),
            tail: Key::unpack((raw >> 32) as u32),
        }
    }

    pub(crate) fn pack(self) -> Option<NonZeroU64> {
        let link = |key: Option<Key>| u64::from(key.map_or(0, Key::pack));
        NonZeroU64::new(link(self.head) | (link(self.tail) << 32))
    }

    pub(crate) fn push_back(&mut self, slots: &Slots, key: Key) {
        let entry = slots.get(key);
        entry.set_prev_link(self.tail);
        entry.set_next_link(None);
        match self.tail {
            None => self.head = Some(key),
            Some(tail) => slots.get(tail).set_next_link(Some(key)),
        }
        self.tail = Some(key);
    }

    /// Removes `key`, a member, in O(1).
    pub(crate) fn unlink(&mut self, slots: &Slots, key: Key) {
        let entry = slots.get(key);
        let (prev, next) = (entry.prev_link(), entry.next_link());
        entry.set_prev_link(None);
        entry.set_next_link(None);
        match prev {
            None => self.head = next,
            Some(prev) => slots.get(prev).set_next_link(next),
        }
        match next {
            None => self.tail = prev,
            Some(next) => slots.get(next).set_prev_link(prev),
        }
    }

    pub(crate) fn iter<'s>(&self, slots: &'s Slots) -> impl Iterator<Item = Key> + 's {
        std::iter::successors(self.head, move |&key| slots.get(key).next_link())
    }

    pub(crate) fn pop_front(&mut self, slots: &Slots) -> Option<Key> {
        let head = self.head?;
        self.unlink(slots, head);
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::entry::task::Task;

    #[test]
    fn push_and_unlink_keep_order() {
        let slots = Slots::new();
        let keys: Vec<Key> = (0..6)
            .map(|_| slots.insert(0, Task::Wake(None), 1).unwrap())
            .collect();
        let mut a = List::default();
        keys[..4].iter().for_each(|&k| a.push_back(&slots, k));
        a.unlink(&slots, keys[0]);
        a.unlink(&slots, keys[2]);
        assert!(a.iter(&slots).eq([keys[1], keys[3]]));
        keys[4..].iter().for_each(|&k| a.push_back(&slots, k));
        assert!(a.iter(&slots).eq([keys[1], keys[3], keys[4], keys[5]]));
        a.unlink(&slots, keys[5]);
        assert_eq!(a.pop_front(&slots), Some(keys[1]));
        assert!(a.iter(&slots).eq([keys[3], keys[4]]));
        assert_eq!(List::unpack(a.pack()), a);
        a.unlink(&slots, keys[3]);
        a.unlink(&slots, keys[4]);
        assert!(a.is_empty());
        assert_eq!(a.pack(), None);
        assert_eq!(a.pop_front(&slots), None);
    }
}
