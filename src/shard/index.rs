//! The `sharding_indexed` index: one `(offset, nbytes)` pair of u64 LE per
//! chunk, then the crc32c of those bytes as u32 LE.

/// Offset and size of a chunk that is not stored (filled on read).
pub const EMPTY: u64 = u64::MAX;

/// The index of one shard under construction.
#[derive(Debug, Clone)]
pub struct ShardIndex {
    pairs: Vec<[u64; 2]>,
}

impl ShardIndex {
    /// An index of `chunks` empty entries (an error when memory is short).
    pub fn new(chunks: usize) -> crate::Result<ShardIndex> {
        Ok(ShardIndex {
            pairs: crate::memory::try_filled(chunks, [EMPTY; 2], "a shard index")?,
        })
    }

    pub fn set(&mut self, chunk: usize, offset: u64, nbytes: u64) {
        self.pairs[chunk] = [offset, nbytes];
    }

    /// Marks every chunk empty again.
    pub fn clear(&mut self) {
        self.pairs.fill([EMPTY; 2]);
    }

    /// Bytes [`ShardIndex::serialize`] writes: 16 per chunk and the crc32c.
    pub fn serialized_len(&self) -> usize {
        self.pairs.len() * 16 + 4
    }

    /// Serializes into `out`, which holds exactly
    /// [`ShardIndex::serialized_len`] bytes; every stored offset is moved
    /// by `shift` (the index's own size when it precedes the data).
    pub fn serialize(&self, shift: u64, out: &mut [u8]) {
        assert_eq!(out.len(), self.serialized_len(), "a shard index's room");
        let (pairs, crc_at) = out.split_at_mut(self.pairs.len() * 16);
        for (&[offset, nbytes], entry) in self.pairs.iter().zip(pairs.chunks_exact_mut(16)) {
            let offset = if offset == EMPTY {
                EMPTY
            } else {
                offset + shift
            };
            entry[..8].copy_from_slice(&offset.to_le_bytes());
            entry[8..].copy_from_slice(&nbytes.to_le_bytes());
        }
        let crc = crc32c::crc32c(pairs);
        crc_at.copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_index_has_pairs_then_crc() {
        let mut ix = ShardIndex::new(3).unwrap();
        ix.set(1, 10, 5);
        let mut out = vec![0xAA; ix.serialized_len()];
        ix.serialize(100, &mut out);
        assert_eq!(out.len(), 3 * 16 + 4);
        assert_eq!(&out[0..8], &EMPTY.to_le_bytes());
        assert_eq!(&out[16..24], &110u64.to_le_bytes());
        assert_eq!(&out[24..32], &5u64.to_le_bytes());
        let crc = crc32c::crc32c(&out[..48]);
        assert_eq!(&out[48..], &crc.to_le_bytes());
    }
}
