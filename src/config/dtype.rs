//! Element types, named as Zarr v3 names them.

use serde::{Deserialize, Serialize};

/// The element type of the array. Values are the Zarr v3 `data_type` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Int8,
    Int16,
    Int32,
    Int64,
    Float16,
    Float32,
    Float64,
}

impl DType {
    /// Every supported type, in the order of the C enum `tz_dtype`.
    pub const ALL: [DType; 11] = [
        DType::Uint8,
        DType::Uint16,
        DType::Uint32,
        DType::Uint64,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Float16,
        DType::Float32,
        DType::Float64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Uint8 | DType::Int8 => 1,
            DType::Uint16 | DType::Int16 | DType::Float16 => 2,
            DType::Uint32 | DType::Int32 | DType::Float32 => 4,
            DType::Uint64 | DType::Int64 | DType::Float64 => 8,
        }
    }

    /// The Zarr v3 `data_type` name.
    pub fn name(self) -> &'static str {
        match self {
            DType::Uint8 => "uint8",
            DType::Uint16 => "uint16",
            DType::Uint32 => "uint32",
            DType::Uint64 => "uint64",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float16 => "float16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::Float16 | DType::Float32 | DType::Float64)
    }

    pub fn is_signed(self) -> bool {
        matches!(
            self,
            DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64
        )
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
