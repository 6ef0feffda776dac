//! A small TCP rendezvous at `MASTER_ADDR:MASTER_PORT` (issue 12), what NCCL's bootstrap and
//! torch's TCPStore do, so that no MPI library is needed: rank 0 listens, every other rank
//! connects (retrying until the deadline) and says [`Hello`], with the job's id; rank 0
//! refuses a hello of another job and answers each of its own with the whole [`Roster`]
//! (and, for NCCL, the unique id). Rank 0 listens on both IP families ([`crate::net`]), or
//! on the loopback alone where `MASTER_ADDR` is a loopback address. Under NCCL every rank then measures and
//! sends rank 0 its timings ([`Rendezvous::gather`]), or why it failed. At the end rank 0 sends
//! every rank still in the job one final message (the records, for each node's state file).
//!
//! Messages are JSON, each preceded by its length as a big-endian u32, and at most
//! [`MAX_MESSAGE_BYTES`], so a stray client cannot make a rank allocate without bound.

use crate::error::{Error, Result};
use crate::net;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The largest message a rank accepts: a fabric run's records for thousands of pairs fit.
pub const MAX_MESSAGE_BYTES: u32 = 64 << 20;

/// How long rank 0 waits for the hello of a connection it accepted.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Pause between connection attempts while rank 0 is not yet listening.
const RETRY: Duration = Duration::from_millis(100);

/// Connections rank 0's kernel queues: every rank of a large job connects at once (the
/// kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 4096;

/// What a rank tells rank 0 about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The job's id ([`crate::launcher::Placement::job_id`]); rank 0 refuses another.
    /// Empty from a microbench that sent none.
    #[serde(default)]
    pub job: String,
    /// Global rank.
    pub rank: u32,
    /// The world size this rank was started with; every rank must agree.
    pub world: u32,
    /// Rank on its node, and the GPU it drives.
    pub local_rank: u32,
    /// Its node (launcher, `MESHFIT_NODE_NAME` or `--node-name`).
    pub node: String,
    /// The machine's host name.
    pub host: String,
    /// Whether its GPU runs someone else's work; such a rank's node leaves the job.
    pub busy: bool,
    /// `nccl` or `sim`; every rank must agree.
    pub backend: String,
    /// Sim profile.
    pub profile: Option<String>,
    /// Sim faults on its node, in `--fault` spelling.
    pub faults: Vec<String>,
    /// The NVLink fabric of its GPU, so that rank 0 can count the NVLink domains a group's
    /// ranks span; `None` where unknown (and from a microbench that sent none).
    #[serde(default)]
    pub nvlink_fabric: Option<crate::discovery::NvlinkFabric>,
    /// Why this rank cannot measure (no driver, its GPU not visible, NCCL missing): rank 0
    /// ends the job naming it once every rank has arrived, so that no rank waits for it in
    /// NCCL's init, which has no timeout of its own.
    #[serde(default)]
    pub error: Option<String>,
}

/// Every rank's [`Hello`], in rank order, and what rank 0 hands out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roster {
    /// One per rank, in rank order.
    pub members: Vec<Hello>,
    /// NCCL's unique id (128 bytes), for the nccl backend.
    pub nccl_id: Option<Vec<u8>>,
}

/// Rank 0's answer to a hello: the roster, or why the job ends.
#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Roster(Roster),
    Abort(String),
    /// This rank is not of rank 0's job: why.
    Refused(String),
}

/// What a rank sends rank 0 after its measurements: its result, or why it failed.
#[derive(Debug, Serialize, Deserialize)]
enum Report<T> {
    Done(T),
    Failed(String),
}

/// A joined job: the roster and the connections to finish it with.
#[derive(Debug)]
pub struct Rendezvous {
    /// Everyone in the job.
    pub roster: Roster,
    /// Rank 0: one stream per other rank, by rank. Others: the stream to rank 0.
    streams: Vec<(u32, TcpStream)>,
}

/// Where the rendezvous is, who this rank is, and how long to wait.
#[derive(Debug, Clone)]
pub struct Meeting {
    /// `MASTER_ADDR`.
    pub addr: String,
    /// `MASTER_PORT`.
    pub port: u16,
    /// How long rank 0 waits for every rank, and the others for rank 0.
    pub timeout: Duration,
}

impl Meeting {
    /// `MASTER_ADDR` without the brackets an IPv6 address may be written with.
    fn host(&self) -> &str {
        let a = self.addr.as_str();
        a.strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(a)
    }

    /// `host:port`, an IPv6 address in brackets.
    fn place(&self) -> String {
        match self.host().parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            _ => format!("{}:{}", self.host(), self.port),
        }
    }

    fn error(&self, message: String) -> Error {
        Error::Rendezvous {
            at: self.place(),
            message,
        }
    }
}

/// Joins the job as `hello.rank`: rank 0 serves, the others connect. `nccl_id` is what rank 0
/// hands out.
pub fn join(meeting: &Meeting, hello: Hello, nccl_id: Option<Vec<u8>>) -> Result<Rendezvous> {
    if hello.rank == 0 {
        serve(meeting, hello, nccl_id)
    } else {
        connect(meeting, hello)
    }
}

fn serve(meeting: &Meeting, hello: Hello, nccl_id: Option<Vec<u8>>) -> Result<Rendezvous> {
    let deadline = Instant::now() + meeting.timeout;
    let listener = listener(meeting)?;
    let world = hello.world;
    let job = hello.job.clone();
    let mut members: Vec<Option<Hello>> = vec![None; world as usize];
    let mut streams: Vec<(u32, TcpStream)> = Vec::new();
    // Why each refused peer was refused, for the error when the job's own never come.
    let mut refused: Vec<String> = Vec::new();
    let host = hello.host.clone();
    members[0] = Some(hello);
    let result = (|| {
        while members.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| meeting.error(e.to_string()))?;
                    // A rank sends its hello as soon as it connects; a client that stays
                    // silent must not hold the others' accepts until the deadline.
                    let left = deadline.saturating_duration_since(Instant::now());
                    set_timeouts(
                        &stream,
                        Some(left.clamp(Duration::from_millis(1), HELLO_WAIT)),
                    )
                    .map_err(|e| meeting.error(e.to_string()))?;
                    // A stray or broken client costs its connection, not the job.
                    let Ok(h) = receive::<Hello>(&mut stream) else {
                        continue;
                    };
                    // A rank of another job (two jobs on one port) is refused and this job
                    // goes on waiting for its own.
                    if h.job != job {
                        let why = other_job(&h, &job, &host);
                        eprintln!("microbench: rendezvous: {why}");
                        let _ = send(&mut stream, &Reply::Refused(why.clone()));
                        refused.push(why);
                        continue;
                    }
                    check_hello(&h, &members, world).map_err(|m| meeting.error(m))?;
                    let rank = h.rank;
                    members[rank as usize] = Some(h);
                    streams.push((rank, stream));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let mut why = missing(&members, meeting.timeout);
                        if !refused.is_empty() {
                            why += &format!("; refused: {}", refused.join("; "));
                        }
                        return Err(meeting.error(why));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(meeting.error(format!("accept: {e}"))),
            }
        }
        failed(&members).map_or(Ok(()), |why| Err(meeting.error(why)))
    })();
    if let Err(err) = result {
        // The ranks already here learn why, instead of waiting out their own timeout.
        for (_, stream) in &mut streams {
            let _ = send(stream, &Reply::Abort(err.to_string()));
        }
        return Err(err);
    }
    let roster = Roster {
        members: members.into_iter().flatten().collect(),
        nccl_id,
    };
    let reply = Reply::Roster(roster.clone());
    for (rank, stream) in &mut streams {
        send(stream, &reply)
            .map_err(|e| meeting.error(format!("sending the roster to rank {rank}: {e}")))?;
    }
    streams.sort_by_key(|(rank, _)| *rank);
    Ok(Rendezvous { roster, streams })
}

/// Rank 0's listening socket at `MASTER_PORT`. `MASTER_ADDR` is how the others reach rank
/// 0: often a name or address this host does not own (a Service, a NAT), or a host name it
/// resolves to itself differently (127.0.1.1 in /etc/hosts), and of either IP family. So
/// rank 0 listens on every address of both families (dual-stack `[::]`), IPv4 alone only
/// where the host has no IPv6 and `MASTER_ADDR` is not an IPv6 address, and on the loopback
/// alone where `MASTER_ADDR` is a loopback address: a job on one machine stays on it.
fn listener(meeting: &Meeting) -> Result<TcpListener> {
    let cannot = |at: SocketAddr, e: std::io::Error| {
        meeting.error(format!("rank 0 cannot listen on {at}: {e}"))
    };
    let ip = meeting.host().parse::<IpAddr>().ok();
    if let Some(ip) = ip.filter(IpAddr::is_loopback) {
        let at = SocketAddr::from((ip, meeting.port));
        return net::listen(at, false, BACKLOG).map_err(|e| cannot(at, e));
    }
    let (listener, ipv4_only) =
        net::listen_any(meeting.port, BACKLOG).map_err(|(at, e)| cannot(at, e))?;
    if let Some(e) = ipv4_only {
        if ip.is_some_and(|ip| ip.is_ipv6()) {
            return Err(meeting.error(format!(
                "MASTER_ADDR is an IPv6 address and this host has no IPv6 ({e})"
            )));
        }
        eprintln!("microbench: rendezvous: IPv6 is not available on this host ({e}); rank 0 listens on IPv4 only");
    }
    Ok(listener)
}

/// Why rank 0 of job `job` on `host` refuses `h`: both ids, and where they come from.
fn other_job(h: &Hello, job: &str, host: &str) -> String {
    let theirs = if h.job.is_empty() {
        "no job id".to_string()
    } else {
        format!("job id `{}`", h.job)
    };
    format!(
        "rank {} on {} presented {theirs}, and this rendezvous (rank 0 on {host}) is job \
         `{job}`: a rank of another job on the same MASTER_ADDR:MASTER_PORT, or one started \
         with another --job-id or MESHFIT_JOB_ID",
        h.rank, h.host
    )
}

/// Why a hello cannot join: a rank outside the world, a duplicate, another world size.
fn check_hello(
    h: &Hello,
    members: &[Option<Hello>],
    world: u32,
) -> std::result::Result<(), String> {
    if h.world != world {
        return Err(format!(
            "rank {} on {} was started with world size {}, rank 0 with {world}",
            h.rank, h.host, h.world
        ));
    }
    match members.get(h.rank as usize) {
        None => Err(format!(
            "rank {} on {}: ranks are 0 to {}",
            h.rank,
            h.host,
            world - 1
        )),
        Some(Some(first)) => Err(format!(
            "rank {} joined twice, from {} and from {}",
            h.rank, first.host, h.host
        )),
        Some(None) => Ok(()),
    }
}

/// The ranks that cannot measure, with their hosts and reasons, the same reason once.
fn failed(members: &[Option<Hello>]) -> Option<String> {
    let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
    for m in members.iter().flatten() {
        if let Some(why) = &m.error {
            let who = format!("{} on {}", m.rank, m.host);
            match reasons.iter_mut().find(|(w, _)| *w == why.as_str()) {
                Some((_, ranks)) => ranks.push(who),
                None => reasons.push((why, vec![who])),
            }
        }
    }
    (!reasons.is_empty()).then(|| {
        let lines: Vec<String> = reasons
            .iter()
            .map(|(why, ranks)| format!("rank {}: {why}", ranks.join(", rank ")))
            .collect();
        format!("the job cannot run: {}", lines.join("; "))
    })
}

fn missing(members: &[Option<Hello>], timeout: Duration) -> String {
    let ranks: Vec<String> = members
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_none())
        .map(|(r, _)| r.to_string())
        .collect();
    let hosts: std::collections::BTreeSet<&str> =
        members.iter().flatten().map(|m| m.host.as_str()).collect();
    format!(
        "rank{} {} never arrived within {} s (arrived: {} of {} ranks, from {})",
        if ranks.len() == 1 { "" } else { "s" },
        ranks.join(", "),
        timeout.as_secs_f64(),
        members.len() - ranks.len(),
        members.len(),
        hosts.into_iter().collect::<Vec<_>>().join(", ")
    )
}

fn connect(meeting: &Meeting, hello: Hello) -> Result<Rendezvous> {
    let deadline = Instant::now() + meeting.timeout;
    let rank = hello.rank;
    let mut stream = loop {
        let attempt = (meeting.host(), meeting.port)
            .to_socket_addrs()
            .and_then(|addrs| connect_any(addrs, deadline));
        match attempt {
            Ok(stream) => break stream,
            // Rank 0 may start later than this rank; keep trying until the deadline.
            Err(e) if Instant::now() + RETRY < deadline => {
                let _ = e;
                std::thread::sleep(RETRY);
            }
            Err(e) => {
                return Err(meeting.error(format!(
                    "rank {rank} could not reach rank 0 within {} s: {e}",
                    meeting.timeout.as_secs_f64()
                )))
            }
        }
    };
    // Rank 0 answers once every rank has arrived, which takes up to its own timeout.
    set_timeouts(&stream, Some(meeting.timeout + Duration::from_secs(5)))
        .map_err(|e| meeting.error(e.to_string()))?;
    send(&mut stream, &hello).map_err(|e| meeting.error(format!("rank {rank} hello: {e}")))?;
    match receive::<Reply>(&mut stream) {
        Ok(Reply::Roster(roster)) => Ok(Rendezvous {
            roster,
            streams: vec![(0, stream)],
        }),
        Ok(Reply::Abort(why)) => Err(meeting.error(format!("rank 0 ended the job: {why}"))),
        Ok(Reply::Refused(why)) => Err(meeting.error(format!("rank 0 refused rank {rank}: {why}"))),
        Err(e) => Err(meeting.error(format!("rank {rank} waiting for the roster: {e}"))),
    }
}

/// The first of `addrs` (each address `MASTER_ADDR` resolves to: IPv6 and IPv4) that
/// takes a connection before `deadline`; the last one's error when none does.
fn connect_any(
    addrs: impl Iterator<Item = SocketAddr>,
    deadline: Instant,
) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(ErrorKind::NotFound, "no address");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(1))) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Rendezvous {
    /// Rank 0: sends `message` to each rank for which `to` holds. Other ranks: waits for rank
    /// 0's message, however long the run takes; rank 0 ending, even killed, closes the
    /// connection and ends the wait.
    pub fn finish<T: Serialize + DeserializeOwned>(
        mut self,
        message: Option<&T>,
        to: impl Fn(u32) -> bool,
    ) -> Result<Option<T>> {
        let io = |rank: u32, e: std::io::Error| Error::Rendezvous {
            at: "the job".into(),
            message: format!("final message with rank {rank}: {e}"),
        };
        match message {
            Some(m) => {
                for (rank, stream) in self.streams.iter_mut().filter(|(r, _)| to(*r)) {
                    send(stream, m).map_err(|e| io(*rank, e))?;
                }
                Ok(None)
            }
            None => {
                let (_, stream) = self.streams.first_mut().ok_or_else(|| Error::Rendezvous {
                    at: "the job".into(),
                    message: "rank 0 has no one to wait for".into(),
                })?;
                set_timeouts(stream, None).map_err(|e| io(0, e))?;
                receive(stream).map(Some).map_err(|e| io(0, e))
            }
        }
    }
}

impl Rendezvous {
    /// Rank 0: every rank's result, in rank order, for the ranks for which `from` holds (its
    /// own `mine` among them where `from(0)`); the first rank that failed, or whose connection
    /// closed (it died), ends the wait with an error naming it and its host. Other ranks:
    /// sends `mine`, or why they failed, to rank 0 and gives `None`. There is no timeout: the
    /// ranks are measuring, each loop bounded by its own watchdog (kernels' timer).
    pub fn gather<T: Serialize + DeserializeOwned>(
        &mut self,
        rank: u32,
        mine: std::result::Result<T, String>,
        from: impl Fn(u32) -> bool,
    ) -> Result<Option<Vec<(u32, T)>>> {
        let io = |rank: u32, e: std::io::Error| Error::Rendezvous {
            at: "the job".into(),
            message: format!("results of rank {rank}: {e}"),
        };
        if rank != 0 {
            let report = match mine {
                Ok(t) => Report::Done(t),
                Err(why) => Report::Failed(why),
            };
            let (_, stream) = self.streams.first_mut().ok_or_else(|| Error::Rendezvous {
                at: "the job".into(),
                message: format!("rank {rank} has no connection to rank 0"),
            })?;
            send(stream, &report).map_err(|e| io(0, e))?;
            return Ok(None);
        }
        let own = mine.map_err(|why| Error::Job(format!("rank 0: {why}")))?;
        let mut all = Vec::with_capacity(self.streams.len() + 1);
        if from(0) {
            all.push((0, own));
        }
        let hosts = &self.roster.members;
        for (r, stream) in self.streams.iter_mut().filter(|(r, _)| from(*r)) {
            let host = hosts.get(*r as usize).map_or("?", |m| m.host.as_str());
            set_timeouts(stream, None).map_err(|e| io(*r, e))?;
            match receive::<Report<T>>(stream) {
                Ok(Report::Done(t)) => all.push((*r, t)),
                Ok(Report::Failed(why)) => {
                    return Err(Error::Job(format!("rank {r} on {host} failed: {why}")))
                }
                Err(e) => {
                    return Err(Error::Job(format!(
                        "rank {r} on {host} ended without its results ({e}); see its own error"
                    )))
                }
            }
        }
        Ok(Some(all))
    }
}

fn set_timeouts(stream: &TcpStream, timeout: Option<Duration>) -> std::io::Result<()> {
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)
}

fn send<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let body = serde_json::to_vec(message)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_MESSAGE_BYTES)
        .ok_or_else(|| {
            std::io::Error::new(
                ErrorKind::InvalidData,
                format!("message of {} bytes, above {MAX_MESSAGE_BYTES}", body.len()),
            )
        })?;
    stream.write_all(&len.to_be_bytes())?;
    stream.write_all(&body)?;
    stream.flush()
}

fn receive<T: DeserializeOwned>(stream: &mut TcpStream) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > MAX_MESSAGE_BYTES {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!("message of {len} bytes, above {MAX_MESSAGE_BYTES}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body)?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Rank `rank` of `world`, `per_node` ranks on each sim node `n<i>`.
    pub(crate) fn hello_on(rank: u32, world: u32, per_node: u32) -> Hello {
        Hello {
            job: "job-1".into(),
            rank,
            world,
            local_rank: rank % per_node,
            node: format!("n{}", rank / per_node),
            host: "localhost".into(),
            busy: false,
            backend: "sim".into(),
            profile: Some("dgx-h100".into()),
            faults: vec![],
            nvlink_fabric: None,
            error: None,
        }
    }

    fn hello(rank: u32, world: u32) -> Hello {
        hello_on(rank, world, 2)
    }

    fn meeting(timeout_ms: u64) -> Meeting {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Meeting {
            addr: "127.0.0.1".into(),
            port,
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    #[test]
    fn every_rank_gets_the_roster_and_the_final_message() {
        let m = meeting(10_000);
        let others: Vec<_> = (1..4)
            .map(|r| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let joined = join(&m, hello(r, 4), None).unwrap();
                    let roster = joined.roster.clone();
                    (roster, joined.finish::<String>(None, |_| true).unwrap())
                })
            })
            .collect();
        let root = join(&m, hello(0, 4), Some(vec![7; 128])).unwrap();
        let roster = root.roster.clone();
        assert_eq!(
            roster.members,
            (0..4).map(|r| hello(r, 4)).collect::<Vec<_>>()
        );
        root.finish(Some(&"done".to_string()), |_| true).unwrap();
        for t in others {
            let (theirs, last) = t.join().unwrap();
            assert_eq!(theirs, roster);
            assert_eq!(last.as_deref(), Some("done"));
        }
    }

    /// Whether this machine has an IPv6 loopback to bind; says why not when it has none.
    fn ipv6_loopback() -> bool {
        match TcpListener::bind("[::1]:0") {
            Ok(_) => true,
            Err(e) => {
                println!("skipped: no IPv6 loopback here ([::1]: {e})");
                false
            }
        }
    }

    /// A job whose MASTER_ADDR is IPv6 (`::1`, also written `[::1]`) meets there (issue 30:
    /// rank 0 bound IPv4 only, so no rank could reach it).
    #[test]
    fn ranks_meet_at_an_ipv6_master_addr() {
        if !ipv6_loopback() {
            return;
        }
        let port = TcpListener::bind("[::1]:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let at = |addr: &str| Meeting {
            addr: addr.into(),
            port,
            timeout: Duration::from_secs(10),
        };
        assert_eq!(at("::1").place(), format!("[::1]:{port}"));
        let others: Vec<_> = [(1, "[::1]"), (2, "::1")]
            .into_iter()
            .map(|(r, addr)| {
                let m = at(addr);
                std::thread::spawn(move || join(&m, hello(r, 3), None).unwrap().roster)
            })
            .collect();
        let root = join(&at("::1"), hello(0, 3), None).unwrap();
        for t in others {
            assert_eq!(t.join().unwrap(), root.roster);
        }
    }

    /// Where MASTER_ADDR is a name, rank 0 listens on both families: ranks that reach it
    /// over IPv4 and over IPv6 meet in one job.
    #[test]
    fn rank_0_takes_ipv4_and_ipv6_ranks_where_master_addr_is_a_name() {
        let m = meeting(10_000);
        let v6 = ipv6_loopback();
        let peers: Vec<(u32, &str)> = if v6 {
            vec![(1, "127.0.0.1"), (2, "::1")]
        } else {
            vec![(1, "127.0.0.1"), (2, "127.0.0.1")]
        };
        let others: Vec<_> = peers
            .into_iter()
            .map(|(r, addr)| {
                let m = Meeting {
                    addr: addr.into(),
                    ..m.clone()
                };
                std::thread::spawn(move || join(&m, hello(r, 3), None).unwrap().roster)
            })
            .collect();
        let name = Meeting {
            addr: "localhost".into(),
            ..m.clone()
        };
        let root = join(&name, hello(0, 3), None).unwrap();
        for t in others {
            assert_eq!(t.join().unwrap(), root.roster);
        }
    }

    /// A rank presenting another job's id is refused with both ids named, and the job goes
    /// on to meet its own ranks (issue 30: rank 0 took any client).
    #[test]
    fn a_rank_of_another_job_is_refused_naming_both_ids() {
        let m = meeting(10_000);
        let stray = {
            let m = m.clone();
            std::thread::spawn(move || {
                let h = Hello {
                    job: "job-2".into(),
                    ..hello(1, 2)
                };
                join(&m, h, None).unwrap_err().to_string()
            })
        };
        let root = {
            let m = m.clone();
            std::thread::spawn(move || join(&m, hello(0, 2), None).map(|r| r.roster))
        };
        let err = stray.join().unwrap();
        assert!(
            err.contains(
                "rank 0 refused rank 1: rank 1 on localhost presented job id `job-2`, and this \
                 rendezvous (rank 0 on localhost) is job `job-1`"
            ),
            "{err}"
        );
        let own = join(&m, hello(1, 2), None).unwrap();
        assert_eq!(root.join().unwrap().unwrap(), own.roster);
    }

    /// The refused are named when the job's own ranks never come.
    #[test]
    fn a_job_that_only_saw_strangers_names_them_at_its_deadline() {
        let m = meeting(500);
        let stray = {
            let m = m.clone();
            std::thread::spawn(move || {
                let h = Hello {
                    job: String::new(),
                    ..hello(1, 2)
                };
                join(&m, h, None).unwrap_err().to_string()
            })
        };
        let err = join(&m, hello(0, 2), None).unwrap_err().to_string();
        assert!(
            err.contains("rank 1 never arrived")
                && err.contains("refused: rank 1 on localhost presented no job id"),
            "{err}"
        );
        assert!(stray.join().unwrap().contains("presented no job id"));
    }

    #[test]
    fn a_missing_rank_is_named_and_the_others_told() {
        let m = meeting(500);
        let one = {
            let m = m.clone();
            std::thread::spawn(move || join(&m, hello(1, 3), None).unwrap_err().to_string())
        };
        let err = join(&m, hello(0, 3), None).unwrap_err().to_string();
        assert!(err.contains("rank 2 never arrived within 0.5 s"), "{err}");
        let theirs = one.join().unwrap();
        assert!(
            theirs.contains("rank 0 ended the job: ") && theirs.contains("rank 2 never"),
            "{theirs}"
        );
    }

    #[test]
    fn a_rank_without_rank_0_gives_up_at_its_deadline() {
        let m = meeting(300);
        let err = join(&m, hello(1, 2), None).unwrap_err().to_string();
        assert!(
            err.contains("rank 1 could not reach rank 0 within 0.3 s"),
            "{err}"
        );
    }

    /// Issue 12: every rank's timings reach rank 0 in rank order, whatever order they come in.
    #[test]
    fn gather_gives_rank_0_every_ranks_result_in_rank_order() {
        let m = meeting(10_000);
        let others: Vec<_> = (1..3)
            .map(|r| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let mut joined = join(&m, hello(r, 3), None).unwrap();
                    std::thread::sleep(Duration::from_millis(u64::from(3 - r) * 50));
                    let mine: std::result::Result<Vec<f64>, String> = Ok(vec![f64::from(r); 2]);
                    assert!(joined.gather(r, mine, |_| true).unwrap().is_none());
                })
            })
            .collect();
        let mut root = join(&m, hello(0, 3), None).unwrap();
        let all = root.gather(0, Ok(vec![0.5]), |_| true).unwrap().unwrap();
        assert_eq!(
            all,
            vec![(0, vec![0.5]), (1, vec![1.0, 1.0]), (2, vec![2.0, 2.0])]
        );
        for t in others {
            t.join().unwrap();
        }
    }

    /// A rank that fails tells rank 0, which names it and its host instead of waiting.
    #[test]
    fn a_failed_rank_is_named_by_rank_0() {
        let m = meeting(10_000);
        let one = {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut joined = join(&m, hello(1, 2), None).unwrap();
                let failed: std::result::Result<u32, String> =
                    Err("ncclCommInitRank on GPU 1: ncclSystemError".into());
                joined.gather(1, failed, |_| true).unwrap();
            })
        };
        let mut root = join(&m, hello(0, 2), None).unwrap();
        let err = root.gather(0, Ok(7u32), |_| true).unwrap_err().to_string();
        assert_eq!(
            err,
            "job: rank 1 on localhost failed: ncclCommInitRank on GPU 1: ncclSystemError"
        );
        one.join().unwrap();
    }

    /// A report over [`MAX_MESSAGE_BYTES`] is refused before anything is allocated for it, and
    /// the rank is named.
    #[test]
    fn an_oversized_report_is_refused() {
        let m = meeting(10_000);
        let one = {
            let m = m.clone();
            std::thread::spawn(move || {
                let joined = join(&m, hello(1, 2), None).unwrap();
                let (_, mut stream) = joined.streams.into_iter().next().unwrap();
                stream
                    .write_all(&(MAX_MESSAGE_BYTES + 1).to_be_bytes())
                    .unwrap();
                // Held open until rank 0 has read the length.
                std::thread::sleep(Duration::from_millis(200));
            })
        };
        let mut root = join(&m, hello(0, 2), None).unwrap();
        let err = root.gather(0, Ok(1u8), |_| true).unwrap_err().to_string();
        assert!(
            err.contains("rank 1 on localhost ended without its results")
                && err.contains(&format!("above {MAX_MESSAGE_BYTES}")),
            "{err}"
        );
        one.join().unwrap();
    }

    /// A rank that cannot measure says why in its hello; rank 0 ends the job at once, naming
    /// every such rank, and every rank hears it, none waiting in NCCL's init.
    #[test]
    fn ranks_that_cannot_run_end_the_job_at_the_rendezvous() {
        let m = meeting(10_000);
        let why = "no NVIDIA driver: libcuda.so.1 cannot be loaded";
        let others: Vec<_> = (1..3)
            .map(|r| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let h = Hello {
                        error: (r == 2).then(|| why.to_string()),
                        ..hello(r, 3)
                    };
                    join(&m, h, None).unwrap_err().to_string()
                })
            })
            .collect();
        let root = Hello {
            error: Some(why.into()),
            ..hello(0, 3)
        };
        let err = join(&m, root, None).unwrap_err().to_string();
        let expected =
            format!("the job cannot run: rank 0 on localhost, rank 2 on localhost: {why}");
        assert!(err.ends_with(&expected), "{err}");
        for t in others {
            let theirs = t.join().unwrap();
            assert!(
                theirs.contains("rank 0 ended the job: ") && theirs.ends_with(&expected),
                "{theirs}"
            );
        }
    }
}
