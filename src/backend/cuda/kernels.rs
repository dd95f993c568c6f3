//! The embedded kernels and the geometry they read, mirroring
//! kernels/layout.cuh.

use super::driver::{Kernel, Module};
use crate::error::Error;
use crate::layout::{Layout, MAX_RANK};

/// The fatbins nvcc built from kernels/*.cu, when it was found at build time.
#[cfg(tz_kernels)]
const FATBINS: Option<[&[u8]; 5]> = Some([
    include_bytes!(concat!(env!("OUT_DIR"), "/scatter.fatbin")),
    include_bytes!(concat!(env!("OUT_DIR"), "/aggregate.fatbin")),
    include_bytes!(concat!(env!("OUT_DIR"), "/blosc.fatbin")),
    include_bytes!(concat!(env!("OUT_DIR"), "/downsample.fatbin")),
    include_bytes!(concat!(env!("OUT_DIR"), "/order.fatbin")),
]);
#[cfg(not(tz_kernels))]
const FATBINS: Option<[&[u8]; 5]> = None;

/// Whether this build carries the CUDA kernels.
pub fn built_in() -> bool {
    FATBINS.is_some()
}

/// `struct tz_geometry` of kernels/layout.cuh.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Geometry {
    pub rank: u32,
    pub elem_size: u32,
    pub epoch_elems: u64,
    pub tile_elems: u64,
    pub tile_stride: u64,
    pub tiles_per_epoch: u64,
    pub extent: [u64; MAX_RANK],
    pub tile: [u64; MAX_RANK],
    pub slot_stride: [u64; MAX_RANK],
    pub within_stride: [u64; MAX_RANK],
}

impl Geometry {
    /// `tile_stride`: elements between consecutive tiles of the pool.
    pub fn new(layout: &Layout, tile_stride: u64) -> Geometry {
        let dims = layout.dims();
        let rank = dims.len();
        let mut g = Geometry {
            rank: rank as u32,
            elem_size: layout.elem_size() as u32,
            epoch_elems: layout.epoch_elems(),
            tile_elems: layout.tile_elems(),
            tile_stride,
            tiles_per_epoch: layout.tiles_per_epoch(),
            extent: [0; MAX_RANK],
            tile: [0; MAX_RANK],
            slot_stride: [0; MAX_RANK],
            within_stride: [0; MAX_RANK],
        };
        // The kernel walks the input's rows: entry `a` describes input
        // dimension `a`, which is stored dimension `d` where
        // `source_order[d] == a` (the same one without a storage order).
        let order = layout.source_order();
        let (mut slot, mut within) = (1u64, 1u64);
        for d in (0..rank).rev() {
            let a = order[d];
            g.extent[a] = if d == 0 { dims[0].tile } else { dims[d].size };
            g.tile[a] = dims[d].tile;
            // Dimension 0 has one tile per epoch: it adds nothing to the slot.
            g.slot_stride[a] = if d == 0 { 0 } else { slot };
            g.within_stride[a] = within;
            if d > 0 {
                slot *= layout.tile_count()[d];
            }
            within *= dims[d].tile;
        }
        g
    }

    /// Whether the scatter can shuffle as it writes (kernels/scatter.cu):
    /// rows, tiles' rows and the pool's tile stride in whole groups of 8
    /// elements.
    pub fn can_filter(&self) -> bool {
        let last = self.rank as usize - 1;
        self.extent[last].is_multiple_of(8)
            && self.tile[last].is_multiple_of(8)
            && (self.tile_stride * u64::from(self.elem_size)).is_multiple_of(8)
    }
}

pub struct Kernels {
    pub scatter: Kernel,
    pub permute_sizes: Kernel,
    pub exclusive_scan: Kernel,
    pub gather_chunks: Kernel,
    /// The blosc codec's filters and framing (kernels/blosc.cu).
    pub shuffle_bytes: Kernel,
    pub bitshuffle: Kernel,
    pub blosc_frame: Kernel,
    /// The pyramid's reductions (kernels/downsample.cu).
    pub downsample: Kernel,
    /// A compress call in another order than the tiles' (kernels/order.cu).
    pub order_tables: Kernel,
    pub unorder_results: Kernel,
    // Modules last: kernels must not outlive them.
    _modules: [Module; 5],
}

impl Kernels {
    pub fn load() -> Result<Kernels, Error> {
        let [scatter_bin, aggregate_bin, blosc_bin, downsample_bin, order_bin] = FATBINS.ok_or_else(|| {
            Error::BackendUnavailable("this library was built without its CUDA kernels (nvcc was not found at build time)".into())
        })?;
        let scatter_mod = Module::load(scatter_bin)?;
        let aggregate_mod = Module::load(aggregate_bin)?;
        let blosc_mod = Module::load(blosc_bin)?;
        let downsample_mod = Module::load(downsample_bin)?;
        let order_mod = Module::load(order_bin)?;
        Ok(Kernels {
            scatter: scatter_mod.kernel("tz_scatter")?,
            permute_sizes: aggregate_mod.kernel("tz_permute_sizes")?,
            exclusive_scan: aggregate_mod.kernel("tz_exclusive_scan")?,
            gather_chunks: aggregate_mod.kernel("tz_gather_chunks")?,
            shuffle_bytes: blosc_mod.kernel("tz_shuffle_bytes")?,
            bitshuffle: blosc_mod.kernel("tz_bitshuffle")?,
            blosc_frame: blosc_mod.kernel("tz_blosc_frame")?,
            downsample: downsample_mod.kernel("tz_downsample")?,
            order_tables: order_mod.kernel("tz_order_tables")?,
            unorder_results: order_mod.kernel("tz_unorder_results")?,
            _modules: [
                scatter_mod,
                aggregate_mod,
                blosc_mod,
                downsample_mod,
                order_mod,
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Dim;

    fn geometry(dims: &[(u64, u64)], elem: usize, tile_stride_bytes: u64) -> Geometry {
        let dims: Vec<Dim> = dims.iter().map(|&(s, t)| Dim::new(s, t, 1)).collect();
        let layout = Layout::new(&dims, elem).unwrap();
        Geometry::new(&layout, tile_stride_bytes / elem as u64)
    }

    #[test]
    fn the_scatter_filters_only_whole_groups_of_8_elements() {
        // cam-32: rows of 2048 elements, tiles' rows of 32.
        assert!(geometry(&[(0, 32), (2048, 32), (2048, 32)], 2, 65536).can_filter());
        // A partial tile at the end of each row is whole groups too.
        assert!(geometry(&[(0, 4), (33, 8), (40, 16)], 4, 2048).can_filter());
        // Rows of 36 elements; tiles' rows of 12; tiles 315 elements apart.
        assert!(!geometry(&[(0, 4), (20, 6), (36, 12)], 2, 576).can_filter());
        assert!(!geometry(&[(0, 4), (20, 6), (48, 12)], 2, 576).can_filter());
        assert!(!geometry(&[(0, 5), (37, 7), (50, 9)], 1, 315).can_filter());
    }
}
