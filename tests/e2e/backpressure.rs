//! The Kubernetes API pushing back: an apiserver (or an admission webhook behind it) that answers
//! 429 Too Many Requests, as API Priority and Fairness does under load. slurmops tries a write a
//! bounded number of times and then says why; it never sits for minutes inside one call (kube's
//! default client retries 429/503/504 fifteen times with a backoff of up to 1,000 s).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{TestEnv, bed, cluster_head};

/// A busy webhook on 127.0.0.1 (tests/e2e/support/busy_webhook.py) with its own self-signed
/// certificate; stopped when dropped.
struct BusyWebhook {
    child: std::process::Child,
    ca: String,
    port: u16,
    _dir: tempfile::TempDir,
}

impl BusyWebhook {
    fn start() -> BusyWebhook {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let out = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/e2e/support/busy_webhook.py"
            ))
            .arg(port.to_string())
            .args([&cert, &key])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert_eq!(first.trim(), "listening");
        let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cert).unwrap());
        BusyWebhook {
            child,
            ca,
            port,
            _dir: dir,
        }
    }
}

impl Drop for BusyWebhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_answering_429_fails_apply_in_seconds_with_the_reason_not_minutes_of_retries() {
    let env = TestEnv::new("busy").await;
    env.grant_slurmops_role().await;
    let hook = BusyWebhook::start();
    // Only this test's namespace goes through the busy webhook, and only its ConfigMap writes.
    let label = format!("slurmops-test-busy-{}", env.suffix);
    Api::<Namespace>::all(env.client.clone())
        .patch(
            &env.ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {&label: "yes"}}})),
        )
        .await
        .unwrap();
    let name = format!("busy-{}", env.suffix);
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "busy.slurmops.test",
            "clientConfig": {"url": format!("https://127.0.0.1:{}/", hook.port), "caBundle": hook.ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {&label: "yes"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    });
    let hooks: Api<kube::api::DynamicObject> = Api::all_with(
        env.client.clone(),
        &kube::api::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: "ValidatingWebhookConfiguration".into(),
            plural: "validatingwebhookconfigurations".into(),
        },
    );
    hooks
        .patch(
            &name,
            &PatchParams::apply("test-setup"),
            &Patch::Apply(&config),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let yaml = cluster_head("c", &env.ns)
        + "  nodeSets:\n    - {name: w, replicas: 0, cpu: \"1\", memory: 256Mi}\n  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n";
    std::fs::write(dir.path().join("cluster.yaml"), yaml).unwrap();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["apply", dir.path().to_str().unwrap(), "--wait", "0s"])
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .env_remove("SLURMRESTD_URL")
        .env_remove("SLURM_JWT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let _ = hooks.delete(&name, &DeleteParams::default()).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(HTTP 429)") && err.contains("busy-webhook: too many requests"),
        "{err}"
    );
    // apply's own bounded retry (4 attempts, 250 ms backoff doubling) and nothing beneath it.
    assert!(
        took < Duration::from_secs(30),
        "apply took {took:?} against an API answering 429: {err}"
    );
    drop(hook);
    env.cleanup().await;
}
