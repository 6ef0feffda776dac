//! The product reads on its own: what a user sees (every binary's `--help`, the READMEs, the
//! user docs, the chart's values and notes, the runbooks) names no path of one machine and no
//! "issue N" of the project's tracker, which a reader outside it cannot open. docs/history.md
//! is the project's history and may cite issues; source comments are for maintainers.

use meshfit_e2e::workspace_bin;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

/// Home and scratch directories by convention: a path under one in a doc is some machine's,
/// a broken reference for every other reader.
const HOME_ROOTS: &[&str] = &["/home/", "/Users/", "/root/", "/mnt/", "/scratch/"];

/// [`HOME_ROOTS`], this checkout and the folder that holds it, wherever they are on the
/// machine that runs the test: the paths a doc written here would leak (a design file cited
/// beside the checkout was one). The folder is left out where it is the filesystem's root or
/// the temporary directory, which hold everyone's files.
static MACHINE_ROOTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut roots: Vec<String> = HOME_ROOTS.iter().map(|r| r.to_string()).collect();
    let checkout = repo();
    roots.push(format!("{}/", checkout.display()));
    if let Some(beside) = checkout_folder() {
        roots.push(format!("{}/", beside.display()));
    }
    roots
});

/// The folder that holds this checkout, unless it is `/` or the temporary directory.
fn checkout_folder() -> Option<PathBuf> {
    let folder = repo().parent()?.to_path_buf();
    let shared = folder.parent().is_none() || folder == std::env::temp_dir();
    (!shared).then_some(folder)
}

/// Where "issue N" (also "issues 4 and 12", "Issue #3") starts in `text`, if anywhere.
fn issue_reference(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("issue") {
        let at = from + found;
        from = at + "issue".len();
        // A word of its own: not "reissue" nor "tissue".
        if at > 0 && lower.as_bytes()[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = lower[from..].strip_prefix('s').unwrap_or(&lower[from..]);
        let rest = rest.trim_start_matches([' ', '\u{a0}']);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Some(at);
        }
    }
    None
}

/// Where a machine-specific absolute path starts in `text`, if anywhere. Only at the start of
/// a path (after a space, quote, bracket or line start), so `https://host/home/x` is a URL,
/// not a path of this machine.
fn machine_path(text: &str) -> Option<usize> {
    MACHINE_ROOTS
        .iter()
        .filter_map(|root| {
            text.match_indices(root.as_str())
                .find(|(at, _)| {
                    *at == 0
                        || text[..*at]
                            .ends_with(|c: char| c.is_whitespace() || "`'\"(<[=:".contains(c))
                })
                .map(|(at, _)| at)
        })
        .min()
}

fn line_of(text: &str, at: usize) -> (usize, &str) {
    let line = text[..at].matches('\n').count() + 1;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    (line, &text[start..end])
}

/// Every finding of both kinds in `text`, as "WHERE:LINE: kind: the line".
fn findings(origin: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut scan = |kind: &str, find: fn(&str) -> Option<usize>| {
        let mut offset = 0;
        while let Some(at) = find(&text[offset..]) {
            let (line, content) = line_of(text, offset + at);
            found.push(format!("{origin}:{line}: {kind}: {}", content.trim()));
            offset = text[offset + at..]
                .find('\n')
                .map_or(text.len(), |i| offset + at + i);
        }
    };
    scan("an issue number", issue_reference);
    scan("a machine's path", machine_path);
    found
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// The files a user reads, relative to the repository root.
fn user_docs() -> Vec<PathBuf> {
    let root = repo();
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "agent/README.md",
        "data/README.md",
        "deploy/README.md",
        "deploy/helm/meshfit/values.yaml",
        "deploy/helm/meshfit/values.schema.json",
        "deploy/helm/meshfit/templates/NOTES.txt",
        "deploy/helm/meshfit/Chart.yaml",
        "scripts/fleet/README.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    // The pages, and the recipes and chart templates a user runs as shipped: their comments
    // reach the rendered manifests and the job scripts users copy.
    let pages = [
        ("docs", Some("md")),
        ("deploy/runbooks", Some("md")),
        ("deploy/slurm", None),
        ("deploy/mpirun", None),
        ("deploy/helm/meshfit/templates", None),
    ];
    for (dir, ext) in pages {
        let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .filter(|p| ext.is_none_or(|ext| p.extension().is_some_and(|e| e == ext)))
            .filter(|p| p.file_name().is_some_and(|n| n != "history.md"))
            .map(|p| p.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(p))
            .collect();
        pages.sort();
        docs.extend(pages);
    }
    docs
}

/// The subcommands a `--help` lists under "Commands:", but `help` itself.
fn subcommands(help: &str) -> Vec<String> {
    help.split_once("Commands:")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

fn help_of(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?} --help: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {args:?} --help exits {}: {}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_finders_flag_what_they_should_and_nothing_else() {
    for flagged in [
        "made in issue 12.",
        "(Issue #3)",
        "issues 4 and 12",
        "Issue\u{a0}31",
    ] {
        assert!(
            issue_reference(flagged).is_some(),
            "{flagged:?} not flagged"
        );
    }
    for clean in [
        "known issues with NCCL",
        "reissue 4 tokens",
        "an issue: 12 nodes",
    ] {
        assert_eq!(issue_reference(clean), None, "{clean:?} flagged");
    }
    let here = format!("see {}/docs/design.md", repo().display());
    let beside = checkout_folder().map(|f| format!("(see {}/shared/design.md)", f.display()));
    for flagged in [here.as_str(), "`/home/ci/meshfit`", "path=/root/x"]
        .into_iter()
        .chain(beside.as_deref())
    {
        assert!(machine_path(flagged).is_some(), "{flagged:?} not flagged");
    }
    for clean in [
        "--state-dir /tmp/agent",
        "https://example.com/home/x",
        "/var/lib/meshfit-agent",
        "docs/design.md",
    ] {
        assert_eq!(machine_path(clean), None, "{clean:?} flagged");
    }
}

#[test]
fn user_docs_cite_no_issue_numbers_and_no_machine_paths() {
    let root = repo();
    let mut all = Vec::new();
    for doc in user_docs() {
        let text = std::fs::read_to_string(root.join(&doc))
            .unwrap_or_else(|e| panic!("reading {}: {e}", doc.display()));
        all.extend(findings(&doc.display().to_string(), &text));
    }
    assert!(
        all.is_empty(),
        "user docs a reader outside the project cannot follow:\n{}",
        all.join("\n")
    );
}

#[test]
fn the_readme_contract_reference_is_the_design_doc_in_the_repository() {
    let root = repo();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(
        readme.contains("](docs/design.md)"),
        "README.md does not link docs/design.md for the contracts"
    );
    assert!(
        root.join("docs/design.md").is_file(),
        "docs/design.md missing"
    );
    let agent = std::fs::read_to_string(root.join("agent/README.md")).expect("agent/README.md");
    assert!(
        agent.contains("../docs/design.md"),
        "agent/README.md does not cite the design doc by its path in the repository"
    );
}

#[test]
fn help_of_every_binary_and_subcommand_cites_no_issue_numbers_and_no_machine_paths() {
    let mut all = Vec::new();
    let mut seen = 0;
    for (package, bin) in [
        ("agent", "agent"),
        ("microbench", "microbench"),
        ("tuner", "tuner"),
    ] {
        let path = workspace_bin(package, bin);
        let top = help_of(&path, &[]);
        all.extend(findings(&format!("{bin} --help"), &top));
        seen += 1;
        for sub in subcommands(&top) {
            let text = help_of(&path, &[&sub]);
            all.extend(findings(&format!("{bin} {sub} --help"), &text));
            seen += 1;
        }
    }
    // agent has no subcommands; microbench and tuner have several each.
    assert!(
        seen > 5,
        "only {seen} help texts found: the Commands: parse broke"
    );
    assert!(
        all.is_empty(),
        "--help text a user cannot follow:\n{}",
        all.join("\n")
    );
}
