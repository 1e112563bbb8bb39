//! A GET of a running host's health address (`/shadow/GUEST`, `/guests`),
//! for the commands that ask a host about itself. Owns the request, its
//! timeout and reading the answer; it never retries and never interprets
//! the answer.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use http_body_util::BodyExt;

/// How long a host may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET http://ADDRESS/PATH`: the status and the body as text.
pub async fn get(address: SocketAddr, path: &str) -> anyhow::Result<(hyper::StatusCode, String)> {
    let url = format!("http://{address}{path}");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: hyper::Uri = url.parse().with_context(|| format!("{url} is not a URL"))?;
    let response = tokio::time::timeout(ANSWER_TIMEOUT, client.get(uri))
        .await
        .with_context(|| format!("GET {url}: no answer in {ANSWER_TIMEOUT:?}"))?
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("GET {url}: reading the answer"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
