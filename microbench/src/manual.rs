//! Shell completions and the man page, generated from the same clap definitions as the
//! parser, so they cannot drift from the flags.

/// The completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> String {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The man page of `cmd` in roff, section 1, listing its subcommands.
pub fn man_page(cmd: clap::Command) -> std::io::Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
