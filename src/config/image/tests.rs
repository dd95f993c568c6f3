use crate::config::{Config, ConfigError, Validated};

fn parse(extra_dims: &str, extra: &str) -> Result<Validated, ConfigError> {
    let json = format!(
        r#"{{"dtype": "uint16", "dimensions": [{extra_dims}]{}{extra}}}"#,
        if extra.is_empty() { "" } else { ", " }
    );
    Config::from_json(&json)?.validate()
}

const TZYX: &str = r#"{"name": "t", "size": 0, "tile": 2},
    {"name": "z", "size": 9, "tile": 4}, {"name": "y", "size": 64, "tile": 16},
    {"name": "x", "size": 64, "tile": 16}"#;

fn err(dims: &str, extra: &str) -> ConfigError {
    parse(dims, extra).unwrap_err()
}

#[test]
fn defaults_give_one_plain_level() {
    let v = parse(TZYX, "").unwrap();
    assert!(!v.image.is_ome());
    assert_eq!(v.image.levels.len(), 1);
    assert_eq!(v.image.order, [0, 1, 2, 3]);
    let kinds: Vec<&str> = v.image.axes.iter().map(|a| a.kind.name()).collect();
    assert_eq!(kinds, ["time", "space", "space", "space"]);
    assert_eq!(v.image.downsample(), [false, true, true, true]);
}

#[test]
fn pyramid_levels_and_storage_order() {
    let v = parse(TZYX, r#""multiscale": {"levels": 3}"#).unwrap();
    assert!(v.image.is_ome());
    let sizes: Vec<Vec<u64>> = v
        .image
        .levels
        .iter()
        .map(|l| l.dims().iter().map(|d| d.size).collect())
        .collect();
    assert_eq!(
        sizes,
        [vec![0, 9, 64, 64], vec![0, 5, 32, 32], vec![0, 3, 16, 16]]
    );
    // Until every downsampled dimension fits in a tile: 64 -> 32 -> 16.
    let v = parse(TZYX, r#""multiscale": {"levels": 0}"#).unwrap();
    assert_eq!(v.image.levels.len(), 3);
    let dims = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "z", "size": 5, "tile": 2},
        {"name": "c", "size": 3, "tile": 1}, {"name": "y", "size": 8, "tile": 4},
        {"name": "x", "size": 8, "tile": 4}"#;
    let v = parse(
        dims,
        r#""storage_order": ["t", "c", "z", "y", "x"], "ome": true"#,
    )
    .unwrap();
    assert_eq!(v.image.order, [0, 2, 1, 3, 4]);
    assert_eq!(v.names, ["t", "c", "z", "y", "x"]);
    assert_eq!(v.layout.dims()[1].size, 3);
}

#[test]
fn bad_input_names_the_field_and_the_rule() {
    let one_space = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "x", "size": 64, "tile": 16}"#;
    let six = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "a", "size": 2, "tile": 1},
        {"name": "c", "size": 2, "tile": 1}, {"name": "z", "size": 2, "tile": 1},
        {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let two_times = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "u", "size": 2, "tile": 1, "kind": "time"},
        {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let two_channels = r#"{"name": "c", "size": 2, "tile": 1}, {"name": "d", "size": 2, "tile": 1, "kind": "channel"},
        {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let four_space = r#"{"name": "w", "size": 2, "tile": 1, "kind": "space"},
        {"name": "z", "size": 2, "tile": 1}, {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let zcyx = r#"{"name": "z", "size": 4, "tile": 1}, {"name": "c", "size": 2, "tile": 1},
        {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let tzcyx = r#"{"name": "t", "size": 0, "tile": 1}, {"name": "z", "size": 4, "tile": 1},
        {"name": "c", "size": 2, "tile": 1}, {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let single = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "z", "size": 1, "tile": 1, "downsample": true},
        {"name": "y", "size": 8, "tile": 4}, {"name": "x", "size": 8, "tile": 4}"#;
    let ones = r#"{"name": "t", "size": 0, "tile": 2}, {"name": "y", "size": 1, "tile": 1},
        {"name": "x", "size": 1, "tile": 1}"#;
    let unit = |u: &str, kind: &str| {
        format!(
            r#"{{"name": "t", "size": 0, "tile": 2, "unit": "{u}", "kind": "{kind}"}},
            {{"name": "y", "size": 8, "tile": 4}}, {{"name": "x", "size": 8, "tile": 4}}"#
        )
    };
    // A scale of `s` on axis `axis` (0: t, 1: y) of a t y x stream.
    let scale = |axis: usize, s: &str| {
        let mut dims = [
            r#"{"name": "t", "size": 0, "tile": 2"#.to_string(),
            r#"{"name": "y", "size": 8, "tile": 4"#.to_string(),
            r#"{"name": "x", "size": 8, "tile": 4"#.to_string(),
        ];
        dims[axis] += &format!(r#", "scale": {s}"#);
        dims.map(|d| d + "}").join(", ")
    };
    let cases: Vec<(String, &str, &str, &str)> = vec![
        // OME axis rules.
        (
            one_space.into(),
            r#""ome": true"#,
            "dimensions",
            "2 or 3 space axes",
        ),
        (six.into(), r#""ome": true"#, "dimensions", "2 to 5 axes"),
        (
            two_times.into(),
            r#""ome": true"#,
            "dimensions",
            "one time axis",
        ),
        (
            two_channels.into(),
            r#""ome": true"#,
            "dimensions",
            "one channel",
        ),
        (
            four_space.into(),
            r#""ome": true"#,
            "dimensions",
            "2 or 3 space axes",
        ),
        (
            zcyx.into(),
            r#""ome": true"#,
            "storage_order",
            "time, then channel, then space",
        ),
        (
            tzcyx.into(),
            r#""multiscale": {"levels": 2}"#,
            "storage_order",
            "time, then channel",
        ),
        // Storage order.
        (
            TZYX.into(),
            r#""storage_order": ["t", "z", "q", "x"]"#,
            "storage_order",
            "names no dimension \"q\"",
        ),
        (
            TZYX.into(),
            r#""storage_order": ["t", "z", "z", "x"]"#,
            "storage_order",
            "twice",
        ),
        (
            TZYX.into(),
            r#""storage_order": ["t", "z", "x"]"#,
            "storage_order",
            "left out",
        ),
        (
            TZYX.into(),
            r#""storage_order": ["z", "t", "y", "x"]"#,
            "storage_order",
            "unbounded dimension",
        ),
        (
            zcyx.into(),
            r#""storage_order": ["c", "z", "y", "x"]"#,
            "storage_order",
            "must stay first",
        ),
        (
            TZYX.into(),
            r#""storage_order": ["t", "z", "x", "y"]"#,
            "storage_order",
            "must stay last",
        ),
        // Units and scales.
        (
            unit("parsec", "time"),
            "",
            "dimensions[0].unit",
            "unit of time",
        ),
        (
            unit("second", "space"),
            "",
            "dimensions[0].unit",
            "unit of length",
        ),
        (
            unit("second", "channel"),
            "",
            "dimensions[0].unit",
            "space and time axes only",
        ),
        (
            unit("furlong", "space"),
            "",
            "dimensions[0].unit",
            "not an OME-NGFF",
        ),
        (scale(1, "-1.5"), "", "dimensions[1].scale", "0 or more"),
        (scale(0, "-0.5"), "", "dimensions[0].scale", "0 or more"),
        // Levels and downsampling.
        (
            TZYX.into(),
            r#""multiscale": {"levels": 8}"#,
            "multiscale.levels",
            "one element",
        ),
        (
            single.into(),
            r#""multiscale": {"levels": 2}"#,
            "dimensions[1].downsample",
            "single element",
        ),
        (
            ones.into(),
            r#""multiscale": {"levels": 2}"#,
            "multiscale",
            "no dimension is downsampled",
        ),
        (
            TZYX.into(),
            r#""multiscale": {"levels": 2, "method": "mode"}"#,
            "multiscale.method",
            "",
        ),
        // Attributes.
        (
            TZYX.into(),
            r#""attributes": [1, 2]"#,
            "attributes",
            "JSON object, got an array",
        ),
        (
            TZYX.into(),
            r#""attributes": "x""#,
            "attributes",
            "JSON object, got a string",
        ),
        (
            TZYX.into(),
            r#""attributes": {"ome": {}}"#,
            "attributes",
            "\"ome\"",
        ),
    ];
    for (dims, extra, field, rule) in cases {
        let e = err(&dims, extra);
        assert!(e.field.starts_with(field), "{extra}: field {e}");
        assert!(e.rule.contains(rule), "{extra}: rule {e}");
    }
}

/// t, c (3 channels), z, y, x.
const TCZYX: &str = r#"{"name": "t", "size": 0, "tile": 1}, {"name": "c", "size": 3, "tile": 1},
    {"name": "z", "size": 4, "tile": 4}, {"name": "y", "size": 16, "tile": 16},
    {"name": "x", "size": 16, "tile": 16}"#;

fn channel(label: &str, color: &str) -> String {
    format!(
        r#"{{"label": "{label}", "color": "{color}",
            "window": {{"start": 0, "end": 4095, "min": 0, "max": 65535}}}}"#
    )
}

fn omero(channels: &[String], more: &str) -> String {
    format!(
        r#""ome": {{"omero": {{"channels": [{}]{more}}}}}"#,
        channels.join(", ")
    )
}

#[test]
fn an_omero_block_is_kept_as_given() {
    let three = [
        channel("DAPI", "0000FF"),
        channel("GFP", "00ff00"),
        channel("RFP", "FF0000"),
    ];
    let extra = omero(
        &three,
        r#", "rdefs": {"defaultZ": 2, "model": "color"}, "note": "kept""#,
    );
    let v = parse(TCZYX, &extra).unwrap();
    assert!(v.image.is_ome());
    assert_eq!(v.image.ome, Some(None));
    let block = v.image.omero.as_ref().unwrap();
    let labels: Vec<&str> = block["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["DAPI", "GFP", "RFP"]);
    assert_eq!(block["note"], "kept");
    // A name beside it; without a channel axis, one channel.
    let v = parse(
        TZYX,
        &format!(
            r#""ome": {{"name": "cells", "omero": {{"channels": [{}]}}}}"#,
            channel("only", "FFFFFF")
        ),
    )
    .unwrap();
    assert_eq!(v.image.ome, Some(Some("cells".into())));
    assert!(v.image.omero.is_some());
    // `"ome": {}` is an unnamed image without omero.
    let v = parse(TZYX, r#""ome": {}"#).unwrap();
    assert_eq!(v.image.ome, Some(None));
    assert!(v.image.omero.is_none());
}

#[test]
fn a_malformed_omero_block_is_refused_naming_its_field() {
    let good = || {
        vec![
            channel("a", "0000FF"),
            channel("b", "00FF00"),
            channel("c", "FF0000"),
        ]
    };
    let with = |i: usize, c: &str| {
        let mut v = good();
        v[i] = c.into();
        omero(&v, "")
    };
    let window = r#""window": {"start": 0, "end": 1, "min": 0, "max": 1}"#;
    let cases: Vec<(String, &str, &str)> = vec![
        (
            r#""ome": {"omero": [1]}"#.into(),
            "ome.omero",
            "JSON object",
        ),
        (
            r#""ome": {"omero": {}}"#.into(),
            "ome.omero.channels",
            "missing",
        ),
        (
            r#""ome": {"omero": {"channels": {}}}"#.into(),
            "ome.omero.channels",
            "an array",
        ),
        (
            omero(&good()[..2], ""),
            "ome.omero.channels",
            "has 2 entries; the channel axis \"c\" has 3",
        ),
        (with(1, "7"), "ome.omero.channels[1]", "JSON object"),
        (
            with(2, &format!(r#"{{{window}}}"#)),
            "ome.omero.channels[2].color",
            "missing",
        ),
        (
            with(0, &format!(r#"{{"color": "blue", {window}}}"#)),
            "ome.omero.channels[0].color",
            "six hex digits",
        ),
        (
            with(0, &format!(r##"{{"color": "#0000FF", {window}}}"##)),
            "ome.omero.channels[0].color",
            "six hex digits",
        ),
        (
            with(1, r#"{"color": "00FF00"}"#),
            "ome.omero.channels[1].window",
            "missing",
        ),
        (
            with(
                1,
                r#"{"color": "00FF00", "window": {"start": 0, "end": 1, "min": 0}}"#,
            ),
            "ome.omero.channels[1].window.max",
            "missing",
        ),
        (
            with(
                1,
                r#"{"color": "00FF00", "window": {"start": "0", "end": 1, "min": 0, "max": 1}}"#,
            ),
            "ome.omero.channels[1].window.start",
            "number",
        ),
        (
            with(
                2,
                &format!(r#"{{"color": "FF0000", "label": 3, {window}}}"#),
            ),
            "ome.omero.channels[2].label",
            "a string",
        ),
        (
            with(
                2,
                &format!(r#"{{"color": "FF0000", "active": "yes", {window}}}"#),
            ),
            "ome.omero.channels[2].active",
            "true or false",
        ),
        (
            omero(&good(), r#", "rdefs": {"defaultZ": -1}"#),
            "ome.omero.rdefs.defaultZ",
            "whole number",
        ),
        (
            omero(&good(), r#", "rdefs": 3"#),
            "ome.omero.rdefs",
            "JSON object",
        ),
        (
            omero(&good(), r#", "id": "x""#),
            "ome.omero.id",
            "whole number",
        ),
        (r#""ome": {"colour": 1}"#.into(), "", "colour"),
    ];
    for (extra, field, rule) in cases {
        let e = err(TCZYX, &extra);
        assert!(e.field == field || field.is_empty(), "{extra}: field {e}");
        assert!(e.rule.contains(rule), "{extra}: rule {e}");
    }
}

#[test]
fn a_scale_of_0_is_kept() {
    // Frames taken back to back (an interval of 0), pixels of a size never
    // calibrated: 0 stays 0 on every level.
    let dims = r#"{"name": "t", "size": 0, "tile": 2, "unit": "second", "scale": 0},
        {"name": "y", "size": 64, "tile": 16, "scale": 0.5},
        {"name": "x", "size": 64, "tile": 16, "scale": 0}"#;
    let v = parse(dims, r#""multiscale": {"levels": 2}"#).unwrap();
    assert_eq!(v.image.transform(0).0, [0.0, 0.5, 0.0]);
    assert_eq!(v.image.transform(1).0, [0.0, 1.0, 0.0]);
    let dims = dims.replace(r#""scale": 0}"#, r#""scale": -0.0}"#);
    let v = parse(&dims, "").unwrap();
    assert!(v.image.transform(0).0[2].is_sign_positive());
}
