//! Reading measurement files with a bound, so that `/dev/zero` or a runaway log is refused
//! with its size instead of exhausting memory (issue 13: a 234 MB log needed 3.1 GB, and
//! `/dev/zero` reached 7 GB in 10 s). The parsers take `&str` and need memory linear in it;
//! this is where the text comes from.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest nccl-tests log or CSV table that `microbench import` and the tuner take: a full
/// `-b 8 -e 16G` sweep is about 10 KB and a 1,024-rank run with `NCCL_DEBUG=INFO` a few
/// megabytes, so 64 MiB is far past any real log.
pub const MAX_LOG_BYTES: u64 = 64 << 20;

/// Largest microbench JSON-lines file the readers take: a record is about 500 bytes, so
/// 256 MiB holds half a million points, a calibration of every size on a 10,000-GPU fleet.
pub const MAX_JSON_LINES_BYTES: u64 = 256 << 20;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Could not be opened or read.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Longer than the limit; only the limit and one byte more were read, or nothing when
    /// the file's length told.
    #[error("{}", too_large(.path, *.size, *.limit))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
        /// The file's length, when it tells one (a regular file); a FIFO or a device does not.
        size: Option<u64>,
    },
    /// Not UTF-8 text.
    #[error("{}: not UTF-8 text (invalid byte at offset {offset}); logs and JSON lines are text", .path.display())]
    NotText {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
}

impl InputError {
    /// True when the file does not exist, which some readers take as "nothing there".
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn too_large(path: &Path, size: Option<u64>, limit: u64) -> String {
    let size = size.map_or_else(String::new, |s| format!("{s} bytes, "));
    format!(
        "{}: {size}more than {limit} bytes ({}), the most this reader takes",
        path.display(),
        binary_size(limit)
    )
}

/// `bytes` in the largest binary unit it reaches, for people: 64 KiB, 32 MiB.
fn binary_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Reads `path` as UTF-8 text of at most `limit` bytes. Reads through the handle rather than
/// trusting the file's length, which a FIFO, a device or a growing file does not tell.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, InputError> {
    into_text(path, read_bounded_bytes(path, limit)?)
}

/// Reads `path` as bytes, at most `limit` of them, as [`read_bounded`] does.
pub fn read_bounded_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = open_for_reading(path).map_err(io)?;
    let bytes = read_bounded_from(&file, path, limit)?;
    if bytes.is_empty() && file.metadata().map_err(io)?.file_type().is_fifo() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "a FIFO that no process writes to: nothing to read",
        )));
    }
    Ok(bytes)
}

/// Opens `path` for reading without waiting for a writer: `open()` of a FIFO blocks until one
/// comes, so one given as a file held a reader forever, deaf to signals (issue 31, item 7).
/// It is opened non-blocking, then read blocking again: a pipe with its writer there (`<(cmd)`,
/// `/dev/stdin`) is read to its end, and one with none reads as empty at once.
pub fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    // SAFETY: fcntl on a descriptor this function owns, with integer flags only.
    let cleared = unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
}

/// Reads at most `limit` bytes from `file`, opened from `path` (which errors name), for a
/// caller that opens files its own way. A regular file longer than `limit` is refused by its
/// length without being read; anything else is read up to one byte past the limit.
pub fn read_bounded_from(
    file: &std::fs::File,
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>, InputError> {
    let too_large = |size| InputError::TooLarge {
        path: path.to_path_buf(),
        limit,
        size,
    };
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_large(Some(meta.len())));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(None));
    }
    Ok(bytes)
}

/// `bytes` read from `path` as UTF-8 text.
pub fn into_text(path: &Path, bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| InputError::NotText {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let err = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/dev/zero: more than 1048576 bytes (1 MiB)"),
            "{err}"
        );
    }

    #[test]
    fn text_up_to_the_limit_is_read_and_binary_is_named() {
        let dir = std::env::temp_dir().join(format!("record-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.txt");
        std::fs::write(&path, "12345").unwrap();
        assert_eq!(read_bounded(&path, 5).unwrap(), "12345");
        let err = read_bounded(&path, 4).unwrap_err();
        assert!(
            matches!(
                err,
                InputError::TooLarge {
                    limit: 4,
                    size: Some(5),
                    ..
                }
            ),
            "{err:?}"
        );
        std::fs::write(&path, b"ok\xff").unwrap();
        let err = read_bounded(&path, 5).unwrap_err().to_string();
        assert!(err.contains("invalid byte at offset 2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 31: a regular file past the limit is refused by its length, unread, and the
    /// message names the file, its size and the limit.
    #[test]
    fn a_long_regular_file_is_refused_naming_its_size_and_the_limit() {
        let dir = std::env::temp_dir().join(format!("record-input-long-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("busy");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(70_000)
            .unwrap();
        let err = read_bounded_bytes(&path, 64 << 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: 70000 bytes, more than 65536 bytes (64 KiB), the most this reader takes",
                path.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 31, item 7: a FIFO given as a file blocked `open()` until a writer came. One with
    /// no writer is refused at once; one with its writer there is read.
    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once_and_one_with_a_writer_is_read() {
        let dir = std::env::temp_dir().join(format!("record-input-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let err = read_bounded(&fifo, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("a FIFO that no process writes to"), "{err}");
        let mut writer = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf 'from a pipe' > '{}'", fifo.display()))
            .spawn()
            .unwrap();
        // Until the writer has reached its open, the FIFO reads as empty; once it waits there
        // it counts as a writer (Linux's fifo_open), and the read takes what it writes.
        let text = (0..500)
            .find_map(|_| {
                let read = read_bounded(&fifo, 1 << 20).ok();
                if read.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                read
            })
            .expect("the writer came within 10 s");
        writer.wait().unwrap();
        assert_eq!(text, "from a pipe");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
