//! The image a stream writes: axes with their kinds, units and physical
//! sizes, the storage order, the pyramid's levels and the user's
//! attributes. Validated once into an [`Image`]; every error names the
//! field and the OME-NGFF (0.5) or pyramid rule it breaks.

use super::{AxisKind, Config, ConfigError, Method, Ome};
use crate::layout::pyramid::{self, MAX_LEVELS};
use crate::layout::{Dim, Layout};
use serde_json::{Map, Value};

mod omero;

/// OME-NGFF 0.5's units of length.
pub const SPACE_UNITS: &[&str] = &[
    "angstrom",
    "attometer",
    "centimeter",
    "decimeter",
    "exameter",
    "femtometer",
    "foot",
    "gigameter",
    "hectometer",
    "inch",
    "kilometer",
    "megameter",
    "meter",
    "micrometer",
    "mile",
    "millimeter",
    "nanometer",
    "parsec",
    "petameter",
    "picometer",
    "terameter",
    "yard",
    "yoctometer",
    "yottameter",
    "zeptometer",
    "zettameter",
];

/// OME-NGFF 0.5's units of time.
pub const TIME_UNITS: &[&str] = &[
    "attosecond",
    "centisecond",
    "day",
    "decisecond",
    "exasecond",
    "femtosecond",
    "gigasecond",
    "hectosecond",
    "hour",
    "kilosecond",
    "megasecond",
    "microsecond",
    "millisecond",
    "minute",
    "nanosecond",
    "petasecond",
    "picosecond",
    "second",
    "terasecond",
    "yoctosecond",
    "yottasecond",
    "zeptosecond",
    "zettasecond",
];

/// One axis, as configured (defaults filled in).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub kind: AxisKind,
    pub unit: Option<String>,
    pub scale: f64,
    pub translation: f64,
    pub downsample: bool,
}

/// What the stream writes besides level 0's data.
#[derive(Debug, Clone)]
pub struct Image {
    /// The axes in input order (the order of `dimensions`).
    pub axes: Vec<Axis>,
    /// Stored dimension `d` is input dimension `order[d]`.
    pub order: Vec<usize>,
    /// `Some` for an OME-Zarr image (with its name, if given).
    pub ome: Option<Option<String>>,
    pub method: Method,
    /// Every level's layout in storage order, level 0 first.
    pub levels: Vec<Layout>,
    /// The user's attributes.
    pub attributes: Map<String, Value>,
    /// OME-NGFF's `omero` block (channel names, colours, windows), checked.
    pub omero: Option<Map<String, Value>>,
}

impl Image {
    pub fn is_ome(&self) -> bool {
        self.ome.is_some()
    }

    /// The axes in storage order.
    pub fn stored_axes(&self) -> impl Iterator<Item = &Axis> {
        self.order.iter().map(|&a| &self.axes[a])
    }

    /// Whether each input dimension is halved from level to level.
    pub fn downsample(&self) -> Vec<bool> {
        self.axes.iter().map(|a| a.downsample).collect()
    }

    /// Level `level`'s scale and translation per stored dimension.
    pub fn transform(&self, level: u32) -> (Vec<f64>, Vec<f64>) {
        let centred = self.method != Method::Decimate;
        self.stored_axes()
            .map(|a| pyramid::level_transform(a.scale, a.translation, level, a.downsample, centred))
            .unzip()
    }
}

/// Checks the axes, the storage order, the pyramid and the attributes
/// against `layout0` (level 0 in input order); returns the image with level
/// 0's layout in storage order first.
pub fn validate(c: &Config, layout0: Layout, names: &[String]) -> Result<Image, ConfigError> {
    let axes = axes(c, names)?;
    let order = storage_order(c, names)?;
    let (ome, omero) = match (&c.ome, c.multiscale.is_some()) {
        (Some(Ome::Settings(o)), _) => (Some(o.name.clone()), o.omero.as_ref()),
        (Some(Ome::Enabled(true)), _) | (_, true) => (Some(None), None),
        (Some(Ome::Enabled(false)) | None, false) => (None, None),
    };
    if ome.is_some() || c.storage_order.is_some() {
        unique_names(names)?;
    }
    if ome.is_some() {
        check_ome_axes(&axes, &order)?;
    }
    let attributes = match &c.attributes {
        None => Map::new(),
        Some(a) => attributes(a)?,
    };
    let sizes: Vec<u64> = layout0.dims().iter().map(|d| d.size).collect();
    let omero = omero.map(|o| omero::check(o, &axes, &sizes)).transpose()?;
    let level_count = levels(c, &axes, &layout0)?;
    let downsample: Vec<bool> = axes.iter().map(|a| a.downsample).collect();
    let input = layout0.dims().to_vec();
    let tps = layout0.tiles_per_shard().to_vec();
    let mut levels = Vec::with_capacity(level_count as usize);
    for k in 0..level_count {
        let level_sizes = pyramid::level_sizes(&sizes, &downsample, k);
        // Stored dimension d: input dimension order[d], with the same tile
        // and (resolved) tiles per shard on every level.
        let dims: Vec<Dim> = order
            .iter()
            .map(|&a| Dim::new(level_sizes[a], input[a].tile, tps[a]))
            .collect();
        let layout = Layout::new(&dims, layout0.elem_size())
            .and_then(|l| l.with_source_order(&order))
            .map_err(|e| ConfigError::new("multiscale", format!("level {k}: {e}")))?;
        levels.push(layout);
    }
    Ok(Image {
        axes,
        order,
        ome,
        method: c.multiscale.map(|m| m.method).unwrap_or_default(),
        levels,
        attributes,
        omero,
    })
}

fn axes(c: &Config, names: &[String]) -> Result<Vec<Axis>, ConfigError> {
    let multiscale = c.multiscale.is_some();
    let mut out = Vec::with_capacity(names.len());
    for (i, (d, name)) in c.dimensions.iter().zip(names).enumerate() {
        let field = |f: &str| format!("dimensions[{i}].{f}");
        let kind = d.kind.unwrap_or_else(|| AxisKind::from_name(name));
        if let Some(unit) = &d.unit {
            let (listed, what): (&[&str], _) = match kind {
                AxisKind::Space => (SPACE_UNITS, "a unit of length"),
                AxisKind::Time => (TIME_UNITS, "a unit of time"),
                AxisKind::Channel | AxisKind::Other => {
                    return Err(ConfigError::new(
                        field("unit"),
                        format!(
                            "OME-NGFF gives units to space and time axes only; this axis is of kind \"{}\"",
                            kind.name()
                        ),
                    ))
                }
            };
            if !listed.contains(&unit.as_str()) {
                return Err(ConfigError::new(
                    field("unit"),
                    format!(
                        "{unit:?} is not an OME-NGFF {what} (such as {:?})",
                        listed[13 % listed.len()]
                    ),
                ));
            }
        }
        let scale = d.scale.unwrap_or(1.0);
        // A scale of 0 is taken: what an acquisition plan says of frames
        // taken back to back (an interval of 0) or of a camera whose pixel
        // size was never calibrated (Micro-Manager's 0); ome-writers writes
        // it so, and the OME-NGFF validators take it.
        if !(scale.is_finite() && scale >= 0.0) {
            return Err(ConfigError::new(
                field("scale"),
                format!("must be a finite number, 0 or more, got {scale}"),
            ));
        }
        // -0.0 passes the check above; the metadata says 0.
        let scale = scale + 0.0;
        let translation = d.translation.unwrap_or(0.0);
        if !translation.is_finite() {
            return Err(ConfigError::new(
                field("translation"),
                format!("must be a finite number, got {translation}"),
            ));
        }
        let downsample = match d.downsample {
            Some(true) if d.size == 1 => {
                return Err(ConfigError::new(
                    field("downsample"),
                    "this dimension has a single element: there is nothing to halve",
                ))
            }
            Some(true) if !multiscale => {
                return Err(ConfigError::new(
                    field("downsample"),
                    "applies to pyramid levels: give \"multiscale\" too",
                ))
            }
            Some(ds) => ds,
            None => kind == AxisKind::Space && d.size != 1,
        };
        out.push(Axis {
            name: name.clone(),
            kind,
            unit: d.unit.clone(),
            scale,
            translation,
            downsample,
        });
    }
    Ok(out)
}

/// The storage order as input dimension indices.
fn storage_order(c: &Config, names: &[String]) -> Result<Vec<usize>, ConfigError> {
    let Some(stored) = &c.storage_order else {
        return Ok((0..names.len()).collect());
    };
    let rank = names.len();
    let mut order = Vec::with_capacity(rank);
    for n in stored {
        let Some(a) = names.iter().position(|x| x == n) else {
            return Err(ConfigError::new(
                "storage_order",
                format!("names no dimension {n:?} (the dimensions are {names:?})"),
            ));
        };
        if order.contains(&a) {
            return Err(ConfigError::new(
                "storage_order",
                format!("names {n:?} twice"),
            ));
        }
        order.push(a);
    }
    if order.len() != rank {
        let missing: Vec<&String> = (0..rank)
            .filter(|a| !order.contains(a))
            .map(|a| &names[a])
            .collect();
        return Err(ConfigError::new(
            "storage_order",
            format!("must name every dimension once; {missing:?} left out"),
        ));
    }
    if order[0] != 0 {
        let what = if c.dimensions[0].size == 0 {
            "the unbounded dimension"
        } else {
            "the dimension frames arrive along"
        };
        return Err(ConfigError::new(
            "storage_order",
            format!("{:?} is {what}: it must stay first", names[0]),
        ));
    }
    if order[rank - 1] != rank - 1 {
        return Err(ConfigError::new(
            "storage_order",
            format!(
                "{:?}, the fastest dimension, must stay last: rows are stored as they arrive",
                names[rank - 1]
            ),
        ));
    }
    Ok(order)
}

fn unique_names(names: &[String]) -> Result<(), ConfigError> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(ConfigError::new(
                format!("dimensions[{i}].name"),
                format!("{n:?} is used twice: axes need distinct names"),
            ));
        }
    }
    Ok(())
}

/// OME-NGFF 0.5's axis rules, on the axes in storage order.
fn check_ome_axes(axes: &[Axis], order: &[usize]) -> Result<(), ConfigError> {
    let rank = axes.len();
    if !(2..=5).contains(&rank) {
        return Err(ConfigError::new(
            "dimensions",
            format!("an OME-NGFF image has 2 to 5 axes, this one {rank}"),
        ));
    }
    let count = |k: &[AxisKind]| axes.iter().filter(|a| k.contains(&a.kind)).count();
    if count(&[AxisKind::Time]) > 1 {
        return Err(ConfigError::new(
            "dimensions",
            "an OME-NGFF image has at most one time axis",
        ));
    }
    if count(&[AxisKind::Channel, AxisKind::Other]) > 1 {
        return Err(ConfigError::new(
            "dimensions",
            "an OME-NGFF image has at most one channel (or other) axis",
        ));
    }
    let space = count(&[AxisKind::Space]);
    if !(2..=3).contains(&space) {
        return Err(ConfigError::new(
            "dimensions",
            format!("an OME-NGFF image has 2 or 3 space axes, this one {space}"),
        ));
    }
    let rank_of = |k: AxisKind| match k {
        AxisKind::Time => 0,
        AxisKind::Channel | AxisKind::Other => 1,
        AxisKind::Space => 2,
    };
    let stored: Vec<&Axis> = order.iter().map(|&a| &axes[a]).collect();
    if stored
        .windows(2)
        .any(|w| rank_of(w[0].kind) > rank_of(w[1].kind))
    {
        let got: Vec<String> = stored
            .iter()
            .map(|a| format!("{} ({})", a.name, a.kind.name()))
            .collect();
        return Err(ConfigError::new(
            "storage_order",
            format!(
                "OME-NGFF stores time, then channel, then space axes; this order is {}",
                got.join(", ")
            ),
        ));
    }
    Ok(())
}

fn attributes(a: &Value) -> Result<Map<String, Value>, ConfigError> {
    match a {
        Value::Object(m) if m.contains_key("ome") => Err(ConfigError::new(
            "attributes",
            "must not hold the key \"ome\": the library writes the OME metadata there",
        )),
        Value::Object(m) => Ok(m.clone()),
        other => Err(ConfigError::new(
            "attributes",
            format!("must be a JSON object, got {}", kind_of(other)),
        )),
    }
}

/// Checks user attributes given after creation (see `validate`).
pub fn check_attributes(a: &Value) -> Result<Map<String, Value>, ConfigError> {
    attributes(a)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The level count the configuration asks for (1 without a pyramid).
fn levels(c: &Config, axes: &[Axis], layout0: &Layout) -> Result<u32, ConfigError> {
    let Some(m) = c.multiscale else {
        return Ok(1);
    };
    let sizes: Vec<u64> = layout0.dims().iter().map(|d| d.size).collect();
    let tiles: Vec<u64> = layout0.dims().iter().map(|d| d.tile).collect();
    let downsample: Vec<bool> = axes.iter().map(|a| a.downsample).collect();
    if !downsample.iter().any(|&d| d) {
        return Err(ConfigError::new(
            "multiscale",
            "no dimension is downsampled: set \"downsample\": true on one (space dimensions are, by default)",
        ));
    }
    if m.levels == 0 {
        return pyramid::levels_to_one_tile(&sizes, &tiles, &downsample).ok_or_else(|| {
            ConfigError::new(
                "multiscale.levels",
                "0 (as many as fit) needs a bounded downsampled dimension to count by: give the number",
            )
        });
    }
    let bounded = downsample.iter().zip(&sizes).any(|(&ds, &s)| ds && s > 0);
    let max = if bounded {
        pyramid::max_levels(&sizes, &downsample)
    } else {
        MAX_LEVELS
    };
    if m.levels > max {
        return Err(ConfigError::new(
            "multiscale.levels",
            format!(
                "{} levels go beyond the point where every downsampled dimension is one element (level {}); at most {max}",
                m.levels,
                max - 1
            ),
        ));
    }
    Ok(m.levels)
}

#[cfg(test)]
mod tests;
