use super::*;
use clap::CommandFactory;

#[test]
fn verify_flags() {
    Args::command().debug_assert();
}

#[test]
fn spans_parse_and_print() {
    assert_eq!("6h".parse::<Span>().unwrap(), Span::from_secs(21600));
    assert_eq!("1h30m".parse::<Span>().unwrap(), Span::from_secs(5400));
    assert_eq!("250ms".parse::<Span>().unwrap().to_string(), "250ms");
    assert_eq!(Span::from_secs(21600).to_string(), "6h");
    assert_eq!(Span::from_secs(0).to_string(), "0ms");
    // humantime's syntax: spaced compounds and unit names too; a bare number has no unit.
    assert_eq!("1h 30m".parse::<Span>().unwrap(), Span::from_secs(5400));
    assert_eq!("6 hours".parse::<Span>().unwrap(), Span::from_secs(21600));
    let err = "6 parsecs".parse::<Span>().unwrap_err();
    assert!(
        err.starts_with("duration `6 parsecs`: expected a number and a unit"),
        "{err}"
    );
    for bad in ["h", "90", "", "-5s"] {
        assert!(bad.parse::<Span>().is_err(), "{bad}");
    }
}

#[test]
fn yaml_overrides_defaults_and_unknown_keys_are_named() {
    let c = Config::from_yaml("interval: 1h\nbackend: sim\nprofile: dgx-h100\n").unwrap();
    assert_eq!(c.interval, Span::from_secs(3600));
    assert_eq!(c.listen, Config::default().listen);
    let err = Config::from_yaml("intervall: 1h\n").unwrap_err();
    assert!(err.contains("intervall"), "{err}");
    let err = Config::from_yaml("interval: soon\n").unwrap_err();
    assert!(err.contains("soon"), "{err}");
}

#[test]
fn flags_override_yaml_and_checks_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, "interval: 1h\nbackend: sim\nprofile: dgx-h100\n").unwrap();
    let args = Args::parse_from([
        "agent",
        "--config",
        file.to_str().unwrap(),
        "--interval",
        "2h",
    ]);
    assert_eq!(Config::load(args).unwrap().interval, Span::from_secs(7200));
    let args = Args::parse_from(["agent", "--max-utilization-percent", "150"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "max_utilization_percent `150`: 0 to 100"
    );
    let args = Args::parse_from(["agent", "--backend", "sim"]);
    assert!(Config::load(args)
        .unwrap_err()
        .to_string()
        .starts_with("profile `(none)`: backend sim needs a profile: one of dgx-h100"));
    let args = Args::parse_from(["agent", "--max-connections", "0"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "max_connections `0`: at least 1"
    );
    let args = Args::parse_from(["agent", "--header-read-timeout", "0s"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "header_read_timeout `0ms`: at least 10ms"
    );
    let args = Args::parse_from(["agent", "--busy", "1"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "busy `(set)`: applies to backend sim only"
    );
}

#[test]
fn printed_config_reads_back_and_hides_the_token() {
    let c = Config {
        calibrate_token: Some(Secret("s3cret".into())),
        ..Config::default()
    };
    let yaml = c.to_yaml();
    assert!(
        !yaml.contains("s3cret") && yaml.contains("<hidden>"),
        "{yaml}"
    );
    let back = Config::from_yaml(&yaml).unwrap();
    assert_eq!(back.interval, c.interval);
    assert_eq!(back.gemm_dtypes, c.gemm_dtypes);
}

#[test]
fn faults_are_parsed_when_checked_and_a_bad_one_names_the_key() {
    let c = Config::from_yaml(
        "backend: sim\nprofile: dgx-h100\nfaults:\n- slow-gpu:gpu=5,factor=0.7\n- hang:after=3\n",
    )
    .unwrap();
    assert_eq!(
        c.sim.faults,
        vec![
            Fault::SlowGpu {
                gpu: 5,
                factor: 0.7
            },
            Fault::Hang { after: 3 }
        ]
    );
    assert_eq!(Config::from_yaml(&c.to_yaml()).unwrap(), c);
    let args = Args::parse_from([
        "agent",
        "--backend",
        "sim",
        "--profile",
        "dgx-h100",
        "--fault",
        "gpu-on-fire:gpu=1",
    ]);
    let err = Config::load(args).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "faults `gpu-on-fire:gpu=1`: unknown fault `gpu-on-fire`; expected one of nvlink-degraded"
        ),
        "{err}"
    );
    let err = Config::from_yaml("backend: sim\nprofile: dgx-h100\nfaults: [hang:after=x]\n");
    assert_eq!(
        err.unwrap_err(),
        "faults `hang:after=x`: after `x` is not a whole number"
    );
    // On nccl a fault is refused as sim-only, whatever it says.
    let args = Args::parse_from(["agent", "--fault", "gpu-on-fire:gpu=1"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "faults `(set)`: applies to backend sim only"
    );
}

/// Issue 31, item 4: `--config /dev/zero` was read until memory ran out; an endless file is
/// refused at 1 MiB, and a longer regular one by its length, naming it and the limit.
#[test]
fn r31_an_endless_or_oversized_config_file_is_refused_by_name() {
    let err = Keys::from_file(Path::new("/dev/zero")).unwrap_err();
    assert!(
        err.to_string().starts_with("config file /dev/zero: "),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.yaml");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(MAX_CONFIG_BYTES + 1)
        .unwrap();
    let err = Keys::from_file(&file).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "config file {}: 1048577 bytes, more than 1048576 bytes (1 MiB), the most this \
             reader takes",
            file.display()
        )
    );
}

/// Issue 28, item 4: the fabric pairs a node exports per rail are a setting, bounded.
#[test]
fn r28_4_fabric_slowest_peers_is_a_key_a_flag_and_bounded() {
    assert_eq!(Config::default().fabric_slowest_peers, 4);
    let c = Config::from_yaml("fabric_slowest_peers: 0\n").unwrap();
    assert_eq!(c.fabric_slowest_peers, 0);
    let args = Args::parse_from(["agent", "--fabric-slowest-peers", "8"]);
    assert_eq!(Config::load(args).unwrap().fabric_slowest_peers, 8);
    let args = Args::parse_from(["agent", "--fabric-slowest-peers", "33"]);
    assert_eq!(
        Config::load(args).unwrap_err().to_string(),
        "fabric_slowest_peers `33`: 0 to 32: more would export a pair per peer again"
    );
}
