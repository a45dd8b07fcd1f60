//! The data of an item node, byte for byte Curator's `ItemSerializer`:
//!
//! ```text
//! i32 BE  0x00010001                 version
//! then, per item:  0x01  i32 BE len  len bytes
//! then             0x02              end
//! ```
//!
//! Decoding never panics: a wrong version, an unknown opcode, a negative or overlong length,
//! a missing end byte or bytes after it are all [`CuratorError::BadData`].

use curator_core::{CuratorError, Result};

/// The version word every item node starts with.
pub const VERSION: i32 = 0x0001_0001;
/// Opcode of one item: followed by its length and its bytes.
pub const ITEM_OPCODE: u8 = 0x01;
/// Opcode that ends the node's data.
pub const EOF_OPCODE: u8 = 0x02;

/// The data of one item node holding `items`, in order.
pub fn encode<I, B>(items: I) -> Vec<u8>
where
    I: IntoIterator<Item = B>,
    B: AsRef<[u8]>,
{
    let mut out = VERSION.to_be_bytes().to_vec();
    for item in items {
        let item = item.as_ref();
        out.push(ITEM_OPCODE);
        // Items are at most the framework's data limit (well under 2 GiB): the length fits.
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out.push(EOF_OPCODE);
    out
}

/// The items of the node at `path` (named in the error) whose data is `data`.
pub fn decode(path: &str, data: &[u8]) -> Result<Vec<Vec<u8>>> {
    let bad = |reason: String| CuratorError::BadData { path: path.to_string(), reason };
    let mut rest = data;
    let version = take_i32(&mut rest).ok_or_else(|| bad(format!("{} bytes: no version word", data.len())))?;
    if version != VERSION {
        return Err(bad(format!("queue item version {version:#010x}, expected {VERSION:#010x}")));
    }
    let mut items = Vec::new();
    loop {
        let Some((&opcode, tail)) = rest.split_first() else {
            return Err(bad(format!("no end byte after {} items", items.len())));
        };
        rest = tail;
        match opcode {
            EOF_OPCODE if rest.is_empty() => return Ok(items),
            EOF_OPCODE => return Err(bad(format!("{} bytes after the end byte", rest.len()))),
            ITEM_OPCODE => {}
            other => return Err(bad(format!("unknown opcode {other:#04x} at item {}", items.len()))),
        }
        let len = take_i32(&mut rest).ok_or_else(|| bad(format!("item {} has no length", items.len())))?;
        let len = usize::try_from(len).map_err(|_| bad(format!("item {} has length {len}", items.len())))?;
        if len > rest.len() {
            return Err(bad(format!("item {} claims {len} bytes, {} left", items.len(), rest.len())));
        }
        let (item, tail) = rest.split_at(len);
        items.push(item.to_vec());
        rest = tail;
    }
}

/// Takes a big-endian i32 off the front of `rest`, if four bytes are there.
fn take_i32(rest: &mut &[u8]) -> Option<i32> {
    let (head, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(i32::from_be_bytes(*head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_curator_bytes() {
        let data = encode([b"ab".as_slice(), b"".as_slice()]);
        assert_eq!(data, [0, 1, 0, 1, 1, 0, 0, 0, 2, b'a', b'b', 1, 0, 0, 0, 0, 2]);
        assert_eq!(decode("/q", &data).unwrap(), vec![b"ab".to_vec(), Vec::new()]);
        assert_eq!(decode("/q", &encode(Vec::<Vec<u8>>::new())).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn malformed_data_is_bad_data() {
        let good = encode([b"hello".as_slice()]);
        let mut cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0, 1],
            vec![0, 1, 0, 2, 2],                            // wrong version
            vec![0, 1, 0, 1],                               // no end byte
            vec![0, 1, 0, 1, 7],                            // unknown opcode
            vec![0, 1, 0, 1, 1, 0, 0],                      // short length
            vec![0, 1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 2], // negative length
            vec![0, 1, 0, 1, 1, 0x7f, 0xff, 0xff, 0xff, 2], // length past the end
            vec![0, 1, 0, 1, 2, 2],                         // bytes after the end
            b"not a queue item".to_vec(),
        ];
        // Every strict prefix of a good item, and the good item with a byte flipped in its
        // framing.
        cases.extend((0..good.len()).map(|n| good[..n].to_vec()));
        for at in [0, 3, 4, 8, good.len() - 1] {
            let mut flipped = good.clone();
            flipped[at] ^= 0x40;
            cases.push(flipped);
        }
        for case in cases {
            match decode("/q/queue-0000000001", &case) {
                Err(CuratorError::BadData { path, .. }) => assert_eq!(path, "/q/queue-0000000001"),
                other => panic!("{case:?} decoded as {other:?}"),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n in 0..5000 {
            let len = n % 40;
            let mut data = Vec::with_capacity(len);
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                data.push(seed as u8);
            }
            if n % 3 == 0 && data.len() >= 4 {
                data[..4].copy_from_slice(&VERSION.to_be_bytes());
            }
            let _ = decode("/q", &data);
        }
    }
}
