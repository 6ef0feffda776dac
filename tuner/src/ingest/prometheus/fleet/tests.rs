use std::io::{Read, Write};
use std::time::Duration;

use super::*;

pub(super) fn src(url: &str, selector: Option<&str>) -> PromSource {
    PromSource {
        url: url.into(),
        bearer: None,
        basic: None,
        timeout: Duration::from_secs(5),
        selector: selector.map(Into::into),
        window: Some("1h".into()),
    }
}

pub(super) fn opts(aggregate: Aggregate) -> FleetOptions {
    FleetOptions {
        mode: FleetQuery::Reduced,
        aggregate,
        threshold: 0.2,
        exclude: Vec::new(),
        exclude_degraded: false,
        max_age_s: None,
    }
}

pub(super) fn sample(labels: &[(&'static str, &str)], v: &str) -> Sample {
    Sample {
        metric: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        value: v.to_string(),
    }
}

#[test]
fn names_left_out_are_literal_in_the_regex_and_the_string() {
    assert_eq!(
        not_these(&["gpu-node.1".into(), "a\"b".into()]),
        r#"hostname!~"gpu-node\\.1|a\"b""#
    );
}

#[test]
fn aggregates_count_from_the_worst_end() {
    let slowest = aggregate_expr(Aggregate::Slowest, true, "model_name", "x");
    assert_eq!(slowest, "max by (model_name) (x)");
    assert_eq!(
        aggregate_expr(Aggregate::Slowest, false, "model_name", "x"),
        "min by (model_name) (x)"
    );
    assert_eq!(
        aggregate_expr(Aggregate::P10, true, "model_name", "x"),
        "quantile by (model_name) (0.9, x)"
    );
    assert_eq!(
        aggregate_expr(Aggregate::P10, false, "model_name", "x"),
        "quantile by (model_name) (0.1, x)"
    );
}

/// The queries a fleet fetch sends, for the first spec (intra-node collectives): joined with
/// the GPU model, scoped by the selector and the window, fresh nodes only under --max-age, and
/// stragglers judged at 1 MB and up against the median per point.
#[test]
fn the_queries_join_the_model_and_judge_against_the_median() {
    let source = src("http://p:9090", Some("{pool=\"a\"}"));
    let client = reqwest::blocking::Client::new();
    let mut o = opts(Aggregate::Slowest);
    o.max_age_s = Some(100.0);
    let r = Reducer {
        src: &source,
        client: &client,
        opts: &o,
        now: 1000.0,
        only_model: None,
        queries: 0,
        samples: 0,
    };
    let spec = &SPECS[0];
    let series = r.series(spec, "", &["n9".into()]);
    assert_eq!(
        series,
        "((last_over_time(meshfit_collective_time_seconds{pool=\"a\",scope=\"intra_node\",\
         hostname!~\"n9\"}[1h]) * on (hostname) group_left (model_name) group by (hostname, \
         model_name) (last_over_time(meshfit_gpu_info{pool=\"a\"}[1h]))) and on (hostname) \
         (last_over_time(meshfit_calibration_last_success_timestamp_seconds{pool=\"a\"}[1h]) \
         > 900))"
    );
    // The HBM figure is each node's best copy, before the fleet's.
    let hbm = r.series(&SPECS[3], "", &[]);
    assert!(
        hbm.starts_with("max by (hostname, model_name, path, backend) (((last_over_time(meshfit_memory_bandwidth_bytes_per_second{pool=\"a\",path=~\"hbm_copy|hbm\"}[1h])"),
        "{hbm}"
    );
}

#[test]
fn an_aggregate_sample_becomes_the_fleet_nodes_record() {
    let s = sample(
        &[
            ("model_name", "NVIDIA H100 80GB HBM3"),
            ("collective", "all_reduce"),
            ("scope", "intra_node"),
            ("ranks", "8"),
            ("size_bytes", "1073741824"),
            ("backend", "nccl"),
        ],
        "0.005",
    );
    let node = fleet_node("NVIDIA H100 80GB HBM3");
    let r = fleet_record(&SPECS[0], &s, &node).unwrap();
    assert_eq!(r.group.node.as_deref(), Some("fleet/NVIDIA H100 80GB HBM3"));
    assert_eq!(
        (r.kind, r.group.ranks, r.bytes),
        (Kind::AllReduce, 8, 1 << 30)
    );
    assert_eq!(r.timing.time_s, 0.005);
    // A pair of the fleet with itself: one NIC figure, on rail 0, at the aggregate's rate.
    let p = sample(&[("model_name", "H"), ("backend", "nccl")], "4e10");
    let pair = fleet_record(&SPECS[4], &p, "fleet/H").unwrap();
    let nics = crate::fit::pairs::nic_figures(&[pair]);
    assert_eq!(nics.len(), 1);
    assert_eq!((nics[0].node.as_str(), nics[0].rail), ("fleet/H", 0));
    assert!((nics[0].busbw_bytes_per_s / 4e10 - 1.0).abs() < 1e-12);
}

/// The fleet's 8-rank all-reduce over 8 trays of one NVL72 rack and over 8 racks are two
/// points of the reduced query, each a record that keeps its NVLink domains, and a tray
/// behind the rack's median is named with them.
#[test]
fn inter_node_points_keep_their_nvlink_domains() {
    let spec = &SPECS[1];
    assert!(spec.point.contains(&"nvlink_domains") && spec.judged_per.contains(&"nvlink_domains"));
    let at = |domains: &'static str, v: &str| {
        sample(
            &[
                ("model_name", "NVIDIA GB200"),
                ("collective", "all_reduce"),
                ("scope", "inter_node"),
                ("ranks", "8"),
                ("ranks_per_node", "1"),
                ("nvlink_domains", domains),
                ("size_bytes", "1073741824"),
                ("backend", "nccl"),
            ],
            v,
        )
    };
    let (rack, racks) = (at("1", "0.0024"), at("8", "0.047"));
    assert_ne!(point_key(&rack, spec.point), point_key(&racks, spec.point));
    let node = fleet_node("NVIDIA GB200");
    let domains = |s: &Sample| fleet_record(spec, s, &node).unwrap().detail.nvlink_domains;
    assert_eq!((domains(&rack), domains(&racks)), (Some(1), Some(8)));
    let mut slow = at("1", "1.25");
    slow.metric.push(("hostname", "t7".into()));
    let medians = BTreeMap::from([(point_key(&slow, spec.point), 0.0024)]);
    assert_eq!(
        straggler(spec, &slow, &medians).unwrap().what,
        "all_reduce x8 inter_node in one NVLink domain busbw at 1073741824 bytes"
    );
}

/// A node whose 1 GiB all-reduce over 8 GPUs takes 1.25x the median's 5 ms is 20% behind on
/// busbw: the median's is 2^30 x 2(8-1)/8 / 5 ms = 375.8 GB/s (nccl-tests' factor), the
/// node's 300.6 GB/s.
#[test]
fn a_straggler_is_priced_against_the_median_per_point() {
    let s = sample(
        &[
            ("hostname", "n7"),
            ("model_name", "H"),
            ("collective", "all_reduce"),
            ("scope", "intra_node"),
            ("ranks", "8"),
            ("size_bytes", "1073741824"),
            ("backend", "nccl"),
        ],
        "1.25",
    );
    let medians = BTreeMap::from([(point_key(&s, SPECS[0].point), 0.005)]);
    let st = straggler(&SPECS[0], &s, &medians).unwrap();
    assert_eq!(st.node, "n7");
    assert!((st.fleet_median / 1e9 - 375.8).abs() < 0.05, "{st:?}");
    assert!((st.value / 1e9 - 300.6).abs() < 0.05, "{st:?}");
    assert!((st.shortfall() - 0.2).abs() < 1e-12);
    assert_eq!(
        st.what,
        "all_reduce x8 intra_node busbw at 1073741824 bytes"
    );
    // A GEMM at 0.7 of the median rate.
    let g = sample(
        &[
            ("hostname", "n8"),
            ("model_name", "H"),
            ("m", "8192"),
            ("n", "8192"),
            ("k", "8192"),
            ("dtype", "bf16"),
            ("backend", "nccl"),
        ],
        "0.7",
    );
    let medians = BTreeMap::from([(point_key(&g, SPECS[2].point), 6e14)]);
    let st = straggler(&SPECS[2], &g, &medians).unwrap();
    assert!((st.value - 4.2e14).abs() < 1e3 && (st.shortfall() - 0.3).abs() < 1e-12);
}

/// Answers every request with `body` until the test ends.
pub(super) fn serve(body: &'static str) -> String {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in server.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut request = [0u8; 8192];
            let _ = conn.read(&mut request);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes());
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// Issue 28: series from two clusters mixed are named in one line, and nothing is priced.
#[test]
fn two_clusters_are_refused_by_name() {
    let url = serve(
        r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"cluster":"east","model_name":"H"},"value":[1,"600"]},
        {"metric":{"cluster":"west","model_name":"H"},"value":[1,"400"]}]}}"#,
    );
    let err = src(&url, None)
        .fetch_fleet(0.0, &opts(Aggregate::Slowest))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "the series come from 2 clusters, cluster=\"east\" (600 nodes), \
             cluster=\"west\" (400 nodes)"
        ) && err.contains("--selector '{cluster=\"east\"}'"),
        "{err}"
    );
}

#[test]
fn a_node_is_named_once_by_its_worst_figure() {
    let st = |node: &str, what: &str, value: f64| Straggler {
        node: node.into(),
        what: what.into(),
        value,
        fleet_median: 1.0,
    };
    let named = worst_per_node(vec![
        st("n2", "HBM bandwidth", 0.85),
        st("n1", "GEMM bf16 rate at 8192x8192x8192", 0.7),
        st(
            "n1",
            "all_reduce x8 intra_node busbw at 1073741824 bytes",
            0.6,
        ),
        st("n1", "HBM bandwidth", 0.8),
    ]);
    assert_eq!(named.len(), 2);
    assert_eq!(
        named[0].what,
        "all_reduce x8 intra_node busbw at 1073741824 bytes (and 2 other figures beyond the \
         threshold)"
    );
    assert_eq!(
        (named[1].node.as_str(), named[1].what.as_str()),
        ("n2", "HBM bandwidth")
    );
}
