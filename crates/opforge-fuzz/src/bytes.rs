//! A total byte reader (every byte string decodes: a read past the end gives
//! zeros) and the writer that is its inverse, so seeds made from test data
//! decode back to the very cases they were made from.
//!
//! Numbers are read through *tags*: one byte that either is the value (small
//! numbers), picks an interesting value (type limits, powers of two, NaN,
//! infinities), or announces raw little-endian bytes. Mutating a tag byte
//! moves between those classes, which byte-level fuzzers do well.

/// Reads values from fuzz bytes; never fails.
#[derive(Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
}

/// Interesting 64-bit integers (sizes, counts, axes and their limits).
const INTERESTING_INTS: &[i64] = &[
    i32::MAX as i64,
    i32::MIN as i64,
    i64::MAX,
    i64::MIN,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    -(1 << 31),
    255,
    256,
    65535,
    65536,
    1_000_000,
    -1_000_000,
    i64::MAX / 2 + 1,
];

/// Interesting floats.
const INTERESTING_FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    3.0,
    100.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f32::MAX as f64,
    f32::MIN_POSITIVE as f64,
    1e-45,
    -1e30,
    f64::MAX,
];

/// Interesting dims (a tag past the small ones).
const INTERESTING_DIMS: &[i64] = &[
    16,
    255,
    1 << 16,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    i64::MAX,
];

/// Int tags `0..SMALL_INT_TAGS` are the values `tag - 8`.
const SMALL_INT_TAGS: u8 = 32;
const RAW_INT_TAG: u8 = 32;
/// Dim tags `0..=8` are the dims themselves; 9 is `-1` (unknown).
const UNKNOWN_DIM_TAG: u8 = 9;
const RAW_DIM_TAG: u8 = 10;

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next `n` bytes (zero-padded past the end).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let take = n.min(self.data.len());
        let mut out = self.data[..take].to_vec();
        self.data = &self.data[take..];
        out.resize(n, 0);
        out
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A raw little-endian u64.
    pub fn raw_u64(&mut self) -> u64 {
        let b = self.bytes(8);
        u64::from_le_bytes(b.try_into().expect("8 bytes"))
    }

    /// A tagged integer: small values, interesting values or raw.
    pub fn int(&mut self) -> i64 {
        let tag = self.u8();
        if tag < SMALL_INT_TAGS {
            i64::from(tag) - 8
        } else if tag == RAW_INT_TAG {
            self.raw_u64() as i64
        } else {
            INTERESTING_INTS[usize::from(tag - RAW_INT_TAG - 1) % INTERESTING_INTS.len()]
        }
    }

    /// A tagged float: 0 = raw f64, else an interesting value.
    pub fn float(&mut self) -> f64 {
        match self.u8() {
            0 => f64::from_bits(self.raw_u64()),
            t => INTERESTING_FLOATS[usize::from(t - 1) % INTERESTING_FLOATS.len()],
        }
    }

    /// A tagged dim: `0..=8`, `-1` (only where `unknown_ok`, else 1),
    /// interesting sizes up to `i64::MAX`, or raw (any i64, negative ones
    /// included).
    pub fn dim(&mut self, unknown_ok: bool) -> i64 {
        let tag = self.u8();
        match tag {
            0..=8 => i64::from(tag),
            UNKNOWN_DIM_TAG => {
                if unknown_ok {
                    -1
                } else {
                    1
                }
            }
            RAW_DIM_TAG => self.raw_u64() as i64,
            t if t < 64 => {
                INTERESTING_DIMS[usize::from(t - RAW_DIM_TAG - 1) % INTERESTING_DIMS.len()]
            }
            t => i64::from(t % 4),
        }
    }

    /// A length in `0..=max`.
    pub fn len(&mut self, max: usize) -> usize {
        usize::from(self.u8()) % (max + 1)
    }
}

/// Writes what [`Reader`] reads back.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes written so far.
    pub out: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// One byte.
    pub fn u8(&mut self, b: u8) {
        self.out.push(b);
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// A little-endian u16.
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// An integer [`Reader::int`] reads back.
    pub fn int(&mut self, v: i64) {
        if (-8..i64::from(SMALL_INT_TAGS) - 8).contains(&v) {
            self.u8((v + 8) as u8);
        } else {
            self.u8(RAW_INT_TAG);
            self.out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A float [`Reader::float`] reads back (bit for bit).
    pub fn float(&mut self, v: f64) {
        self.u8(0);
        self.out.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    /// A dim [`Reader::dim`] reads back.
    pub fn dim(&mut self, v: i64) {
        match v {
            0..=8 => self.u8(v as u8),
            -1 => self.u8(UNKNOWN_DIM_TAG),
            _ => {
                self.u8(RAW_DIM_TAG);
                self.out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// A length [`Reader::len`] reads back (`v <= max`).
    pub fn len(&mut self, v: usize) {
        self.u8(v as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_inverts_the_reader() {
        let mut w = Writer::new();
        let ints = [0i64, -8, 23, 24, -9, i64::MIN, i64::MAX, 1 << 40];
        let dims = [0i64, 8, -1, 9, 1 << 62, -5];
        for v in ints {
            w.int(v);
        }
        for v in dims {
            w.dim(v);
        }
        w.float(-0.0);
        w.float(f64::NAN);
        w.len(7);
        let mut r = Reader::new(&w.out);
        for v in ints {
            assert_eq!(r.int(), v);
        }
        for v in dims {
            assert_eq!(r.dim(true), v);
        }
        assert_eq!(r.float().to_bits(), (-0.0f64).to_bits());
        assert!(r.float().is_nan());
        assert_eq!(r.len(8), 7);
        assert!(r.is_empty());
        assert_eq!(r.u8(), 0, "past the end reads zeros");
    }
}
