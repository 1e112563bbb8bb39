//! What an API-server failure is: which client errors are the server's
//! (retry promptly once it answers again) rather than the request's, and
//! naming a TLS trust failure instead of kube's bare `client error
//! (Connect)`.
//!
//! Owns classifying and describing `kube::Error`s and error chains. It
//! never retries, logs or decides what to do about a failure: the
//! informer, the workqueue and the controller do.

use std::error::Error as StdError;

/// Whether `e` is the API server's trouble rather than the request's:
/// 5xx, 429, 401/403 (authorization can come back: an RBAC rollout, an
/// authorizer or webhook outage) and no response at all (connection,
/// TLS, timeout). A key failing this way is retried promptly once the
/// server answers again; 409, 404, 422 and the like are the request's and
/// keep their per-key backoff.
pub fn is_server_side(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => matches!(status.code, 401 | 403 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// A metric label for a failed list or watch: `expired` (410, a relist
/// follows), `forbidden` (401/403), `throttled` (429), `server` (5xx),
/// `tls`, `transport` (no response) or `other`.
pub fn watch_failure_reason(e: &kube::runtime::watcher::Error) -> &'static str {
    use kube::runtime::watcher::Error as W;
    let code = |code: u16| match code {
        410 => "expired",
        401 | 403 => "forbidden",
        429 => "throttled",
        500..=599 => "server",
        _ => "other",
    };
    match e {
        W::WatchError(status) => code(status.code),
        W::InitialListFailed(err) | W::WatchStartFailed(err) | W::WatchFailed(err) => match err {
            kube::Error::Api(status) => code(status.code),
            _ if rustls_error(err).is_some() => "tls",
            kube::Error::HyperError(_) | kube::Error::Service(_) => "transport",
            _ => "other",
        },
        W::NoResourceVersion => "other",
    }
}

/// The rustls error somewhere in `e`'s chain, looking inside `io::Error`s
/// too (their `source()` skips the error they wrap, which is where
/// tokio-rustls puts a failed handshake).
pub fn rustls_error<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            if let Some(tls) = rustls_error(inner) {
                return Some(tls);
            }
        }
        next = e.source();
    }
    None
}

/// `e` and its sources as one line, led by what a TLS failure in the
/// chain means, e.g. `TLS: the API server's certificate is not trusted by
/// the configured CA (invalid peer certificate: UnknownIssuer); failed to
/// start watching: ...`.
pub fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    match rustls_error(e) {
        Some(tls @ rustls::Error::InvalidCertificate(_)) => format!(
            "TLS: the API server's certificate is not trusted by the configured CA ({tls}); {text}"
        ),
        Some(tls) => format!("TLS: {tls}; {text}"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Connect(#[source] std::io::Error);

    #[test]
    fn a_certificate_error_wrapped_in_io_errors_is_named() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let e = Connect(std::io::Error::new(std::io::ErrorKind::InvalidData, tls));
        let text = describe(&e);
        assert!(
            text.starts_with(
                "TLS: the API server's certificate is not trusted by the configured CA (invalid peer certificate: UnknownIssuer)"
            ),
            "{text}"
        );
        assert!(text.contains("client error (Connect)"), "{text}");
    }

    #[test]
    fn other_errors_are_described_with_their_sources() {
        let e = Connect(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(describe(&e), "client error (Connect): connection refused");
        assert!(rustls_error(&e).is_none());
    }

    #[test]
    fn watch_failures_get_one_label_per_cause() {
        use kube::runtime::watcher::Error as W;
        let status = |code| {
            kube::core::Status::failure("x", "y")
                .with_code(code)
                .boxed()
        };
        assert_eq!(watch_failure_reason(&W::WatchError(status(410))), "expired");
        assert_eq!(
            watch_failure_reason(&W::WatchStartFailed(kube::Error::Api(status(403)))),
            "forbidden"
        );
        assert_eq!(
            watch_failure_reason(&W::InitialListFailed(kube::Error::Api(status(503)))),
            "server"
        );
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature);
        let connect = kube::Error::Service(Box::new(Connect(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            tls,
        ))));
        assert_eq!(watch_failure_reason(&W::WatchFailed(connect)), "tls");
        let refused = kube::Error::Service("connection refused".into());
        assert_eq!(watch_failure_reason(&W::WatchFailed(refused)), "transport");
    }

    #[test]
    fn server_side_failures_are_told_from_the_requests_own() {
        let api = |code| {
            kube::Error::Api(
                kube::core::Status::failure("x", "y")
                    .with_code(code)
                    .boxed(),
            )
        };
        for code in [401, 403, 429, 500, 503, 504] {
            assert!(is_server_side(&api(code)), "{code}");
        }
        for code in [400, 404, 409, 410, 422] {
            assert!(!is_server_side(&api(code)), "{code}");
        }
        assert!(is_server_side(&kube::Error::Service("refused".into())));
    }
}
