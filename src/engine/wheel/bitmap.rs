//! Which buckets hold entries, so the worker jumps to the next tick with work. Two levels: a bit
//! per bucket, and a summary bit per 64-bucket word (for 512 buckets, 8 words and 1 summary word).

const BITS: usize = u64::BITS as usize;

pub(crate) struct Bitmap {
    words: Vec<u64>,
    summary: Vec<u64>,
}

impl Bitmap {
    pub(crate) fn new(len: usize) -> Bitmap {
        let words = len.div_ceil(BITS);
        // `vec![0; n]` maps zeroed pages lazily: unused, they cost no memory.
        Bitmap {
            words: vec![0; words],
            summary: vec![0; words.div_ceil(BITS)],
        }
    }

    pub(crate) fn set(&mut self, i: usize) {
        let w = i / BITS;
        self.words[w] |= 1 << (i % BITS);
        self.summary[w / BITS] |= 1 << (w % BITS);
    }

    pub(crate) fn clear(&mut self, i: usize) {
        let w = i / BITS;
        self.words[w] &= !(1 << (i % BITS));
        if self.words[w] == 0 {
            self.summary[w / BITS] &= !(1 << (w % BITS));
        }
    }

    /// The first set index at or after `from`, without wrapping.
    pub(crate) fn next_set(&self, from: usize) -> Option<usize> {
        let w = from / BITS;
        let here = *self.words.get(w)? & (u64::MAX << (from % BITS));
        if here != 0 {
            return Some(w * BITS + here.trailing_zeros() as usize);
        }
        let w = next_set_bit(&self.summary, w + 1)?;
        Some(w * BITS + self.words[w].trailing_zeros() as usize)
    }
}

fn next_set_bit(words: &[u64], from: usize) -> Option<usize> {
    let mut w = from / BITS;
    let mut bits = *words.get(w)? & (u64::MAX << (from % BITS));
    loop {
        if bits != 0 {
            return Some(w * BITS + bits.trailing_zeros() as usize);
        }
        w += 1;
        bits = *words.get(w)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a `Vec<bool>`, at sizes that cross word and summary boundaries.
    #[test]
    fn next_set_matches_a_linear_scan() {
        let lens: &[usize] = if cfg!(miri) {
            &[1, 65, 512]
        } else {
            &[1, 63, 64, 65, 512, 4096 + 70]
        };
        for &len in lens {
            let mut bitmap = Bitmap::new(len);
            let mut plain = vec![false; len];
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let steps = if cfg!(miri) { 20 } else { 400 };
            for step in 0..steps {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng % len as u64) as usize;
                if step % 3 == 0 {
                    bitmap.clear(i);
                    plain[i] = false;
                } else {
                    bitmap.set(i);
                    plain[i] = true;
                }
                let stride = if len > 600 { 37 } else { 1 };
                for from in (0..=len).step_by(stride) {
                    let expected = (from..len).find(|&j| plain[j]);
                    assert_eq!(bitmap.next_set(from), expected, "len {len} from {from}");
                }
            }
        }
    }
}
