//! At start, the GPU libraries the calibration child will load, as `microbench libs` finds
//! them: one log line each, so a node that cannot calibrate says why before its first run
//! (the agent itself loads no GPU library).

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Longest `microbench libs` may take: it loads four libraries and makes an NCCL unique id.
const LIBS_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `microbench libs --format json` and logs what it found.
pub async fn log(microbench: &Path) {
    let run = tokio::process::Command::new(microbench)
        .args(["libs", "--format", "json"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(LIBS_TIMEOUT, run).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return tracing::warn!(
                "GPU libraries: {} libs did not run: {e}",
                microbench.display()
            )
        }
        Err(_) => {
            return tracing::warn!(
                "GPU libraries: {} libs gave no answer in {LIBS_TIMEOUT:?}",
                microbench.display()
            )
        }
    };
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(doc) => {
            for (usable, line) in lines(&doc) {
                if usable {
                    tracing::info!("GPU library {line}");
                } else {
                    tracing::warn!("GPU library {line}");
                }
            }
        }
        Err(e) => tracing::warn!(
            "GPU libraries: {} libs printed no document ({e}): {}",
            microbench.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// One line per library of a `microbench libs` document, and whether it is usable.
fn lines(doc: &Value) -> Vec<(bool, String)> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    doc.get("libraries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|lib| {
            let name = text(lib, "library").unwrap_or_else(|| "?".into());
            match text(lib, "error") {
                Some(error) => (false, format!("{name} unusable: {error}")),
                None => {
                    let file = text(lib, "path").or_else(|| text(lib, "name"));
                    let version =
                        text(lib, "version").map_or_else(String::new, |v| format!(", version {v}"));
                    (
                        true,
                        format!("{name}: {}{version}", file.unwrap_or_default()),
                    )
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_library_is_one_line_usable_or_with_its_reason() {
        let doc = serde_json::json!({
            "libraries": [
                {"library": "nccl", "name": "libnccl.so.2", "path": "/opt/lib/libnccl.so.2",
                 "version": "2.27.3", "error": null},
                {"library": "cuda", "name": null, "path": null, "version": null,
                 "error": "no NVIDIA driver: libcuda.so.1 cannot be loaded"},
            ]
        });
        assert_eq!(
            lines(&doc),
            [
                (
                    true,
                    "nccl: /opt/lib/libnccl.so.2, version 2.27.3".to_string()
                ),
                (
                    false,
                    "cuda unusable: no NVIDIA driver: libcuda.so.1 cannot be loaded".to_string()
                ),
            ]
        );
    }
}
