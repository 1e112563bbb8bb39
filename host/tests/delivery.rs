//! Guests delivered by a real OCI registry (Debian's docker-registry, TLS
//! and htpasswd, on loopback): `wasmctrl guest push/pull`, skopeo interop,
//! the host loading `NAME.oci` by digest, swapping, caching, and refusing
//! or waiting on every failure — real HTTPS, real kube client.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::hotswap::{logic, logic_version, swaps};
use crate::support::*;
use kube::Client;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::delivery::{Delivery, DeliveryConfig, OciReference};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_test_support::registry::{self, Registry, RegistryOptions};

const USER: &str = "pusher";
const PASSWORD: &str = "s3cret:with-colon";

/// A registry with TLS and a user, and the files a host or the CLI needs
/// to reach it (`.dockerconfigjson`, CA bundle).
struct Fixture {
    registry: Registry,
    files: tempfile::TempDir,
}

impl Fixture {
    fn start() -> Option<Fixture> {
        let registry = Registry::start(RegistryOptions::tls_with_user(USER, PASSWORD))?;
        let files = tempfile::tempdir().unwrap();
        std::fs::write(
            files.path().join("auth.json"),
            registry.docker_config(USER, PASSWORD),
        )
        .unwrap();
        std::fs::write(files.path().join("ca.pem"), registry.ca_pem().unwrap()).unwrap();
        Some(Fixture { registry, files })
    }

    fn auth(&self) -> PathBuf {
        self.files.path().join("auth.json")
    }

    fn ca(&self) -> PathBuf {
        self.files.path().join("ca.pem")
    }

    /// The delivery settings of a host or client trusting this registry.
    fn delivery(&self) -> DeliveryConfig {
        DeliveryConfig {
            auth_file: Some(self.auth()),
            ca_file: Some(self.ca()),
            ..DeliveryConfig::default()
        }
    }

    fn reference(&self, repo_tag: &str) -> OciReference {
        OciReference::parse(&format!("oci://{}/{repo_tag}", self.registry.host())).unwrap()
    }

    /// Pushes `wasm` as `repo_tag`; the reference pinned to its digest.
    async fn push(&self, wasm: &[u8], repo_tag: &str) -> OciReference {
        let reference = self.reference(repo_tag);
        let delivery = Delivery::new(self.delivery()).unwrap();
        let digest = delivery.push(wasm, &reference).await.unwrap();
        reference.pinned(&digest)
    }

    /// `wasmctrl` with this registry's credentials and CA.
    fn wasmctrl(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
            .args(args)
            .arg("--registry-auth")
            .arg(self.auth())
            .arg("--registry-ca")
            .arg(self.ca())
            .output()
            .unwrap()
    }
}

/// `wasm` grown to at least `size` bytes by a trailing custom section (a
/// component may carry any; the runtime ignores them), as large as the
/// Python guests the registry exists for.
fn padded(wasm: &[u8], size: usize) -> Vec<u8> {
    let name = b"padding";
    let payload = size.saturating_sub(wasm.len());
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.resize(body.len() + payload, 0);
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    let mut len = body.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        out.push(if len == 0 { byte } else { byte | 0x80 });
        if len == 0 {
            break;
        }
    }
    out.extend_from_slice(&body);
    out
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn pushed_guests_pull_back_by_digest_and_skopeo_copies_them_both_ways() {
    let Some(f) = Fixture::start() else { return };
    let Some(skopeo) = registry::skopeo() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let guest = guest_path();
    let wasm = std::fs::read(&guest).unwrap();
    let host = f.registry.host();

    let digest = stdout(&f.wasmctrl(&[
        "guest",
        "push",
        guest.to_str().unwrap(),
        &format!("{host}/guests/gpu:v1"),
    ]));
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    let out = work.path().join("pulled.wasm");
    let pulled = stdout(&f.wasmctrl(&[
        "guest",
        "pull",
        &format!("oci://{host}/guests/gpu@{digest}"),
        "-o",
        out.to_str().unwrap(),
    ]));
    assert_eq!(pulled, digest);
    assert_eq!(std::fs::read(&out).unwrap(), wasm);

    // skopeo reads what wasmctrl pushed: the manifest by its digest, the
    // component as its one layer.
    let creds = format!("{USER}:{PASSWORD}");
    let certs = f.registry.cert_dir().unwrap();
    let copied = work.path().join("skopeo-dir");
    let run = |args: &[&str]| {
        let out = Command::new(&skopeo).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "skopeo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "copy",
        "--src-creds",
        &creds,
        "--src-cert-dir",
        certs.to_str().unwrap(),
        &format!("docker://{host}/guests/gpu@{digest}"),
        &format!("dir:{}", copied.display()),
    ]);
    let manifest = std::fs::read(copied.join("manifest.json")).unwrap();
    assert_eq!(wasmctrl::delivery::sha256_digest(&manifest), digest);
    let layer = wasmctrl::delivery::sha256_digest(&wasm);
    assert_eq!(
        std::fs::read(copied.join(layer.trim_start_matches("sha256:"))).unwrap(),
        wasm
    );

    // And wasmctrl reads what skopeo pushed.
    run(&[
        "copy",
        "--dest-creds",
        &creds,
        "--dest-cert-dir",
        certs.to_str().unwrap(),
        &format!("dir:{}", copied.display()),
        &format!("docker://{host}/mirror/gpu:copied"),
    ]);
    let again = work.path().join("again.wasm");
    let pulled = stdout(&f.wasmctrl(&[
        "guest",
        "pull",
        &format!("{host}/mirror/gpu:copied"),
        "-o",
        again.to_str().unwrap(),
    ]));
    assert_eq!(pulled, digest, "skopeo kept the manifest byte for byte");
    assert_eq!(std::fs::read(&again).unwrap(), wasm);
}

#[test]
fn push_refuses_what_is_not_a_guest_and_pull_refuses_bad_credentials() {
    let Some(f) = Fixture::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let core = work.path().join("core.wasm");
    std::fs::write(&core, ::wat::parse_str("(module)").unwrap()).unwrap();
    let host = f.registry.host();
    let out = f.wasmctrl(&[
        "guest",
        "push",
        core.to_str().unwrap(),
        &format!("{host}/guests/core:v1"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("core.wasm") && err.contains("not pushed"),
        "{err}"
    );

    std::fs::write(f.auth(), f.registry.docker_config(USER, "wrong")).unwrap();
    let out = f.wasmctrl(&[
        "guest",
        "pull",
        &format!("{host}/guests/gpu:v1"),
        "-o",
        work.path().join("x.wasm").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused access") && err.contains("guests/gpu"),
        "{err}"
    );
    assert!(!work.path().join("x.wasm").exists(), "nothing written");
}

/// A ConfigMap-volume-style guest directory, with a host running it.
struct OciHost {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    running: RunningHost,
    metrics: Arc<Metrics>,
}

/// `NAME.oci` holding `reference`.
fn oci_file(name: &str, reference: &OciReference) -> (String, Vec<u8>) {
    (format!("{name}.oci"), format!("{reference}\n").into_bytes())
}

fn write_dir(dir: &Path, generation: u32, files: &[(String, Vec<u8>)]) {
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_like_kubelet(dir, generation, &files).unwrap();
}

async fn start_oci_host(
    client: &Client,
    files: &[(String, Vec<u8>)],
    delivery: DeliveryConfig,
) -> OciHost {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), 1, files);
    let cache = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::new());
    let config = SupervisorConfig {
        guest_dir: Some(dir.path().to_path_buf()),
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(None),
        rescan: Some(Duration::from_secs(60)),
        // Loads, swaps and refusals are Events on this Pod.
        pod: Some((HOST_NS.into(), "wasmctrl-0".into())),
        delivery: DeliveryConfig {
            cache_dir: delivery
                .cache_dir
                .clone()
                .or(Some(cache.path().to_path_buf())),
            ..delivery
        },
        ..SupervisorConfig::default()
    };
    OciHost {
        running: run_host(client, config, Some(metrics.clone())).await,
        dir,
        cache,
        metrics,
    }
}

fn cache_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("oci/sha256"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_named_by_digest_is_pulled_cached_swapped_and_kept_on_a_bad_reference() {
    let Some(f) = Fixture::start() else { return };
    let (_server, client) = server().await;
    let v1 = f.push(&logic("v1"), "guests/logic:v1").await;
    // The new version is 20 MB, as a Python guest is.
    let v2 = f
        .push(&padded(&logic("v2"), 20 << 20), "guests/logic:v2")
        .await;
    let h = start_oci_host(&client, &[oci_file("logic", &v1)], f.delivery()).await;
    eventually("v1 writes", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    // The manifest and the layer, each under its own digest; no temporary
    // file left beside them.
    let cached = cache_entries(h.cache.path());
    assert_eq!(cached.len(), 2, "{cached:?}");
    assert!(cached.contains(&v1.digest().unwrap()[7..].to_string()));

    write_dir(h.dir.path(), 2, &[oci_file("logic", &v2)]);
    eventually("v2 writes", || async {
        logic_version(&client).await.as_deref() == Some("v2")
    })
    .await;
    eventually("swap counted", || async {
        swaps(&h.metrics, "logic", "swapped") == 1.0
    })
    .await;

    // A digest the registry does not have: refused, v2 keeps running.
    let missing = v2.pinned(&format!("sha256:{}", "0".repeat(64)));
    write_dir(h.dir.path(), 3, &[oci_file("logic", &missing)]);
    eventually("the missing digest is rejected", || async {
        swaps(&h.metrics, "logic", "rejected") == 1.0
    })
    .await;
    assert!(h.running.host.controller("logic").is_some());
    assert_eq!(logic_version(&client).await.as_deref(), Some("v2"));
    assert!(h.running.host.readiness().is_ok(), "a version runs");
    let guests = h.running.host.guests_json().to_string();
    assert!(
        guests.contains(&missing.to_string()) && guests.contains("not found"),
        "/guests names the refused reference: {guests}"
    );

    // A tag while tags are not allowed: refused the same way, by name.
    write_dir(
        h.dir.path(),
        4,
        &[(
            "logic.oci".into(),
            f.reference("guests/logic:v1").to_string().into_bytes(),
        )],
    );
    eventually("the tag is rejected", || async {
        swaps(&h.metrics, "logic", "rejected") == 2.0
    })
    .await;

    // With the registry down, v1 comes back from the cache.
    let mut registry = f.registry;
    registry.stop();
    write_dir(h.dir.path(), 5, &[oci_file("logic", &v1)]);
    eventually("v1 again, from the cache", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_down_at_start_keeps_its_guest_waiting_while_the_others_run() {
    let Some(mut f) = Fixture::start() else {
        return;
    };
    let (_server, client) = server().await;
    let v1 = f.push(&logic("v1"), "guests/logic:v1").await;
    f.registry.stop();
    let gpu = std::fs::read(guest_path()).unwrap();
    let h = start_oci_host(
        &client,
        &[
            oci_file("logic", &v1),
            ("gpu-summary.wasm".into(), gpu.clone()),
        ],
        f.delivery(),
    )
    .await;
    pod("a").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    let not_ready = h.running.host.readiness().unwrap_err();
    assert_eq!(not_ready.guest, "logic");
    assert!(
        not_ready.why.contains("registry") && not_ready.why.contains(&v1.to_string()),
        "{not_ready}"
    );
    // `/guests` shows where it comes from and why it waits.
    let guests = h.running.host.guests_json();
    let logic = guests["guests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "logic")
        .unwrap()
        .clone();
    assert_eq!(logic["source"]["type"], "oci", "{logic}");
    assert_eq!(logic["source"]["reference"], v1.to_string(), "{logic}");
    assert_eq!(logic["state"], "waiting", "{logic}");
    assert_eq!(logic["reason"], "oci_unreachable", "{logic}");
    let events = events_with_reason(&client, Some(HOST_NS), "GuestWaiting").await;
    let notes: Vec<String> = events.iter().filter_map(|e| e.note.clone()).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("guest logic") && n.contains(&v1.to_string())),
        "{notes:?}"
    );

    f.registry.restart();
    eventually("logic starts once its registry is back", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    eventually("ready", || async { h.running.host.readiness().is_ok() }).await;
    h.running.stop().await.unwrap();
}

/// Pushes a manifest of the Wasm layout whose layer is `layer` with
/// `media_type` (through oci-client, as another tool would).
async fn push_raw(f: &Fixture, repo_tag: &str, layer: &[u8], media_type: &str) -> OciReference {
    use oci_client::client::{ClientConfig, Config, ImageLayer};
    use oci_client::secrets::RegistryAuth;
    let reference = f.reference(repo_tag);
    let image: oci_client::Reference = format!("{}/{repo_tag}", f.registry.host()).parse().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: f.registry.ca_pem().unwrap().as_bytes().to_vec(),
        }],
        ..ClientConfig::default()
    });
    let layers = [ImageLayer::new(layer.to_vec(), media_type.into(), None)];
    let config = Config::new(
        br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec(),
        wasmctrl::delivery::WASM_CONFIG_MEDIA_TYPE.into(),
        None,
    );
    let auth = RegistryAuth::Basic(USER.into(), PASSWORD.into());
    client
        .push(&image, &layers, config, &auth, None)
        .await
        .unwrap();
    let (_, digest) = client
        .pull_manifest_raw(
            &image,
            &auth,
            &["application/vnd.oci.image.manifest.v1+json"],
        )
        .await
        .unwrap();
    reference.pinned(&digest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_delivery_is_refused_naming_the_guest_and_the_reference() {
    let Some(f) = Fixture::start() else { return };
    let (_server, client) = server().await;
    let good = f.push(&logic("v1"), "guests/logic:v1").await;
    let big = f.push(&logic("big"), "guests/big:v1").await;
    let core = push_raw(
        &f,
        "guests/core:v1",
        &::wat::parse_str("(module)").unwrap(),
        "application/wasm",
    )
    .await;
    let tar = push_raw(
        &f,
        "guests/tar:v1",
        b"not wasm",
        "application/vnd.oci.image.layer.v1.tar",
    )
    .await;
    let cut = f.push(&logic("x"), "guests/cut:v1").await;
    // The registry's copy of `cut`'s layer loses its tail: it serves a
    // short body.
    let layer = wasmctrl::delivery::sha256_digest(&logic("x"));
    let hex = &layer[7..];
    let blob = f.registry.storage().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let bytes = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &bytes[..bytes.len() / 2]).unwrap();
    let missing = good.pinned(&format!("sha256:{}", "1".repeat(64)));

    // Sized so that `big` alone is over the cap.
    let cap = logic("big").len() as u64 - 1;
    assert!(logic("v1").len() as u64 <= cap);
    let creds = tempfile::tempdir().unwrap();
    let bad_auth = creds.path().join("auth.json");
    std::fs::write(&bad_auth, f.registry.docker_config(USER, "nope")).unwrap();
    let wrong_creds = DeliveryConfig {
        auth_file: Some(bad_auth),
        ..f.delivery()
    };

    let cases: Vec<(&str, OciReference, &str)> = vec![
        ("missing", missing, "not found"),
        ("core", core, "core wasm module"),
        ("tar", tar, "not application/wasm"),
        ("big", big, "over the limit"),
        ("cut", cut, "truncated"),
    ];
    // A healthy guest beside them: the host starts and serves.
    let gpu = (
        "gpu-summary.wasm".to_string(),
        std::fs::read(guest_path()).unwrap(),
    );
    let files: Vec<(String, Vec<u8>)> = cases
        .iter()
        .map(|(name, r, _)| oci_file(name, r))
        .chain([gpu.clone()])
        .collect();
    let h = start_oci_host(
        &client,
        &files,
        DeliveryConfig {
            max_bytes: cap,
            // The truncated layer's body stops short of its declared
            // length: the read ends at this timeout.
            timeout: Duration::from_secs(3),
            ..f.delivery()
        },
    )
    .await;
    let refused = h.running.host.refused();
    for (name, reference, why) in &cases {
        let line = refused
            .iter()
            .find(|l| l.contains(&format!("guest {name}:")))
            .unwrap_or_else(|| panic!("{name} not refused: {refused:?}"));
        assert!(
            line.contains(&reference.to_string()) && line.contains(why),
            "{name}: {line}"
        );
    }
    // Nothing of a refused guest reached the cache.
    assert!(
        cache_entries(h.cache.path()).is_empty(),
        "{:?}",
        cache_entries(h.cache.path())
    );
    h.running.stop().await.unwrap();

    // Wrong credentials: refused (401), named.
    let h = start_oci_host(&client, &[oci_file("logic", &good), gpu], wrong_creds).await;
    let refused = h.running.host.refused().join("\n");
    assert!(
        refused.contains("guest logic:")
            && refused.contains("refused access")
            && refused.contains(&good.to_string()),
        "{refused}"
    );
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_cannot_be_written_is_named_and_the_guest_still_runs() {
    let Some(f) = Fixture::start() else { return };
    let (_server, client) = server().await;
    let v1 = f.push(&logic("v1"), "guests/logic:v1").await;
    let not_a_dir = tempfile::NamedTempFile::new().unwrap();
    crate::support::logs::capture();
    let h = start_oci_host(
        &client,
        &[oci_file("logic", &v1)],
        DeliveryConfig {
            cache_dir: Some(not_a_dir.path().to_path_buf()),
            ..f.delivery()
        },
    )
    .await;
    eventually("v1 writes", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    let path = not_a_dir.path().display().to_string();
    let lines = crate::support::logs::containing(&["cannot write", &path, &v1.to_string()]);
    assert!(
        !lines.is_empty(),
        "no warning naming the cache and the reference"
    );
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_tag_over_plain_http_is_resolved_and_a_moved_tag_swaps_the_guest() {
    let Some(registry) = Registry::start(RegistryOptions::plain()) else {
        return;
    };
    let (_server, client) = server().await;
    let plain = DeliveryConfig {
        insecure_registries: vec![registry.host()],
        allow_tags: true,
        tag_interval: Duration::from_secs(1),
        ..DeliveryConfig::default()
    };
    let live =
        OciReference::parse(&format!("oci://{}/guests/logic:live", registry.host())).unwrap();
    let pusher = Delivery::new(plain.clone()).unwrap();
    let v1 = pusher.push(&logic("v1"), &live).await.unwrap();

    // Without the insecure-registry flag the host speaks TLS to it, and
    // refuses the guest rather than falling back to plain HTTP.
    let https_only = Delivery::new(DeliveryConfig {
        insecure_registries: Vec::new(),
        ..plain.clone()
    })
    .unwrap();
    assert!(https_only.pull(&live).await.is_err());

    let h = start_oci_host(
        &client,
        &[("logic.oci".into(), live.to_string().into_bytes())],
        plain,
    )
    .await;
    eventually("v1 writes", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    assert!(h.running.host.readiness().is_ok());

    let v2 = pusher.push(&logic("v2"), &live).await.unwrap();
    assert_ne!(v1, v2);
    eventually("the moved tag swaps in v2", || async {
        logic_version(&client).await.as_deref() == Some("v2")
    })
    .await;
    eventually("swap counted", || async {
        swaps(&h.metrics, "logic", "swapped") == 1.0
    })
    .await;
    h.running.stop().await.unwrap();
}
