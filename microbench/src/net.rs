//! Listening TCP sockets on both IP families, for the rendezvous and the agent's API: one
//! dual-stack IPv6 socket (`[::]`, IPv4 peers arriving as mapped addresses), or IPv4 alone
//! where the host has IPv6 disabled.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

/// A listening socket on every address of the host at `port`: dual-stack `[::]`, or
/// `0.0.0.0` where the host has no IPv6, with the reason given back for the caller to say
/// so. On failure, the address that failed and why.
pub fn listen_any(
    port: u16,
    backlog: i32,
) -> Result<(TcpListener, Option<io::Error>), (SocketAddr, io::Error)> {
    let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    match listen(v6, true, backlog) {
        Ok(listener) => Ok((listener, None)),
        Err(e) if ipv6_unavailable(&e) => {
            let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            let listener = listen(v4, false, backlog).map_err(|e| (v4, e))?;
            Ok((listener, Some(e)))
        }
        Err(e) => Err((v6, e)),
    }
}

/// The errors of a host without IPv6: no AF_INET6 sockets (`ipv6.disable=1`), or no `::`
/// to bind (`net.ipv6.conf.all.disable_ipv6=1`).
pub fn ipv6_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
    )
}

/// A non-blocking listening TCP socket on `addr`, accepting IPv4 too when `dual_stack`
/// (whatever the host's `net.ipv6.bindv6only`).
pub fn listen(addr: SocketAddr, dual_stack: bool, backlog: i32) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if dual_stack {
        socket.set_only_v6(false)?;
    }
    // A restarted process rebinds while its old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}
