//! Every file the agent reads goes through here, each with a limit chosen for that file, so
//! that one linked to `/dev/zero` or grown without end is refused with its name, its size
//! and the limit instead of taking the node's memory (issue 31: a state file linked to
//! `/dev/zero` was read until the machine ran out of memory).
//!
//! Only regular files are read, symlinks followed. A FIFO blocks `open()` until a writer
//! comes: one at the state file held the agent in its start, deaf to SIGTERM, and one at the
//! fabric results file froze the sampler while `/metrics` kept answering (issue 31). The file
//! is looked at before it is opened, opened with `O_NONBLOCK` so that one swapped in between
//! cannot block, and looked at again through the handle.

use record::InputError;
use std::fs::{FileType, Metadata, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Largest `/proc` file read for the agent's own figures (`stat`, `status`, `limits`) or
/// the host name: a few kilobytes on any host, `/proc/stat`'s interrupt line included.
pub const MAX_PROC_BYTES: u64 = 1 << 20;

/// Largest `<host_proc>/<pid>/environ` read: Linux caps a process's arguments and
/// environment together at a quarter of its stack limit and at most 6 MiB.
pub const MAX_ENVIRON_BYTES: u64 = 8 << 20;

/// Reads the regular file `path`, at most `limit` bytes of it.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    regular(path, &std::fs::metadata(path).map_err(io)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    // The path may name another file by now.
    regular(path, &file.metadata().map_err(io)?)?;
    record::read_bounded_from(&file, path, limit)
}

/// Reads the regular file `path` as UTF-8 text, at most `limit` bytes of it.
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputError> {
    record::into_text(path, read(path, limit)?)
}

/// Refuses `path` unless `meta` is a regular file's.
fn regular(path: &Path, meta: &Metadata) -> Result<(), InputError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(InputError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file; the agent reads regular files only",
                kind(meta.file_type())
            ),
        ),
    })
}

/// What a file that is not a regular one is, for the error.
fn kind(t: FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "of an unknown type"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Makes a FIFO at `path`.
    pub(crate) fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    /// Runs `f` on a thread of its own and gives its result, or panics when it takes more
    /// than 5 s: what blocked before issue 31 fails the test instead of hanging it.
    pub(crate) fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(Duration::from_secs(5))
            .expect("still blocked after 5 s")
    }

    /// Issue 31, item 7: a FIFO is refused at once, without a writer, and so is a device;
    /// a symlink to a regular file is followed.
    #[test]
    fn r31_only_regular_files_are_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let path = fifo.clone();
        let err = within_5s(move || read(&path, 1 << 20)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: a FIFO, not a regular file; the agent reads regular files only",
                fifo.display()
            )
        );
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read(&zero, 1 << 20).unwrap_err().to_string();
        assert!(
            err.ends_with(
                ": a character device, not a regular file; the agent reads regular files only"
            ),
            "{err}"
        );
        let file: PathBuf = dir.path().join("file");
        std::fs::write(&file, "2,3").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_text(&link, 3).unwrap(), "2,3");
    }
}
