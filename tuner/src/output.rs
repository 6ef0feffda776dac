//! Files the tuner writes (`snapshot -o`, `fit --plot`): whole or not at all, and never over
//! something that is not a regular file (issue 13: a rename over `/dev/full`, a FIFO or a
//! symlink destroyed it, and a directory target left `PATH.tmp` behind).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why an output file was not written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The target exists and is not a regular file.
    #[error("{path}: is {what}, not a regular file; give a new path or an existing regular file")]
    NotRegular {
        /// The target as given.
        path: PathBuf,
        /// What it is (a directory, a FIFO, ...).
        what: &'static str,
    },
    /// Reading the target's metadata, writing the temporary file or renaming it failed.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The file the action was on.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path` atomically: into a new temporary file beside the target, then
/// renamed over it, so a reader sees the old file or the new one, never half of one. A
/// symlink is written through (its target is replaced and the link kept); anything else that
/// is not a regular file is refused before anything is written. The temporary file is
/// removed on every error.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let target = resolve(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let io = |path: &Path, action| {
        let path = path.to_path_buf();
        move |source| OutputError::Io {
            path,
            action,
            source,
        }
    };
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io(&tmp, "creating the temporary file"))
        .and_then(|mut f| {
            f.write_all(bytes)
                .and_then(|()| f.sync_all())
                .map_err(io(&tmp, "writing the temporary file"))
        })
        .and_then(|()| fs::rename(&tmp, &target).map_err(io(&target, "renaming over")));
    if written.is_err() {
        // The temporary file may not exist (creation failed); nothing else to report then.
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// The file to replace: `path` itself, or what its symlinks point at; refused when that exists
/// and is not a regular file.
fn resolve(path: &Path) -> Result<PathBuf, OutputError> {
    let target = match fs::canonicalize(path) {
        Ok(t) => t,
        // A path that does not exist yet (or a dangling link's own path) is created as given.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        Err(source) => {
            return Err(OutputError::Io {
                path: path.to_path_buf(),
                action: "resolving the path",
                source,
            })
        }
    };
    let meta = fs::metadata(&target).map_err(|source| OutputError::Io {
        path: target.clone(),
        action: "reading its metadata",
        source,
    })?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(target);
    }
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(OutputError::NotRegular {
        path: path.to_path_buf(),
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn writes_new_and_replaces_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("snap.json");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn writes_through_a_symlink_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
    }

    #[test]
    fn refuses_directories_fifos_and_devices_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("out");
        fs::create_dir(&sub).unwrap();
        let err = write_atomically(&sub, b"x").unwrap_err().to_string();
        assert!(err.contains("is a directory, not a regular file"), "{err}");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let err = write_atomically(&fifo, b"x").unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        let err = write_atomically(Path::new("/dev/full"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a device"), "{err}");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_failed_write_removes_its_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("snap.json");
        let err = write_atomically(&missing, b"x").unwrap_err().to_string();
        assert!(err.contains("creating the temporary file"), "{err}");
        assert!(leftovers(dir.path()).is_empty());
    }
}
