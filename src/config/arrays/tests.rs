use super::*;

fn array(key: &str) -> serde_json::Value {
    serde_json::json!({
        "key": key, "dtype": "uint16",
        "dimensions": [{"name": "t", "size": 0, "tile": 1},
                       {"name": "y", "size": 32, "tile": 16},
                       {"name": "x", "size": 32, "tile": 16}]
    })
}

fn plan(extra: serde_json::Value, keys: &[&str]) -> Result<Plan, ConfigError> {
    let mut cfg = serde_json::json!({"arrays": keys.iter().map(|k| array(k)).collect::<Vec<_>>()});
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    match StreamConfig::from_json(&cfg.to_string())? {
        StreamConfig::Many(m) => m.validate(),
        StreamConfig::One(_) => panic!("parsed as one array"),
    }
}

fn refused(extra: serde_json::Value, keys: &[&str]) -> ConfigError {
    plan(extra, keys).expect_err("refused")
}

#[test]
fn keys_are_checked() {
    let p = plan(serde_json::json!({}), &["cam0", "cam1", "a/b/img"]).unwrap();
    assert_eq!(p.arrays.len(), 3);
    assert_eq!(p.arrays[2].key, "a/b/img");
    assert_eq!(p.index_of("cam1"), Some(1));
    assert_eq!(p.arrangement, Arrangement::Group);
    for (keys, field, words) in [
        (
            &["a", "a"][..],
            "arrays[1].key",
            "also the key of arrays[0]",
        ),
        (&["a", "a/b"][..], "arrays[1].key", "lies inside arrays[0]"),
        (&["x/"][..], "arrays[0].key", "empty name"),
        (&["x/../y"][..], "arrays[0].key", "not a name"),
        (&["a b"][..], "arrays[0].key", "names take letters"),
        (&[""][..], "arrays[0].key", "must not be empty"),
    ] {
        let e = refused(serde_json::json!({}), keys);
        assert_eq!(e.field, field, "{keys:?}: {e}");
        assert!(e.rule.contains(words), "{keys:?}: {e}");
    }
}

#[test]
fn an_array_rule_names_the_array() {
    let mut cfg = serde_json::json!({"arrays": [array("p0"), array("p1")]});
    cfg["arrays"][1]["dimensions"][1]["tile"] = 0.into();
    let m = ArraysConfig::from_json(&cfg.to_string()).unwrap();
    let e = m.validate().unwrap_err();
    assert!(e.field.starts_with("arrays[1] (\"p1\").dimensions"), "{e}");
}

#[test]
fn plates_are_checked() {
    let good = serde_json::json!({"plate": {
        "rows": ["A", "B"], "columns": ["1", "2"],
        "wells": [{"row": "A", "column": "1", "fields": ["A/1/0", "A/1/1"]},
                  {"row": "B", "column": "2", "fields": ["B/2/0"]}]}});
    let p = plan(good.clone(), &["A/1/0", "A/1/1", "B/2/0"]).unwrap();
    assert!(matches!(p.arrangement, Arrangement::Plate(_)));
    assert!(p.arrays.iter().all(|v| v.image.is_ome()));
    let mut bad_row = good.clone();
    bad_row["plate"]["wells"][1]["row"] = "C".into();
    let e = refused(bad_row, &["A/1/0", "A/1/1", "B/2/0"]);
    assert_eq!(e.field, "plate.wells[1].row", "{e}");
    let mut no_array = good.clone();
    no_array["plate"]["wells"][1]["fields"][0] = "B/2/9".into();
    let e = refused(no_array, &["A/1/0", "A/1/1", "B/2/0"]);
    assert!(e.rule.contains("names no array"), "{e}");
    let e = refused(good.clone(), &["A/1/0", "A/1/1", "B/2/0", "extra"]);
    assert!(e.rule.contains("no well's field"), "{e}");
    let mut misplaced = good.clone();
    misplaced["plate"]["wells"][1]["fields"][0] = "A/1/1".into();
    let e = refused(misplaced, &["A/1/0", "A/1/1", "B/2/0"]);
    assert!(e.rule.contains("has the key B/2/<field>"), "{e}");
    let mut both = good;
    both["collection"] = "bioformats2raw".into();
    let e = refused(both, &["A/1/0", "A/1/1", "B/2/0"]);
    assert_eq!(e.field, "plate", "{e}");
}

#[test]
fn collections_are_checked() {
    let c = serde_json::json!({"collection": "bioformats2raw"});
    let p = plan(c.clone(), &["0", "Pos1"]).unwrap();
    assert_eq!(p.arrangement, Arrangement::Collection);
    assert!(p.arrays.iter().all(|v| v.image.is_ome()));
    let e = refused(c.clone(), &["0", "a/b"]);
    assert!(e.rule.contains("one name each"), "{e}");
    let e = refused(c, &["OME"]);
    assert!(e.rule.contains("other than `OME`"), "{e}");
}

#[test]
fn one_array_configs_still_parse_as_one() {
    let one =
        r#"{"dtype": "uint8", "dimensions": [{"size": 0, "tile": 1}, {"size": 8, "tile": 8}]}"#;
    assert!(matches!(
        StreamConfig::from_json(one).unwrap(),
        StreamConfig::One(_)
    ));
    let p = StreamConfig::from_json(one).unwrap().validate().unwrap();
    assert_eq!(p.arrangement, Arrangement::Single);
    assert_eq!(p.arrays[0].key, "");
}
