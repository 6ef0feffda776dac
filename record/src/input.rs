//! Reading measurement files with a bound, so that `/dev/zero` or a runaway log is refused
//! with its size instead of exhausting memory (issue 13: a 234 MB log needed 3.1 GB, and
//! `/dev/zero` reached 7 GB in 10 s). The parsers take `&str` and need memory linear in it;
//! this is where the text comes from.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest nccl-tests log the readers take: a full `-b 8 -e 16G` sweep is about 10 KB and
/// a 1,024-rank run with `NCCL_DEBUG=INFO` a few megabytes, so 64 MiB is far past any real log.
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
    /// Longer than the limit; only the limit and one byte more were read.
    #[error("{}: more than {limit} bytes ({} MiB), the most this reader takes", .path.display(), .limit >> 20)]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
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

/// Reads `path` as UTF-8 text of at most `limit` bytes. Reads through the handle rather than
/// trusting the file's length, which a FIFO, a device or a growing file does not tell.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
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
        assert!(matches!(
            read_bounded(&path, 4),
            Err(InputError::TooLarge { limit: 4, .. })
        ));
        std::fs::write(&path, b"ok\xff").unwrap();
        let err = read_bounded(&path, 5).unwrap_err().to_string();
        assert!(err.contains("invalid byte at offset 2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
