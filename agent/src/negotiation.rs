//! Which exposition format and content coding a `/metrics` request gets, from its `Accept`
//! and `Accept-Encoding` headers (RFC 9110 §12.5). A request whose headers name nothing the
//! agent serves gets the classic text, uncompressed, rather than a 406: that is what every
//! Prometheus client library does, and what `curl` without headers expects.

use crate::metrics::{Encoding, Format};

/// The entries of an `Accept`-style header: each value (media range or coding, lowercase
/// comparisons left to the caller), its parameters other than `q`, and its q-value (1 when
/// absent, 0 when unreadable so that a malformed entry is never preferred).
fn entries(header: &str) -> impl Iterator<Item = (&str, Vec<(&str, &str)>, f32)> {
    header.split(',').filter_map(|item| {
        let mut parts = item.split(';');
        let value = parts.next()?.trim();
        if value.is_empty() {
            return None;
        }
        let mut q = 1.0;
        let mut params = Vec::new();
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim().trim_matches('"'));
            if k.eq_ignore_ascii_case("q") {
                q = v
                    .parse::<f32>()
                    .ok()
                    .filter(|q| (0.0..=1.0).contains(q))
                    .unwrap_or(0.0);
            } else {
                params.push((k, v));
            }
        }
        Some((value, params, q))
    })
}

/// OpenMetrics when the client prefers `application/openmetrics-text` (version 1.0.0 or
/// none given) to any text it accepts; Prometheus asks
/// `application/openmetrics-text;version=1.0.0;q=0.5,...,text/plain;version=0.0.4;q=0.3,*/*;q=0.2`
/// with its default scrape protocols. The classic text otherwise, ties included.
pub fn format(accept: Option<&str>) -> Format {
    let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
    for (value, params, q) in entries(accept.unwrap_or("")) {
        let version = params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("version"))
            .map(|(_, v)| *v);
        if value.eq_ignore_ascii_case("application/openmetrics-text")
            && version.is_none_or(|v| v == "1.0.0")
        {
            openmetrics = openmetrics.max(q);
        } else if ["text/plain", "text/*", "*/*"]
            .iter()
            .any(|t| value.eq_ignore_ascii_case(t))
        {
            text = text.max(q);
        }
    }
    if openmetrics > 0.0 && openmetrics > text {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// gzip when the client accepts it (`gzip`, `x-gzip` or `*` with a q-value above 0, an
/// explicit `gzip;q=0` winning over `*`); the body as written otherwise.
pub fn encoding(accept_encoding: Option<&str>) -> Encoding {
    let (mut gzip, mut any) = (None, None);
    for (value, _, q) in entries(accept_encoding.unwrap_or("")) {
        if value.eq_ignore_ascii_case("gzip") || value.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(gzip.unwrap_or(0.0f32).max(q));
        } else if value == "*" {
            any = Some(q);
        }
    }
    if gzip.or(any).is_some_and(|q| q > 0.0) {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_preferred() {
        // Prometheus 3's default scrape protocols, and 2.x's.
        let prometheus3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        let prometheus2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, expected) in [
            (Some(prometheus3), Format::OpenMetrics),
            (Some(prometheus2), Format::OpenMetrics),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                Format::OpenMetrics,
            ),
            (Some("Application/OpenMetrics-Text"), Format::OpenMetrics),
            (None, Format::Text),
            (Some("*/*"), Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            // Only a version the agent does not write, or a lower preference, or refused.
            (
                Some("application/openmetrics-text;version=0.0.1"),
                Format::Text,
            ),
            (
                Some("text/plain;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5"),
                Format::Text,
            ),
            (Some("application/openmetrics-text;q=0"), Format::Text),
            (Some("application/openmetrics-text;q=high"), Format::Text),
            (Some("application/json"), Format::Text),
        ] {
            assert_eq!(format(accept), expected, "{accept:?}");
        }
    }

    #[test]
    fn gzip_when_accepted() {
        for (accept_encoding, expected) in [
            (Some("gzip"), Encoding::Gzip),
            (Some("deflate, gzip;q=0.5"), Encoding::Gzip),
            (Some("br;q=1.0, *;q=0.1"), Encoding::Gzip),
            (None, Encoding::Identity),
            (Some("identity"), Encoding::Identity),
            (Some("br, deflate"), Encoding::Identity),
            (Some("gzip;q=0"), Encoding::Identity),
            (Some("gzip;q=0, *"), Encoding::Identity),
        ] {
            assert_eq!(encoding(accept_encoding), expected, "{accept_encoding:?}");
        }
    }
}
