//! Every file the agent reads goes through here, each with a limit chosen for that file, so
//! that one linked to `/dev/zero` or grown without end is refused with its name, its size
//! and the limit instead of taking the node's memory (issue 31: a state file linked to
//! `/dev/zero` was read until the machine ran out of memory).

use record::InputError;
use std::path::Path;

/// Largest `/proc` file read for the agent's own figures (`stat`, `status`, `limits`) or
/// the host name: a few kilobytes on any host, `/proc/stat`'s interrupt line included.
pub const MAX_PROC_BYTES: u64 = 1 << 20;

/// Largest `<host_proc>/<pid>/environ` read: Linux caps a process's arguments and
/// environment together at a quarter of its stack limit and at most 6 MiB.
pub const MAX_ENVIRON_BYTES: u64 = 8 << 20;

/// Reads `path`, at most `limit` bytes of it.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    record::read_bounded_bytes(path, limit)
}

/// Reads `path` as UTF-8 text, at most `limit` bytes of it.
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputError> {
    record::into_text(path, read(path, limit)?)
}
