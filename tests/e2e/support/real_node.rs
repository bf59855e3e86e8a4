//! The real node (tests/bed/node.sh): kube-scheduler, kubelet, containerd and runc on a control
//! plane of their own, pods on a CNI bridge inside this machine. Started by the first test that
//! needs it, stopped with the bed (`bed.sh down`). And the images those pods run, built here with
//! the repository's own image script (scripts/image.py) and imported into the node's containerd.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub struct RealNode {
    /// The admin kubeconfig of the node's control plane (system:masters).
    pub kubeconfig: PathBuf,
    pub kube_url: String,
    /// The Node's name.
    pub node: String,
    pub containerd_sock: PathBuf,
    /// The bridge's address, as pods reach the bed's loopback services (git, Slurm) on it.
    pub pod_gateway: String,
}

/// The running real node; starts it on first use in this process.
pub fn real_node() -> &'static RealNode {
    static NODE: OnceLock<RealNode> = OnceLock::new();
    NODE.get_or_init(|| {
        let env = super::bed::script_env("tests/bed/node.sh", &["up".as_ref()], "the real node");
        let get = |k: &str| {
            env.get(k)
                .cloned()
                .unwrap_or_else(|| panic!("tests/bed/node.sh up did not report {k}"))
        };
        RealNode {
            kubeconfig: get("REAL_KUBECONFIG_ADMIN").into(),
            kube_url: get("REAL_KUBE_URL"),
            node: get("REAL_NODE"),
            containerd_sock: get("REAL_CONTAINERD_SOCK").into(),
            pod_gateway: get("REAL_POD_GATEWAY"),
        }
    })
}

/// The static binary the daemon's image is made of: `$SLURMOPS_STATIC_BIN`, else this build's
/// own slurmops when it is statically linked (tests/run-all.sh builds the tests so), else the
/// static release binary.
pub fn static_binary() -> PathBuf {
    if let Ok(p) = std::env::var("SLURMOPS_STATIC_BIN") {
        return p.into();
    }
    let own = PathBuf::from(env!("CARGO_BIN_EXE_slurmops"));
    if is_static(&own) {
        return own;
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let p = Path::new(&target).join("x86_64-unknown-linux-gnu/release/slurmops");
    assert!(
        p.is_file() && is_static(&p),
        "no static slurmops to build the daemon's image from: {} is dynamically linked and {} is \
         missing or dynamic. Build the tests as tests/run-all.sh does (RUSTFLAGS=\"-C \
         target-feature=+crt-static\" OPENSSL_STATIC=1 cargo nextest run --target \
         x86_64-unknown-linux-gnu), or a static release binary, or set SLURMOPS_STATIC_BIN",
        own.display(),
        p.display()
    );
    p
}

/// Whether the ELF executable at PATH is statically linked: it names no program interpreter (no
/// `PT_INTERP` program header), so it runs in an image with no libc.
fn is_static(path: &Path) -> bool {
    let Ok(elf) = std::fs::read(path) else {
        return false;
    };
    let word = |at: usize, n: usize| -> Option<u64> {
        let b = elf.get(at..at + n)?;
        Some(b.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x)))
    };
    // A little-endian ELF64 file: program headers at e_phoff, e_phnum of e_phentsize bytes each.
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return false;
    }
    let (Some(phoff), Some(size), Some(count)) = (word(0x20, 8), word(0x36, 2), word(0x38, 2))
    else {
        return false;
    };
    (0..count).all(|i| word((phoff + i * size) as usize, 4).is_some_and(|kind| kind != 3))
}

/// The reference `slurmops install` defaults to: the release workflow publishes the image there.
pub fn default_daemon_image() -> String {
    format!("ghcr.io/slurmops/slurmops:{}", env!("CARGO_PKG_VERSION"))
}

/// The image built from an archive: its size in bytes and its id (the config's digest, what the
/// kubelet reports as a container's `imageID`).
pub struct Imported {
    pub size: u64,
    pub id: String,
}

/// The config digest of the single-platform image in the OCI archive ARCHIVE.
fn image_id(archive: &Path) -> String {
    let read = |member: &str| {
        let out = Command::new("tar")
            .arg("-xOf")
            .arg(archive)
            .arg(member)
            .output()
            .unwrap();
        assert!(out.status.success(), "{member} in {}", archive.display());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let index = read("index.json");
    let manifest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let manifest = read(&format!(
        "blobs/sha256/{}",
        manifest.trim_start_matches("sha256:")
    ));
    manifest["config"]["digest"].as_str().unwrap().to_string()
}

/// Builds the daemon's image from BINARY with scripts/image.py, as the release workflow does,
/// tagged TAG, and imports it into the node's containerd.
pub fn import_daemon_image(binary: &Path, tag: &str) -> Imported {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("slurmops.oci.tar");
    let out = Command::new("python3")
        .arg("scripts/image.py")
        .arg("daemon")
        .arg(format!("--binary=amd64={}", binary.display()))
        .args(["--tag", tag, "--output"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/image.py daemon failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&archive).unwrap().len();
    let id = image_id(&archive);
    let out = Command::new("bash")
        .args(["tests/bed/node.sh", "import"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "importing {tag} into the node's containerd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Imported { size, id }
}

/// `ctr` against the node's containerd, in the namespace the kubelet uses.
pub fn ctr(args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(&real_node().containerd_sock)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()
        .expect("run ctr");
    assert!(
        out.status.success(),
        "ctr {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
