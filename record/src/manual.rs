//! What the workspace's binaries (`tuner`, `microbench`) share on the command line: shell
//! completions and man pages, generated from the same clap definitions as their parsers so
//! they cannot drift from the flags, and the usage error that exits 2. Behind the `manual`
//! feature, so the libraries that read records pull in no clap.

use std::path::Path;

use anyhow::Context;

/// A command line the binary cannot act on: flags that do not go together, a value out of
/// range, a name it does not know. It exits 2, as clap's own parse errors do; every other
/// error exits 1 ([`exit_code`]).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Usage(pub Box<dyn std::error::Error + Send + Sync + 'static>);

/// `err` as a usage error.
pub fn usage(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> anyhow::Error {
    Usage(err.into()).into()
}

/// The exit code of an error: 2 when a [`Usage`] error is anywhere in its chain, else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<Usage>()) {
        2
    } else {
        1
    }
}

/// The shells `completions` writes for, as the binaries' `completions` subcommand takes them.
pub use clap_complete::Shell;

/// The completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> String {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The man page of `cmd` in roff, section 1, listing its subcommands; with `dir`, that page
/// and one per subcommand (`NAME-SUB.1`, the pages the list refers to) are written there
/// instead, and the line returned says so.
pub fn man_pages(cmd: clap::Command, dir: Option<&Path>) -> anyhow::Result<String> {
    // `help` has no page of its own, so the list does not name one.
    let cmd = cmd.disable_help_subcommand(true);
    match dir {
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("rendering the man page")?;
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
        Some(dir) => {
            let name = cmd.get_name().to_string();
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            Ok(format!(
                "wrote {name}.1 and a page per subcommand into {}\n",
                dir.display()
            ))
        }
    }
}
