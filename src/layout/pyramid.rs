//! The shape math of multiscale pyramids: level sizes, the windows a
//! level's elements summarise, how many levels a shape takes, and each
//! level's physical scale and offset. Level `k + 1` halves every
//! downsampled dimension of level `k`, rounding up: element `i` summarises
//! elements `2i` and `2i + 1` of level `k` where they exist (an odd size
//! leaves a last window of one).

/// Most levels a pyramid may have (level 0 included): past this a level's
/// factor `2^k` no longer fits the index math.
pub const MAX_LEVELS: u32 = 32;

/// The size of a dimension one level down: halved when downsampled
/// (rounding up), else kept. An unbounded size (0) stays unbounded.
pub fn next_size(size: u64, downsample: bool) -> u64 {
    if downsample {
        size.div_ceil(2)
    } else {
        size
    }
}

/// The sizes of level `level`, from level 0's `sizes`.
pub fn level_sizes(sizes: &[u64], downsample: &[bool], level: u32) -> Vec<u64> {
    sizes
        .iter()
        .zip(downsample)
        .map(|(&s, &ds)| (0..level).fold(s, |s, _| next_size(s, ds)))
        .collect()
}

/// The elements of the level below that element `i` of a level summarises
/// along a dimension of `size` elements below: `[2i, min(2i + 2, size))`
/// when downsampled, else `[i, i + 1)`.
pub fn window(i: u64, size: u64, downsample: bool) -> std::ops::Range<u64> {
    if downsample {
        2 * i..(2 * i + 2).min(size)
    } else {
        i..i + 1
    }
}

/// Levels (level 0 included) until every downsampled bounded dimension
/// has shrunk to a single element: more than this repeats the last level.
/// Unbounded dimensions (size 0) do not count.
pub fn max_levels(sizes: &[u64], downsample: &[bool]) -> u32 {
    let halvings = sizes
        .iter()
        .zip(downsample)
        .filter(|&(&s, &ds)| ds && s > 0)
        .map(|(&s, _)| 64 - (s - 1).leading_zeros())
        .max()
        .unwrap_or(0);
    (halvings + 1).min(MAX_LEVELS)
}

/// Levels (level 0 included) until every downsampled bounded dimension
/// fits in one tile: the pyramid `levels: 0` asks for. `None` when no
/// bounded dimension is downsampled (nothing to count by).
pub fn levels_to_one_tile(sizes: &[u64], tiles: &[u64], downsample: &[bool]) -> Option<u32> {
    let bounded: Vec<(u64, u64)> = sizes
        .iter()
        .zip(tiles)
        .zip(downsample)
        .filter(|&((&s, _), &ds)| ds && s > 0)
        .map(|((&s, &t), _)| (s, t))
        .collect();
    if bounded.is_empty() {
        return None;
    }
    let mut level = 0;
    let mut sizes: Vec<u64> = bounded.iter().map(|&(s, _)| s).collect();
    while sizes.iter().zip(&bounded).any(|(&s, &(_, t))| s > t) && level + 1 < MAX_LEVELS {
        sizes.iter_mut().for_each(|s| *s = s.div_ceil(2));
        level += 1;
    }
    Some(level + 1)
}

/// The physical scale and offset of level `level` along a dimension whose
/// level-0 elements are `scale` apart starting at `translation`. A
/// downsampled dimension's elements are `2^level` times further apart;
/// with `centred`, each sits at the centre of the level-0 elements it
/// summarises (`(2^level - 1) / 2` elements in), else at the first of them.
pub fn level_transform(
    scale: f64,
    translation: f64,
    level: u32,
    downsample: bool,
    centred: bool,
) -> (f64, f64) {
    if !downsample {
        return (scale, translation);
    }
    let factor = f64::powi(2.0, level as i32);
    let shift = if centred {
        scale * (factor - 1.0) / 2.0
    } else {
        0.0
    };
    (scale * factor, translation + shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_halve_rounding_up() {
        assert_eq!(
            level_sizes(&[0, 7, 8, 3], &[true, true, true, false], 1),
            [0, 4, 4, 3]
        );
        assert_eq!(
            level_sizes(&[0, 7, 8, 3], &[true, true, true, false], 3),
            [0, 1, 1, 3]
        );
        assert_eq!(window(3, 7, true), 6..7);
        assert_eq!(window(2, 7, true), 4..6);
        assert_eq!(window(2, 7, false), 2..3);
    }

    #[test]
    fn level_counts() {
        // 7 -> 4 -> 2 -> 1: four levels reach one element.
        assert_eq!(max_levels(&[0, 7, 5], &[true, true, false]), 4);
        assert_eq!(max_levels(&[1, 1], &[true, true]), 1);
        // 300 with tiles of 64: 300 -> 150 -> 75 -> 38 fits.
        assert_eq!(
            levels_to_one_tile(&[0, 300, 20], &[4, 64, 64], &[true, true, true]),
            Some(4)
        );
        assert_eq!(levels_to_one_tile(&[0, 30], &[4, 64], &[true, false]), None);
        assert_eq!(levels_to_one_tile(&[10], &[16], &[true]), Some(1));
    }

    #[test]
    fn transforms_centre_the_window() {
        assert_eq!(level_transform(0.5, 1.0, 0, true, true), (0.5, 1.0));
        // Level 2: four elements of 0.5 summarised, centred 0.75 in.
        assert_eq!(level_transform(0.5, 1.0, 2, true, true), (2.0, 1.75));
        assert_eq!(level_transform(0.5, 1.0, 2, true, false), (2.0, 1.0));
        assert_eq!(level_transform(0.5, 1.0, 2, false, true), (0.5, 1.0));
    }
}
