//! C library routines the SDK replaces in the plugin because wasi-libc's versions work a byte at
//! a time. Rust compares strings and byte slices with `memcmp`; a map keyed by strings that share
//! a prefix (Kubernetes labels, annotations, data keys) compares the prefix on every lookup and
//! insert, and natively that runs vectorized. Linked into the plugin ahead of wasi-libc, so every
//! crate in it uses these.

/// Compares 8 bytes per step: wasm has 64-bit loads and a count-trailing-zeros instruction, so
/// the first differing byte of a word is found without a byte loop.
#[cfg(any(target_family = "wasm", test))]
#[cfg_attr(target_family = "wasm", unsafe(no_mangle))]
pub unsafe extern "C" fn memcmp(left: *const u8, right: *const u8, len: usize) -> i32 {
    let mut at = 0;
    while at + 8 <= len {
        // SAFETY: the caller guarantees `len` readable bytes at both pointers.
        let (l, r) = unsafe { (left.add(at).cast::<u64>().read_unaligned(), right.add(at).cast::<u64>().read_unaligned()) };
        if l != r {
            // Little-endian: the lowest differing bit lies in the first differing byte.
            let shift = (l ^ r).trailing_zeros() & !7;
            return i32::from((l >> shift) as u8) - i32::from((r >> shift) as u8);
        }
        at += 8;
    }
    while at < len {
        // SAFETY: as above.
        let (l, r) = unsafe { (*left.add(at), *right.add(at)) };
        if l != r {
            return i32::from(l) - i32::from(r);
        }
        at += 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    fn memcmp(left: &[u8], right: &[u8]) -> Ordering {
        assert_eq!(left.len(), right.len());
        // SAFETY: both slices hold `len` bytes.
        unsafe { super::memcmp(left.as_ptr(), right.as_ptr(), left.len()) }.cmp(&0)
    }

    /// Every length up to three words, a difference at every position, bytes on both sides of
    /// 0x80 (the comparison is unsigned) and in every byte of a word.
    #[test]
    fn orders_as_byte_slices_do() {
        for len in 0..=24 {
            let base: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            assert_eq!(memcmp(&base, &base), Ordering::Equal, "len {len}");
            for at in 0..len {
                for value in [0u8, 1, 0x7f, 0x80, 0xfe, 0xff] {
                    let mut other = base.clone();
                    other[at] = value;
                    // A later difference must not outweigh the first one.
                    if at + 1 < len {
                        other[at + 1] = base[at + 1] ^ 0xff;
                    }
                    assert_eq!(memcmp(&base, &other), base.cmp(&other), "len {len}, first difference at {at}, {} vs {value}", base[at]);
                    assert_eq!(memcmp(&other, &base), other.cmp(&base), "len {len}, first difference at {at}, {value} vs {}", base[at]);
                }
            }
        }
    }
}
