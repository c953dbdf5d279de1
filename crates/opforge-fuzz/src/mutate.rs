//! Deterministic mutations for the stable smoke run (no coverage guidance):
//! bit flips, byte sets, interesting integers, truncations, insertions,
//! duplications and splices with another seed, from a seeded xorshift
//! generator, so a CI failure reproduces exactly.

/// A xorshift64* generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Bytes fuzzers like to write: integer limits in 1, 2, 4 and 8 bytes.
const INTERESTING: &[&[u8]] = &[
    &[0],
    &[0xff],
    &[0x7f],
    &[0x80],
    &[0xff, 0xff],
    &[0x00, 0x80],
    &[0xff, 0xff, 0xff, 0x7f],
    &[0x00, 0x00, 0x00, 0x80],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
    &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    b"-1",
    b"0",
    b"9223372036854775807",
    b"4294967296",
    b"NaN",
    b"1e400",
    b"[",
    b"{",
    b"\"",
    b"\\",
];

/// `input` with 1 to 4 random mutations; `other` is a second seed to
/// splice from.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        let len = v.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next_u64() as u8;
            }
            2 => {
                let word = INTERESTING[rng.below(INTERESTING.len())];
                let at = rng.below(len + 1);
                if rng.below(2) == 0 {
                    let end = (at + word.len()).min(len);
                    v.splice(at..end, word.iter().copied());
                } else {
                    v.splice(at..at, word.iter().copied());
                }
            }
            3 if len > 0 => v.truncate(rng.below(len)),
            4 if len > 0 => {
                let at = rng.below(len);
                let n = rng.below((len - at).min(16)) + 1;
                v.drain(at..at + n);
            }
            5 if len > 0 => {
                // Duplicate a chunk in place (repeats list elements and nodes).
                let at = rng.below(len);
                let n = rng.below((len - at).min(64)) + 1;
                let chunk: Vec<u8> = v[at..at + n].to_vec();
                v.splice(at..at, chunk);
            }
            6 if !other.is_empty() => {
                // Splice: our prefix, the other seed's suffix.
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let at = rng.below(len + 1);
                let b = rng.next_u64() as u8;
                v.insert(at, b);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_change_the_input() {
        let seed = b"name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }";
        let run = |s| {
            let mut rng = Rng::new(s);
            (0..100)
                .map(|_| mutate(&mut rng, seed, b"other"))
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        assert!(a.iter().filter(|m| m.as_slice() != seed).count() > 90);
    }
}
