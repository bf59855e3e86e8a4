//! The release and its image: the workflow publishes the image where `slurmops install` looks for
//! it, built by the same script the bed deploys (scripts/image.py); the script's archive is an
//! OCI layout with one platform per binary, the non-root user, and refuses a binary the image
//! cannot run.

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A minimal static ELF header (no program header, so no interpreter) for MACHINE.
fn elf(machine: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2; // 64-bit
    b[5] = 1; // little-endian
    b[6] = 1;
    b[0x10] = 2; // ET_EXEC
    b[0x12..0x14].copy_from_slice(&machine.to_le_bytes());
    b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize, e_phnum = 0
    b
}

fn image(args: &[String]) -> std::process::Output {
    Command::new("python3")
        .arg(Path::new(ROOT).join("scripts/image.py"))
        .args(args)
        .output()
        .expect("python3")
}

fn untar(archive: &Path, member: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .output()
        .unwrap();
    assert!(out.status.success(), "{member} in {}", archive.display());
    out.stdout
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

fn blob(archive: &Path, digest: &str) -> Vec<u8> {
    untar(
        archive,
        &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
    )
}

#[test]
fn the_release_publishes_the_image_install_uses_with_the_image_script() {
    let workflow =
        std::fs::read_to_string(Path::new(ROOT).join(".github/workflows/release.yml")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["install", "--print", "--repo", "https://git.example/x.git"])
        .output()
        .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    let want = format!(
        "image: ghcr.io/slurmops/slurmops:{}",
        env!("CARGO_PKG_VERSION")
    );
    assert!(printed.contains(&want), "install prints {want}");
    // The tag vX.Y.Z publishes ghcr.io/slurmops/slurmops:X.Y.Z, X.Y.Z being Cargo.toml's version.
    assert!(workflow.contains("test \"v$version\" = \"$GITHUB_REF_NAME\""));
    assert!(workflow.contains("--tag ghcr.io/slurmops/slurmops:$version"));
    assert!(workflow.contains("docker://ghcr.io/slurmops/slurmops:$version"));
    assert!(workflow.contains("python3 scripts/image.py daemon"));
    assert!(workflow.contains("--binary amd64=") && workflow.contains("--binary arm64="));
    // The binaries released are built again with the pushed image's digest, and say it.
    let job = |name: &str| {
        let from = workflow
            .find(&format!("\n  {name}:\n"))
            .unwrap_or_else(|| panic!("no job {name}"))
            + 1;
        let rest = &workflow[from..];
        // The job ends where the next one starts: a line indented by exactly two spaces.
        let end = rest
            .match_indices("\n  ")
            .find(|(i, _)| !rest[i + 3..].starts_with(' '))
            .map_or(rest.len(), |(i, _)| i);
        rest[..end].to_string()
    };
    assert!(workflow.contains("--digestfile digest"));
    let pinned = job("pinned");
    assert!(pinned.contains("SLURMOPS_IMAGE_DIGEST: ${{ needs.publish.outputs.digest }}"));
    assert!(
        pinned.contains("grep -F \"@$SLURMOPS_IMAGE_DIGEST\""),
        "{pinned}"
    );
    let release = job("release");
    assert!(release.contains("pattern: pinned-*") && release.contains("gh release create"));
    // The bed builds what it deploys with the same script.
    let bed =
        std::fs::read_to_string(Path::new(ROOT).join("tests/e2e/support/real_node.rs")).unwrap();
    assert!(bed.contains("scripts/image.py") && bed.contains("\"daemon\""));
}

#[test]
fn the_image_script_writes_one_platform_per_binary_running_as_nonroot() {
    let dir = tempfile::tempdir().unwrap();
    let (amd, arm) = (dir.path().join("amd64"), dir.path().join("arm64"));
    std::fs::write(&amd, elf(62)).unwrap();
    std::fs::write(&arm, elf(183)).unwrap();
    let archive = dir.path().join("image.tar");
    let out = image(&[
        "daemon".into(),
        format!("--binary=amd64={}", amd.display()),
        format!("--binary=arm64={}", arm.display()),
        "--tag=ghcr.io/slurmops/slurmops:9.9.9".into(),
        format!("--output={}", archive.display()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        untar(&archive, "oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#
    );
    let index = json(&untar(&archive, "index.json"));
    let top = &index["manifests"][0];
    assert_eq!(
        top["annotations"]["org.opencontainers.image.ref.name"],
        "ghcr.io/slurmops/slurmops:9.9.9"
    );
    assert_eq!(top["mediaType"], "application/vnd.oci.image.index.v1+json");
    let platforms = json(&blob(&archive, top["digest"].as_str().unwrap()));
    let mut arches = Vec::new();
    for m in platforms["manifests"].as_array().unwrap() {
        let manifest = json(&blob(&archive, m["digest"].as_str().unwrap()));
        let config = json(&blob(
            &archive,
            manifest["config"]["digest"].as_str().unwrap(),
        ));
        assert_eq!(config["architecture"], m["platform"]["architecture"]);
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/usr/local/bin/slurmops"])
        );
        assert_eq!(config["config"]["Cmd"], serde_json::json!(["run"]));
        // The layer holds the binary of its platform, the CA bundle and the nonroot user.
        let layer = dir.path().join("layer.tar.gz");
        std::fs::write(
            &layer,
            blob(&archive, manifest["layers"][0]["digest"].as_str().unwrap()),
        )
        .unwrap();
        let listing = Command::new("tar")
            .arg("-tvzf")
            .arg(&layer)
            .output()
            .unwrap();
        let listing = String::from_utf8(listing.stdout).unwrap();
        for f in [
            "usr/local/bin/slurmops",
            "etc/ssl/certs/ca-certificates.crt",
            "etc/passwd",
            "etc/group",
        ] {
            assert!(listing.contains(f), "{f} in the layer:\n{listing}");
        }
        let passwd = Command::new("tar")
            .arg("-xzOf")
            .arg(&layer)
            .arg("etc/passwd")
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&passwd.stdout).contains("nonroot:x:65532:65532"));
        let bin = Command::new("tar")
            .arg("-xzOf")
            .arg(&layer)
            .arg("usr/local/bin/slurmops")
            .output()
            .unwrap();
        let machine = u16::from_le_bytes([bin.stdout[0x12], bin.stdout[0x13]]);
        arches.push((
            m["platform"]["architecture"].as_str().unwrap().to_string(),
            machine,
        ));
    }
    assert_eq!(arches, [("amd64".into(), 62), ("arm64".into(), 183)]);

    // Reproducible: the same binaries give the same digest.
    let again = dir.path().join("again.tar");
    let out = image(&[
        "daemon".into(),
        format!("--binary=amd64={}", amd.display()),
        format!("--binary=arm64={}", arm.display()),
        "--tag=ghcr.io/slurmops/slurmops:9.9.9".into(),
        format!("--output={}", again.display()),
    ]);
    assert!(out.status.success());
    assert_eq!(json(&untar(&again, "index.json")), index);
}

#[test]
fn the_image_script_refuses_a_binary_the_image_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let arm = dir.path().join("arm64");
    std::fs::write(&arm, elf(183)).unwrap();
    // A binary of another architecture.
    let out = image(&[
        "daemon".into(),
        format!("--binary=amd64={}", arm.display()),
        "--tag=t".into(),
        format!("--output={}", dir.path().join("x.tar").display()),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a program for amd64"));
    // A dynamically linked one: the image holds no C library.
    let out = image(&[
        "daemon".into(),
        "--binary=amd64=/bin/sh".into(),
        "--tag=t".into(),
        format!("--output={}", dir.path().join("x.tar").display()),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dynamically linked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.path().join("x.tar").exists(), "nothing written");
}
