//! Rendering results. Each format is a function from a result to a String, without I/O;
//! the binary writes them in one place.

pub mod doc;
pub mod explain;
pub mod fit;
pub mod launch;
pub mod listing;
pub mod plot;
pub mod table;
