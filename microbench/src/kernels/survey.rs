//! What `microbench libs` reports: for each GPU library, the file found, under which name and
//! path, its version where reading it needs no GPU, and every symbol microbench calls that it
//! lacks. Nothing here needs a GPU or a working driver.

use super::loader::{driver_version, open_first, Library};
use super::{cublaslt::cublaslt_version, nccl};

/// One library as found on this machine.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Found {
    /// Which library.
    pub library: Library,
    /// The file names tried, in order.
    pub tried: &'static [&'static str],
    /// The name it loaded under; `None` when no name loaded.
    pub name: Option<String>,
    /// The file the dynamic loader picked.
    pub path: Option<String>,
    /// Its version (`ncclGetVersion`, `cublasLtGetVersion`, `cuDriverGetVersion`, NVML's
    /// driver version); `None` where it cannot be read (NVML without its kernel module) or
    /// the library is unusable.
    pub version: Option<String>,
    /// Every symbol microbench calls in it.
    pub symbols: &'static [&'static str],
    /// Those the file lacks.
    pub missing_symbols: Vec<&'static str>,
    /// NCCL only: whether `ncclGetUniqueId`, what rank 0 of a job calls first, works here
    /// (it needs a network interface, not a GPU); `error` says why when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_id_works: Option<bool>,
    /// Why it is unusable, in one line; `None` when it is complete.
    pub error: Option<String>,
}

impl Found {
    /// Found under some name with every symbol, and (NCCL) a unique id made.
    pub fn usable(&self) -> bool {
        self.error.is_none()
    }
}

/// Every library of [`Library::ALL`], as found now.
pub fn survey() -> Vec<Found> {
    Library::ALL.iter().map(|&l| find(l)).collect()
}

/// What is known of `library` before anything is opened: the names it is tried under and the
/// symbols the code calls.
fn nothing_yet(library: Library) -> Found {
    Found {
        library,
        tried: library.file_names(),
        name: None,
        path: None,
        version: None,
        symbols: library.symbols(),
        missing_symbols: Vec::new(),
        unique_id_works: None,
        error: None,
    }
}

fn find(library: Library) -> Found {
    let mut found = nothing_yet(library);
    let file = match open_first(library, library.file_names()) {
        Ok(file) => file,
        Err(why) => {
            found.error = Some(crate::Error::from(why).to_string());
            return found;
        }
    };
    found.name = Some(file.name.clone());
    found.path = file.path.as_ref().map(|p| p.display().to_string());
    found.missing_symbols = file.missing();
    if !found.missing_symbols.is_empty() {
        found.error = Some(format!(
            "{} lacks {}",
            file.describe(),
            found.missing_symbols.join(", ")
        ));
        return found;
    }
    found.version = match library {
        Library::Nvml => crate::discovery::driver_version(),
        Library::Cuda => driver_version(&file),
        Library::CublasLt => cublaslt_version(),
        Library::Nccl => nccl::nccl_version(),
    };
    if library == Library::Nccl {
        let made = nccl::nccl_unique_id();
        found.unique_id_works = Some(made.is_ok());
        found.error = made.err().map(|e| e.to_string());
    }
    found
}

/// The survey as a table for people: one line per library, then a line per problem.
pub fn render(found: &[Found]) -> String {
    let mut out = String::new();
    for f in found {
        let title = f.library.title();
        let line = match (&f.name, &f.error) {
            (Some(name), None) => {
                let path = f
                    .path
                    .as_deref()
                    .map_or(String::new(), |p| format!(" ({p})"));
                let version = f
                    .version
                    .as_deref()
                    .map_or(String::new(), |v| format!(", version {v}"));
                let id = match f.unique_id_works {
                    Some(true) => ", ncclGetUniqueId works",
                    _ => "",
                };
                format!(
                    "{title:<12} {name}{path}{version}, {} symbols resolved{id}",
                    f.symbols.len()
                )
            }
            (_, Some(error)) => format!("{title:<12} unusable: {error}"),
            (None, None) => format!("{title:<12} unusable"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(library: Library) -> Found {
        nothing_yet(library)
    }

    /// A complete library shows its name, path, version and symbol count; a broken one its
    /// one-line reason; both are one line.
    #[test]
    fn each_library_is_one_line_naming_file_version_or_reason() {
        let nccl = Found {
            name: Some("libnccl.so.2".into()),
            path: Some("/opt/nccl/lib/libnccl.so.2".into()),
            version: Some("2.27.3".into()),
            unique_id_works: Some(true),
            ..found(Library::Nccl)
        };
        let lt = Found {
            error: Some("libcublasLt.so.12 (/x/libcublasLt.so.12) lacks cublasLtMatmul".into()),
            ..found(Library::CublasLt)
        };
        let text = render(&[lt, nccl]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "cuBLASLt     unusable: libcublasLt.so.12 (/x/libcublasLt.so.12) lacks cublasLtMatmul",
                &format!(
                    "NCCL         libnccl.so.2 (/opt/nccl/lib/libnccl.so.2), version 2.27.3, {} \
                     symbols resolved, ncclGetUniqueId works",
                    Library::Nccl.symbols().len()
                ),
            ]
        );
    }

    /// Without NVIDIA's libraries (this machine) every entry says why, and none is usable.
    #[test]
    fn the_survey_names_every_library_and_what_was_tried() {
        let all = survey();
        let names: Vec<Library> = all.iter().map(|f| f.library).collect();
        assert_eq!(names, Library::ALL);
        for f in all.iter().filter(|f| f.name.is_none()) {
            assert!(!f.usable());
            let error = f.error.as_deref().unwrap_or_default();
            assert!(error.contains(f.tried[0]), "{error}");
        }
    }
}
