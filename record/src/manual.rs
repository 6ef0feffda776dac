//! Shell completions and man pages for the workspace's binaries (`tuner`, `microbench`),
//! generated from the same clap definitions as their parsers, so they cannot drift from the
//! flags. Behind the `manual` feature, so the libraries that read records pull in no clap.

use std::path::Path;

use anyhow::Context;

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
