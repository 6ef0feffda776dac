//! Where the API listens. The default, `:9420`, is every address of the host on both IP
//! families: one dual-stack IPv6 socket (`[::]:9420`, IPv4 clients arriving as mapped
//! addresses), or `0.0.0.0:9420` with one log line where the host has IPv6 disabled. An
//! address written out (`0.0.0.0:9420`, `[::1]:9420`) is bound as given, an error if it
//! cannot be.

use microbench::net;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::io;
use std::net::{Ipv6Addr, SocketAddr};
use std::str::FromStr;
use tokio::net::TcpListener;

/// Pending connections the kernel queues (tokio's own bind uses the same).
const BACKLOG: i32 = 1024;

/// A listen setting: `:PORT` or `ADDR:PORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// `:PORT`: every address of the host, IPv6 and IPv4 where the host has both.
    AnyHost(u16),
    /// One address, as given.
    Addr(SocketAddr),
}

impl FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Listen, String> {
        let bad = || {
            format!(
                "listen `{text}`: expected :PORT (every address, IPv6 and IPv4) or ADDR:PORT \
                 (0.0.0.0:9420, [::1]:9420), port 0 to 65535"
            )
        };
        match text.strip_prefix(':') {
            Some(port) => port.parse().map(Listen::AnyHost).map_err(|_| bad()),
            None => text.parse().map(Listen::Addr).map_err(|_| bad()),
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::AnyHost(port) => write!(f, ":{port}"),
            Listen::Addr(addr) => write!(f, "{addr}"),
        }
    }
}

impl Serialize for Listen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Listen, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Binds `listen`; on failure, the address that failed and why.
pub fn bind(listen: Listen) -> Result<TcpListener, (SocketAddr, io::Error)> {
    let (std, at) = match listen {
        Listen::Addr(addr) => (
            net::listen(addr, false, BACKLOG).map_err(|e| (addr, e))?,
            addr,
        ),
        Listen::AnyHost(port) => {
            let (listener, ipv4_only) = net::listen_any(port, BACKLOG)?;
            if let Some(e) = ipv4_only {
                tracing::warn!("IPv6 is not available on this host ({e}): listening on IPv4 only");
            }
            (listener, SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        }
    };
    TcpListener::from_std(std).map_err(|e| (at, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpStream};

    #[test]
    fn listen_reads_a_port_alone_or_an_address() {
        assert_eq!(":9420".parse(), Ok(Listen::AnyHost(9420)));
        assert_eq!(
            "0.0.0.0:9420".parse(),
            Ok(Listen::Addr(SocketAddr::from(([0, 0, 0, 0], 9420))))
        );
        assert_eq!(
            "[::1]:0".parse(),
            Ok(Listen::Addr(SocketAddr::from((Ipv6Addr::LOCALHOST, 0))))
        );
        for bad in ["9420", ":", ":70000", "localhost:9420", "[::1]"] {
            let err = bad.parse::<Listen>().unwrap_err();
            assert!(
                err.contains(&format!("`{bad}`")) && err.contains(":PORT"),
                "{err}"
            );
        }
        assert_eq!(Listen::AnyHost(9420).to_string(), ":9420");
        assert_eq!(
            "[::1]:80".parse::<Listen>().unwrap().to_string(),
            "[::1]:80"
        );
    }

    /// The default form serves IPv4 and, where the host has IPv6, IPv6 clients on one port.
    #[tokio::test]
    async fn any_host_accepts_ipv4_and_ipv6() {
        let listener = bind(Listen::AnyHost(0)).unwrap();
        let bound = listener.local_addr().unwrap();
        TcpStream::connect((Ipv4Addr::LOCALHOST, bound.port())).unwrap();
        if bound.is_ipv6() {
            TcpStream::connect((Ipv6Addr::LOCALHOST, bound.port())).unwrap();
        }
    }

    #[tokio::test]
    async fn an_address_given_is_bound_as_given_or_fails() {
        let listener = bind(Listen::Addr(SocketAddr::from(([127, 0, 0, 1], 0)))).unwrap();
        let taken = listener.local_addr().unwrap();
        assert!(taken.is_ipv4());
        let (addr, e) = bind(Listen::Addr(taken)).unwrap_err();
        assert_eq!(addr, taken);
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        // Not an address of this host: no IPv4 fallback for a written-out address.
        let elsewhere = SocketAddr::from(([192, 0, 2, 1], 0));
        assert_eq!(bind(Listen::Addr(elsewhere)).unwrap_err().0, elsewhere);
    }
}
