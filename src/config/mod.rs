mod dtype;
pub use dtype::DType;
