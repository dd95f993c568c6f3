//! Helpers shared by the integration tests (`mod support;` in a test file).

// Each test file uses a different part of these helpers.
#![allow(dead_code)]

pub mod decode;
