use super::*;

fn src(selector: Option<&str>, window: Option<&str>) -> PromSource {
    PromSource {
        url: "http://p:9090".into(),
        bearer: None,
        basic: None,
        timeout: Duration::from_secs(5),
        selector: selector.map(Into::into),
        window: window.map(Into::into),
    }
}

/// A sample with `labels` and value `v`, as a reply's vector holds it.
fn sample(labels: &[(&'static str, &str)], v: &str) -> Sample {
    Sample {
        metric: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        value: v.to_string(),
    }
}

fn at(url: &str) -> PromSource {
    PromSource {
        url: url.into(),
        ..src(None, None)
    }
}

#[test]
fn urls_are_built_by_a_parser_and_passwords_never_shown() {
    let q = at("http://prom.example/sub/?token=x")
        .query_url("up")
        .unwrap();
    assert_eq!(
        q.as_str(),
        "http://prom.example/sub/api/v1/query?token=x&query=up"
    );
    let s = at("https://ops:hunter2@prom.example:9090");
    assert_eq!(s.redacted_url(), "https://ops:***@prom.example:9090/");
    // Issue 31: a query token was written into the snapshot's `source`.
    assert_eq!(
        at("http://prom.example/sub/?token=x&org=7").redacted_url(),
        "http://prom.example/sub/?token=***&org=***"
    );
    assert!(!s
        .query_url("up")
        .unwrap()
        .as_str()
        .contains("api/v1/query/"));
    let err = at("prom.example:9090").query_url("up").unwrap_err();
    assert!(err.starts_with("scheme `prom.example`"), "{err}");
    let err = at("not a url").query_url("up").unwrap_err();
    assert!(err.starts_with("not a URL"), "{err}");
}

#[test]
fn replies_that_are_not_an_instant_vector_say_what_they_are() {
    let ok = reqwest::StatusCode::OK;
    let err = |body: &str| match parse_reply(ok, body.as_bytes(), &[]).unwrap_err() {
        ReplyError::Refused(message) => message,
        ReplyError::Read(e) => panic!("a slice is always read: {e}"),
    };
    assert_eq!(err(""), "HTTP 200 OK: empty reply");
    assert!(err("<html>login</html>").contains("not JSON but HTML"));
    assert!(err("{\"foo\": 1").contains("not a Prometheus API reply"));
    assert!(
        err(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
            .contains("result type `matrix`, expected `vector`")
    );
    // Issue 31, item 3: a result that is no vector is skipped, not read as samples.
    assert!(
        err(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#)
            .contains("result type `scalar`, expected `vector`")
    );
    let wrong =
        err(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#);
    assert!(
        wrong.starts_with("HTTP 200 OK: the vector's samples do not parse: missing field `value`"),
        "{wrong}"
    );
    let wrong = err(
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":1},"value":[1,"2"]}]}}"#,
    );
    assert!(
        wrong.contains(
            "the vector's samples do not parse: invalid type: integer `1`, expected a string"
        ),
        "{wrong}"
    );
    assert_eq!(
        err(r#"{"status":"error","error":"parse error at char 3"}"#),
        "parse error at char 3"
    );
    let samples = parse_reply(
        ok,
        &br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"hostname":"n1"},"value":[1,"2"]}]}}"#[..],
        &[],
    )
    .unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(
        read_reply(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#),
        Ok(0)
    );
}

#[test]
fn a_reply_past_the_limit_is_refused() {
    let endless = std::io::repeat(b' ');
    let err = std::io::copy(&mut Capped::new(endless, 1 << 20), &mut std::io::sink())
        .unwrap_err()
        .to_string();
    assert_eq!(err, "the reply is larger than 1 MiB: refused");
    let mut exact = Vec::new();
    Capped::new(&[b' '; 1 << 20][..], 1 << 20)
        .read_to_end(&mut exact)
        .unwrap();
    assert_eq!(exact.len(), 1 << 20);
}

#[test]
fn a_collective_on_zero_ranks_is_skipped_by_name() {
    let sample = sample(
        &[
            ("hostname", "n3"),
            ("collective", "all_reduce"),
            ("scope", "intra_node"),
            ("ranks", "0"),
            ("size_bytes", "1048576"),
        ],
        "0.001",
    );
    let families = Families {
        collectives: vec![sample],
        ..Families::default()
    };
    let (m, _) = to_measurements(&src(None, None), 0.0, families).unwrap();
    assert!(m.records.is_empty());
    assert!(
        m.notes[0]
            .contains("n3 meshfit_collective_time_seconds: ranks 0: expected 1 to 1048576 ranks"),
        "{:?}",
        m.notes
    );
}

#[test]
fn skipped_samples_name_node_family_and_reason() {
    let nan = sample(&[("hostname", "n7"), ("gpu", "0")], "NaN");
    assert_eq!(
        skip_reason(&nan, "meshfit_gemm_flops_per_second"),
        "n7 meshfit_gemm_flops_per_second: value `NaN` is not a positive finite number"
    );
    let unlabelled = sample(&[("hostname", "n7")], "1e12");
    assert!(skip_reason(&unlabelled, "meshfit_gemm_flops_per_second")
        .ends_with("lacks the labels of docs/design.md"));
}

#[test]
fn a_refused_connection_and_a_timeout_say_so() {
    // A port nothing listens on: bind, learn the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = at(&format!("http://127.0.0.1:{port}"))
        .fetch(0.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("connection refused or unreachable"), "{err}");
    // A server that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let source = PromSource {
        timeout: Duration::from_millis(300),
        ..at(&format!("http://127.0.0.1:{port}"))
    };
    let err = source.fetch(0.0).unwrap_err().to_string();
    assert!(err.contains("timed out after 0.3 s"), "{err}");
    drop(silent);
}

/// Issue 31, item 5: a server that sends its headers and then one byte every 500 ms kept
/// `tuner fit --timeout 5s` waiting past 120 s, as reqwest's blocking reader restarts the
/// timeout at every read. The timeout covers the whole reply. The server gives up after
/// 20 bytes (10 s), so that a regression fails the test rather than hanging it.
#[test]
fn a_reply_that_drips_times_out_within_the_timeout() {
    use std::io::{Read, Write};
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let drip = std::thread::spawn(move || {
        let (mut conn, _) = server.accept().unwrap();
        let mut request = [0u8; 4096];
        let _ = conn.read(&mut request);
        let header =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
        let _ = conn.write_all(header.as_bytes());
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(500));
            if conn.write_all(b" ").is_err() {
                break;
            }
        }
    });
    let source = PromSource {
        timeout: Duration::from_secs(1),
        ..at(&format!("http://127.0.0.1:{port}"))
    };
    let started = std::time::Instant::now();
    let err = source.fetch(0.0).unwrap_err().to_string();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
    assert!(
        err.contains(&format!("prometheus http://127.0.0.1:{port}:"))
            && err.contains("timed out after 1 s"),
        "{err}"
    );
    drip.join().unwrap();
}

#[test]
fn one_query_per_family_scoped_by_selector_and_window() {
    assert_eq!(
        src(None, None).query_for("meshfit_gpu_info"),
        "meshfit_gpu_info{}"
    );
    assert_eq!(
        src(Some("{pool=\"train-a\"}"), None).query_for("meshfit_gpu_info"),
        "meshfit_gpu_info{pool=\"train-a\"}"
    );
    assert_eq!(
        src(Some("pool=\"a\""), Some("24h")).query_for("meshfit_collective_time_seconds"),
        "last_over_time(meshfit_collective_time_seconds{pool=\"a\"}[24h])"
    );
}

#[test]
fn samples_become_records() {
    let coll = vec![sample(
        &[
            ("collective", "all_reduce"),
            ("scope", "intra_node"),
            ("ranks", "8"),
            ("size_bytes", "1048576"),
            ("backend", "sim"),
            ("hostname", "n1"),
        ],
        "0.0001",
    )];
    let gemm = vec![sample(
        &[
            ("gpu", "3"),
            ("dtype", "bf16"),
            ("m", "8192"),
            ("n", "8192"),
            ("k", "8192"),
            ("backend", "sim"),
            ("hostname", "n1"),
        ],
        "7e14",
    )];
    let mem = vec![sample(
        &[("gpu", "0"), ("path", "hbm"), ("hostname", "n1")],
        "3e12",
    )];
    let stamp = vec![sample(&[("hostname", "n1")], "1700001000")];
    let (m, snap) = to_measurements(
        &src(None, None),
        1_700_002_000.0,
        Families {
            collectives: coll,
            gemms: gemm,
            memory: mem,
            calibrated: stamp,
            ..Families::default()
        },
    )
    .unwrap();
    assert_eq!(m.records.len(), 3);
    let ar = &m.records[0];
    assert_eq!(
        (ar.kind, ar.group.ranks, ar.bytes, ar.backend),
        (Kind::AllReduce, 8, 1 << 20, Backend::Sim)
    );
    assert_eq!(ar.timestamp, Some(1_700_001_000.0));
    assert!((m.records[1].flops.unwrap() / 7e14 - 1.0).abs() < 1e-12);
    assert!((m.records[2].busbw.unwrap() / 3e12 - 1.0).abs() < 1e-12);
    assert_eq!(snap.nodes.len(), 1);
    assert_eq!(snap.time_range.start, 1_700_001_000.0);
}

/// A fabric run's series say how many NVLink domains their ranks spanned: the record keeps
/// it, and a value that is no count drops the series rather than price a cross-rack curve
/// as NVLink.
#[test]
fn the_nvlink_domains_label_is_read_and_a_malformed_one_drops_the_series() {
    let inter = |domains: &'static str| {
        sample(
            &[
                ("collective", "all_reduce"),
                ("scope", "inter_node"),
                ("ranks", "8"),
                ("ranks_per_node", "1"),
                ("nvlink_domains", domains),
                ("size_bytes", "16777216"),
                ("backend", "nccl"),
                ("hostname", "t0"),
            ],
            "0.0003",
        )
    };
    let (m, _) = to_measurements(
        &src(None, None),
        1_700_002_000.0,
        Families {
            collectives: vec![inter("1"), inter("one")],
            fabric_runs: vec![sample(&[("hostname", "t0")], "1700001500")],
            ..Families::default()
        },
    )
    .unwrap();
    assert_eq!(
        m.records
            .iter()
            .map(|r| r.detail.nvlink_domains)
            .collect::<Vec<_>>(),
        [Some(1)]
    );
    assert!(m.notes[0].starts_with("1 series"), "{:?}", m.notes);
}

/// What one agent of a fabric run exports (issue 12): a job-wide all-reduce of 6 ranks, 2
/// per node, and its NIC 1 at 22.5 GB/s to n0. The records key the curve by ranks per node
/// and carry the pair's ends, with the fabric run's time.
#[test]
fn fabric_series_become_inter_node_records() {
    let inter = |per_node: &str| {
        sample(
            &[
                ("collective", "all_reduce"),
                ("scope", "inter_node"),
                ("ranks", "6"),
                ("ranks_per_node", per_node),
                ("size_bytes", "16777216"),
                ("backend", "sim"),
                ("hostname", "n2"),
            ],
            "0.0003",
        )
    };
    let pairs = vec![sample(
        &[
            ("peer_node", "n0"),
            ("gpu", "1"),
            ("backend", "sim"),
            ("hostname", "n2"),
        ],
        "22.5e9",
    )];
    let (m, _) = to_measurements(
        &src(None, None),
        1_700_002_000.0,
        Families {
            collectives: vec![inter("2"), inter("two")],
            pairs,
            calibrated: vec![sample(&[("hostname", "n2")], "1700001000")],
            fabric_runs: vec![sample(&[("hostname", "n2")], "1700001500")],
            ..Families::default()
        },
    )
    .unwrap();
    assert_eq!(
        m.records.len(),
        2,
        "the malformed ranks_per_node is skipped"
    );
    assert!(m.notes[0].starts_with("1 series"), "{:?}", m.notes);
    let ar = &m.records[0];
    assert_eq!(
        (
            ar.group.scope,
            ar.group.ranks,
            ar.detail.ranks_per_node,
            ar.timestamp
        ),
        (Scope::InterNode, 6, Some(2), Some(1_700_001_500.0))
    );
    assert_eq!(crate::fit::members_per_node(ar), 2);
    let p = &m.records[1];
    assert!(crate::fit::pairs::is_pair(p));
    assert_eq!(
        (
            p.group.node.as_deref(),
            p.detail.peer_node.as_deref(),
            p.group.gpus.as_slice()
        ),
        (Some("n2"), Some("n0"), &[1][..])
    );
    assert!((p.busbw.unwrap() / 22.5e9 - 1.0).abs() < 1e-12);
}

/// Issue 31, item 2: two agents (two `instance`s) export one node's all-reduce, the second
/// 10x slower and calibrated later. Whatever the order of the reply, the node's stamp is its
/// newest, the slower figure is kept and the conflict is named.
#[test]
fn r31_2_one_series_from_two_instances_resolves_the_same_in_either_order() {
    let series = |instance: &str, time_s: &str| {
        sample(
            &[
                ("collective", "all_reduce"),
                ("scope", "intra_node"),
                ("ranks", "8"),
                ("size_bytes", "1048576"),
                ("hostname", "n1"),
                ("instance", instance),
            ],
            time_s,
        )
    };
    let stamp = |instance: &str, t: &str| sample(&[("hostname", "n1"), ("instance", instance)], t);
    let read = |flip: bool| {
        let mut collectives = vec![series("a:9400", "0.0001"), series("b:9400", "0.001")];
        let mut calibrated = vec![stamp("a:9400", "1700001000"), stamp("b:9400", "1700002000")];
        if flip {
            collectives.reverse();
            calibrated.reverse();
        }
        let families = Families {
            collectives,
            calibrated,
            ..Families::default()
        };
        let (mut m, _) = to_measurements(&src(None, None), 1_700_003_000.0, families).unwrap();
        m.screen(1_700_003_000.0, None);
        (m.records, m.notes)
    };
    let (records, notes) = read(false);
    assert_eq!((records.clone(), notes.clone()), read(true));
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].timing.time_s, records[0].timestamp),
        (0.001, Some(1_700_002_000.0))
    );
    assert!(
        notes[0].starts_with("conflicting measurements of all_reduce nccl 1048576 B")
            && notes[0].contains("on node n1: 0.001 s measured at 1700002000 and 0.0001 s")
            && notes[0].ends_with("kept 0.001 s measured at 1700002000, the slower of the newest"),
        "{notes:?}"
    );
}

/// What a reply of `meshfit_gpu_info` series (instance, GPU index, model) of node n1 comes
/// to, in the order given: the GPU models by node, the snapshot's GPUs of n1, and the notes
/// once screened; or the refusal.
type GpusRead = (BTreeMap<String, String>, Vec<(u32, String)>, Vec<String>);

fn gpus_read(series: &[(&str, &str, &str)]) -> Result<GpusRead, String> {
    let gpus = series
        .iter()
        .map(|(instance, gpu, model)| {
            sample(
                &[
                    ("hostname", "n1"),
                    ("gpu", gpu),
                    ("model_name", model),
                    ("instance", instance),
                ],
                "1",
            )
        })
        .collect();
    let now = 1_700_003_000.0;
    let families = Families {
        gpus,
        ..Families::default()
    };
    let (mut m, snap) =
        to_measurements(&src(None, None), now, families).map_err(|e| e.to_string())?;
    m.screen(now, None);
    let listed = snap
        .nodes
        .iter()
        .flat_map(|n| n.gpus.iter().map(|g| (g.index, g.model.clone())))
        .collect();
    Ok((m.gpu_models, listed, m.notes))
}

/// Issue 31, item 2: a node took the GPU model of whichever `meshfit_gpu_info` series came
/// last in the reply. Whatever the order: a GPU two instances export alike is one GPU (in
/// the snapshot too); one GPU exported as two models is refused naming the node, the GPU and
/// both models; a node whose GPUs name two models is its lowest index's, with a note. A
/// snapshot file that lists the GPU as another model than Prometheus does is refused by the
/// same rule, naming both sources, in the same words whichever is read first.
#[test]
fn r31_2_a_gpu_exported_twice_reads_the_same_in_either_order() {
    let h100 = "NVIDIA H100 80GB HBM3";
    let a100 = "NVIDIA A100-SXM4-80GB";
    let both = |series: &[(&str, &str, &str)]| {
        let mut reversed = series.to_vec();
        reversed.reverse();
        let read = gpus_read(series);
        assert_eq!(read, gpus_read(&reversed));
        read
    };
    let (models, listed, _) = both(&[
        ("a:9400", "0", h100),
        ("a:9400", "1", h100),
        ("b:9400", "0", h100),
        ("b:9400", "1", h100),
    ])
    .unwrap();
    assert_eq!(models, BTreeMap::from([("n1".into(), h100.into())]));
    assert_eq!(listed, [(0, h100.to_string()), (1, h100.to_string())]);

    let err = both(&[
        ("a:9400", "0", h100),
        ("a:9400", "1", h100),
        ("b:9400", "0", h100),
        ("b:9400", "1", a100),
    ])
    .unwrap_err();
    assert!(
        err.starts_with(&format!(
            "prometheus http://p:9090: query `meshfit_gpu_info{{}}`: node n1 GPU 1 is listed \
             as two models, {a100:?} and {h100:?}: two series disagree"
        )),
        "{err}"
    );

    let (models, _, notes) = both(&[("a:9400", "1", h100), ("a:9400", "0", a100)]).unwrap();
    assert_eq!(models, BTreeMap::from([("n1".into(), a100.into())]));
    assert!(
        notes.iter().any(|n| n.starts_with(&format!(
            "node n1's GPUs name more than one model (0: {a100}, 1: {h100})"
        ))),
        "{notes:?}"
    );

    // Prometheus and a snapshot file, in either order.
    let exported = |model: &str| Families {
        gpus: vec![sample(
            &[("hostname", "n1"), ("gpu", "1"), ("model_name", model)],
            "1",
        )],
        ..Families::default()
    };
    let (_, file) = to_measurements(&src(None, None), 0.0, exported(a100)).unwrap();
    let file = serde_json::to_string(&file).unwrap();
    let (prom, _) = to_measurements(&src(None, None), 0.0, exported(h100)).unwrap();
    let mut file_last = prom.clone();
    let err = crate::ingest::files::read(&file, "n1.json", &mut file_last)
        .unwrap_err()
        .to_string();
    let mut prom_last = Measurements::default();
    crate::ingest::files::read(&file, "n1.json", &mut prom_last).unwrap();
    assert_eq!(prom_last.add_gpus(prom.gpus).unwrap_err().to_string(), err);
    assert!(
        err.contains(&format!(
            "node n1 GPU 1 is listed as two models, {a100:?} and {h100:?}, by n1.json and \
             prometheus http://p:9090 respectively"
        )),
        "{err}"
    );
    assert_eq!(
        file_last.gpu_models["n1"], h100,
        "a refused file changes nothing"
    );
}

/// Series `i` of `family` as a fleet's agents export it and Prometheus answers it: with the
/// target labels (`__name__`, `instance`, `job`, `pool`) that no record reads, and, for
/// every seventh node, a NaN or a series lacking a label the records need.
fn fleet_series(family: Family, i: usize) -> String {
    let node = i / 8;
    let gpu = i % 8;
    let host = format!("gpu-node-{node:05}");
    let odd = node % 7 == 3;
    let (labels, value): (Vec<(&str, String)>, String) = match family {
        Family::CollectiveTime => {
            let (scope, ranks, per_node) = if gpu == 7 {
                ("inter_node", "16", Some("8"))
            } else {
                ("intra_node", "8", None)
            };
            let mut l = vec![
                ("collective", "all_reduce".into()),
                ("scope", scope.into()),
                ("ranks", ranks.into()),
                ("size_bytes", (1u64 << (10 + 2 * gpu)).to_string()),
                ("dtype", "bf16".into()),
                ("backend", "nccl".into()),
            ];
            l.extend(per_node.map(|p| ("ranks_per_node", p.to_string())));
            let t = if odd && gpu == 0 {
                "NaN".to_string()
            } else {
                format!("{:e}", 2e-5 * (1 + gpu + node % 5) as f64)
            };
            (l, t)
        }
        Family::GemmFlops => {
            let mut l = vec![
                ("gpu", gpu.to_string()),
                ("dtype", "bf16".into()),
                ("m", "8192".into()),
                ("n", (1024 << (gpu % 4)).to_string()),
                ("backend", "cuda".into()),
            ];
            // A series lacking `k` is skipped by name.
            if !(odd && gpu == 1) {
                l.push(("k", "4096".into()));
            }
            (l, format!("{:e}", 6.5e14 + 1e12 * (node % 11) as f64))
        }
        Family::MemoryBandwidth => (
            vec![
                ("gpu", gpu.to_string()),
                ("path", if gpu % 2 == 0 { "hbm_copy" } else { "h2d" }.into()),
            ],
            format!("{:e}", 3.1e12 - 1e9 * (node % 13) as f64),
        ),
        Family::CalibrationLastSuccess | Family::FabricLastRun => {
            (Vec::new(), format!("{}", 1_764_400_000 + 60 * node + gpu))
        }
        Family::GpuInfo => (
            vec![
                ("gpu", gpu.to_string()),
                ("model_name", "NVIDIA H100 80GB HBM3".into()),
                ("uuid", format!("GPU-{node:08x}-{gpu:04x}")),
            ],
            "1".into(),
        ),
        Family::GpuLinkInfo => (
            vec![
                ("gpu", gpu.to_string()),
                ("peer_gpu", ((gpu + 1) % 8).to_string()),
                ("link", "NV18".into()),
            ],
            "1".into(),
        ),
        Family::FabricPairBusbw => (
            vec![
                ("peer_node", format!("gpu-node-{:05}", node + 1)),
                ("gpu", gpu.to_string()),
                ("backend", "nccl".into()),
            ],
            format!("{:e}", 2.25e10 + 1e8 * gpu as f64),
        ),
    };
    let mut metric = serde_json::Map::new();
    metric.insert("__name__".into(), family.as_str().into());
    for (k, v) in labels {
        metric.insert(k.into(), v.into());
    }
    metric.insert("hostname".into(), host.into());
    metric.insert(
        "instance".into(),
        format!("10.0.{}.{}:9400", node / 250, node % 250).into(),
    );
    metric.insert("job".into(), "meshfit-agent".into());
    metric.insert("pool".into(), "train-a".into());
    serde_json::json!({"metric": metric, "value": [1_764_500_000.5, value]}).to_string()
}

const VECTOR_HEAD: &str = r#"{"status":"success","data":{"resultType":"vector","result":["#;
const VECTOR_TAIL: &str = "]}}";

/// One family's reply of `n` series.
fn fleet_reply(family: Family, n: usize) -> String {
    let series: Vec<String> = (0..n).map(|i| fleet_series(family, i)).collect();
    format!("{VECTOR_HEAD}{}{VECTOR_TAIL}", series.join(","))
}

/// What 12 nodes' replies make, as JSON: the snapshot (records, GPUs, links), notes, sources
/// and GPU models.
fn fleet_measurements() -> serde_json::Value {
    let read = |family| {
        parse_reply(
            reqwest::StatusCode::OK,
            fleet_reply(family, 96).as_bytes(),
            labels_read(family),
        )
        .unwrap()
    };
    let families = Families {
        collectives: read(Family::CollectiveTime),
        gemms: read(Family::GemmFlops),
        memory: read(Family::MemoryBandwidth),
        calibrated: read(Family::CalibrationLastSuccess),
        gpus: read(Family::GpuInfo),
        links: read(Family::GpuLinkInfo),
        pairs: read(Family::FabricPairBusbw),
        fabric_runs: read(Family::FabricLastRun),
    };
    let (m, snapshot) = to_measurements(
        &src(Some("pool=\"train-a\""), None),
        1_764_500_000.0,
        families,
    )
    .unwrap();
    serde_json::json!({
        "snapshot": snapshot,
        "notes": m.notes,
        "sources": m.sources,
        "gpu_models": m.gpu_models,
    })
}

/// Issue 31, item 3: the reply is read as a stream and keeps only the labels records read.
/// What a fleet's replies make is what they made when each reply was read whole into a
/// `serde_json::Value` first (prometheus/fleet.golden.json, written by that reader).
#[test]
fn r31_3_a_fleets_replies_make_the_records_the_whole_reply_reader_made() {
    let golden: serde_json::Value =
        serde_json::from_str(include_str!("fleet.golden.json")).unwrap();
    assert_eq!(fleet_measurements(), golden);
}

/// `n` series of `family` as one reply, made as it is read, noting the largest read asked
/// for and the bytes given.
struct FleetReader {
    family: Family,
    n: usize,
    next: usize,
    pending: std::io::Cursor<Vec<u8>>,
    largest_read: usize,
    given: u64,
}

impl FleetReader {
    fn new(family: Family, n: usize) -> Self {
        FleetReader {
            family,
            n,
            next: 0,
            pending: std::io::Cursor::new(Vec::new()),
            largest_read: 0,
            given: 0,
        }
    }
}

impl Read for FleetReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.largest_read = self.largest_read.max(buf.len());
        while self.pending.position() == self.pending.get_ref().len() as u64 {
            let i = self.next;
            self.next += 1;
            let text = match i {
                0 => VECTOR_HEAD.to_string(),
                1 => fleet_series(self.family, 0),
                i if i <= self.n => format!(",{}", fleet_series(self.family, i - 1)),
                i if i == self.n + 1 => VECTOR_TAIL.to_string(),
                _ => return Ok(0),
            };
            self.pending = std::io::Cursor::new(text.into_bytes());
        }
        let n = self.pending.read(buf)?;
        self.given += n as u64;
        Ok(n)
    }
}

/// Issue 31, item 3: a 50 MB reply took 3.2 GB, as it was read whole, then copied into a
/// tree of its JSON, then into samples of all their labels. The reply is parsed in the reader's
/// chunks as it comes, keeps only the labels records read, and stops at the size cap.
#[test]
fn r31_3_a_reply_is_parsed_as_it_is_read_and_keeps_only_the_labels_records_read() {
    let ok = reqwest::StatusCode::OK;
    let n = 20_000;
    let mut reply = FleetReader::new(Family::CollectiveTime, n);
    let samples = parse_reply(ok, &mut reply, labels_read(Family::CollectiveTime)).unwrap();
    assert_eq!(samples.len(), n);
    assert!(
        reply.largest_read <= 64 << 10,
        "asked for {} bytes at once",
        reply.largest_read
    );
    let kept = labels_read(Family::CollectiveTime);
    assert!(samples
        .iter()
        .all(|s| s.metric.iter().all(|(k, _)| kept.contains(k))));
    let last = &samples[n - 1];
    assert_eq!(
        (
            label(last, "hostname"),
            label(last, "scope"),
            label(last, "ranks_per_node"),
            label(last, "instance"),
            last.value.clone()
        ),
        (
            Some("gpu-node-02499"),
            Some("inter_node"),
            Some("8"),
            None,
            format!("{:e}", 2e-5 * 12.0)
        )
    );
    let mut reply = FleetReader::new(Family::CollectiveTime, n);
    match parse_reply(ok, Capped::new(&mut reply, 1 << 20), &[]) {
        Err(ReplyError::Read(e)) => {
            assert_eq!(e.to_string(), "the reply is larger than 1 MiB: refused")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        reply.given <= (1 << 20) + (64 << 10),
        "read on to {} bytes",
        reply.given
    );
}

/// `body` as a whole HTTP response of `status`, closing the connection after it.
fn http(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A hostile Prometheus on loopback: it answers each of `queries` connections, one query
/// each, with the raw response `answer` gives for the query's PromQL, then stops.
fn fake_prometheus(
    queries: usize,
    answer: impl Fn(&str) -> Vec<u8> + Send + 'static,
) -> (PromSource, std::thread::JoinHandle<()>) {
    use std::io::Write;
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let serving = std::thread::spawn(move || {
        for _ in 0..queries {
            let (mut conn, _) = server.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head);
            let target = head.split(' ').nth(1).unwrap_or("/");
            let url = reqwest::Url::parse(&format!("http://fake{target}")).unwrap();
            let query = url
                .query_pairs()
                .find(|(k, _)| k == "query")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            let _ = conn.write_all(&answer(&query));
        }
    });
    let source = PromSource {
        timeout: Duration::from_secs(5),
        ..at(&format!("http://127.0.0.1:{port}"))
    };
    (source, serving)
}

/// Issue 31: an HTTP 500 whose body read `"status":"success"` was taken as an answer. A
/// status other than 2xx fails the query by its status and what the body says, cut short.
#[test]
fn r31_a_failed_status_is_an_error_whatever_the_body_says() {
    let (source, serving) = fake_prometheus(1, |_| {
        http(
            "500 Internal Server Error",
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        )
    });
    let err = source.fetch(0.0).unwrap_err().to_string();
    serving.join().unwrap();
    assert!(
        err.ends_with(
            "query `meshfit_collective_time_seconds{}`: HTTP 500 Internal Server Error: \
             {\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}"
        ),
        "{err}"
    );
    let unavailable = reqwest::StatusCode::SERVICE_UNAVAILABLE;
    let body = r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#;
    assert_eq!(
        status_error(unavailable, body.as_bytes()),
        "HTTP 503 Service Unavailable: query timed out in expression evaluation"
    );
    let page = format!("<html>{}</html>", "Bad Gateway ".repeat(10_000));
    let said = status_error(reqwest::StatusCode::BAD_GATEWAY, page.as_bytes());
    assert!(
        said.starts_with("HTTP 502 Bad Gateway: <html>Bad Gateway Bad")
            && said.ends_with("... (cut at 300 characters)")
            && said.len() < 400,
        "{said}"
    );
    assert_eq!(
        status_error(reqwest::StatusCode::FORBIDDEN, &b""[..]),
        "HTTP 403 Forbidden with an empty body"
    );
    // A 200 reply of status error quotes its `error` cut short too.
    let long = format!(r#"{{"status":"error","error":"{}"}}"#, "x".repeat(100_000));
    let message = read_reply(long.as_bytes()).unwrap_err();
    assert!(message.ends_with("(cut at 300 characters)") && message.len() < 400);
}

/// The hostile-Prometheus probes of issue 31: a server whose Content-Length promises more
/// than it sends, or less than it sends, fails the query by name rather than hanging or
/// reading half a reply as a whole one.
#[test]
fn r31_a_reply_that_lies_about_its_length_fails_the_query() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    let lying = |length: usize| {
        move |_: &str| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \
                 {length}\r\nConnection: close\r\n\r\n{body}"
            )
            .into_bytes()
        }
    };
    let (source, serving) = fake_prometheus(1, lying(body.len() + 1000));
    let longer = source.fetch(0.0).unwrap_err().to_string();
    serving.join().unwrap();
    assert!(
        longer.contains("query `meshfit_collective_time_seconds{}`: HTTP 200 OK: "),
        "{longer}"
    );
    let (source, serving) = fake_prometheus(1, lying(20));
    let shorter = source.fetch(0.0).unwrap_err().to_string();
    serving.join().unwrap();
    assert!(
        shorter.contains("HTTP 200 OK: not a Prometheus API reply: EOF while parsing"),
        "{shorter}"
    );
}

/// One series of the collective family, as an agent at `instance` exports it.
fn collective_series(node: &str, instance: &str, labels: &[(&str, &str)], value: &str) -> String {
    let mut metric = serde_json::json!({
        "__name__": "meshfit_collective_time_seconds",
        "hostname": node,
        "instance": instance,
        "collective": "all_reduce",
        "scope": "intra_node",
        "ranks": "8",
        "size_bytes": "1048576",
    });
    for (k, v) in labels {
        metric[*k] = (*v).into();
    }
    serde_json::json!({"metric": metric, "value": [1_700_003_000.0, value]}).to_string()
}

/// The hostile-Prometheus probes of issue 31 over HTTP, as `tuner fit --prometheus` runs
/// them: one node's series from two instances, the second 10x slower, whichever comes first;
/// and series whose values no hardware gives (a time of 1e-300 s, 4294967295 ranks, a size of
/// 0, NaN, a calibration stamp in the year 33658). The conflict resolves the same in either
/// order and is named; each absurd series is skipped by node, field, value and range.
#[test]
fn r31_a_hostile_prometheus_gives_the_same_records_whatever_its_order() {
    let now = 1_700_003_000.0;
    let fetch = |flip: bool| {
        let (source, serving) = fake_prometheus(8, move |query| {
            let vector = |series: Vec<String>| {
                http(
                    "200 OK",
                    &format!("{VECTOR_HEAD}{}{VECTOR_TAIL}", series.join(",")),
                )
            };
            if query.starts_with("meshfit_collective_time_seconds") {
                let mut pair = vec![
                    collective_series("n1", "a:9400", &[], "0.0001"),
                    collective_series("n1", "b:9400", &[], "0.001"),
                ];
                if flip {
                    pair.reverse();
                }
                pair.extend([
                    collective_series("n2", "c:9400", &[], "1e-300"),
                    collective_series("n2", "c:9400", &[("ranks", "4294967295")], "0.001"),
                    collective_series("n2", "c:9400", &[("size_bytes", "0")], "0.001"),
                    collective_series("n2", "c:9400", &[("size_bytes", "2097152")], "NaN"),
                    collective_series("n3", "d:9400", &[], "0.0002"),
                ]);
                vector(pair)
            } else if query.starts_with("meshfit_calibration_last_success") {
                let stamp = |node: &str, instance: &str, t: &str| {
                    serde_json::json!({"metric": {"hostname": node, "instance": instance}, "value": [now, t]})
                        .to_string()
                };
                let mut stamps = vec![
                    stamp("n1", "a:9400", "1700001000"),
                    stamp("n1", "b:9400", "1700002000"),
                ];
                if flip {
                    stamps.reverse();
                }
                stamps.push(stamp("n3", "d:9400", "1e12"));
                vector(stamps)
            } else {
                vector(Vec::new())
            }
        });
        let (mut m, _) = source.fetch(now).unwrap();
        serving.join().unwrap();
        m.screen(now, None);
        // Each run's server has a port of its own.
        let notes: Vec<String> = m
            .notes
            .iter()
            .map(|n| n.replace(&source.url, "URL"))
            .collect();
        (m.records, notes)
    };
    let (records, notes) = fetch(false);
    assert_eq!((records.clone(), notes.clone()), fetch(true));
    let kept: Vec<(Option<&str>, f64)> = records
        .iter()
        .map(|r| (r.group.node.as_deref(), r.timing.time_s))
        .collect();
    assert_eq!(kept, vec![(Some("n1"), 0.001)], "{notes:?}");
    let all = notes.join("\n");
    for expected in [
        "5 series from URL skipped: ",
        "n2 meshfit_collective_time_seconds: time_s 1e-300: expected a time from 1e-7 s to 1e4 s",
        "n2 meshfit_collective_time_seconds: ranks 4294967295: expected 1 to 1048576 ranks",
        "n2 meshfit_collective_time_seconds: bytes 0: expected at least 1 byte",
        "conflicting measurements of all_reduce nccl 1048576 B",
        "kept 0.001 s measured at 1700002000, the slower of the newest",
    ] {
        assert!(all.contains(expected), "{expected}:\n{all}");
    }
}
