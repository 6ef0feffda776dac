//! Rendering results: each format renders to a String without I/O.
