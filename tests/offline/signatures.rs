//! Commit signatures as `ssh-keygen -Y sign -n git` (what `git commit -S` with gpg.format=ssh
//! runs) makes them, verified by slurmops: Ed25519, ECDSA and RSA keys; the allowed-signers
//! options `namespaces=`, `valid-after=`, `valid-before=` as ssh-keygen honours them (against the
//! committer time); `cert-authority` refused when the file is read.

use std::path::Path;
use std::process::Command;

use slurmops::source::signature::AllowedSigners;

/// A commit object's text made at UNIX time T (what git signs).
fn commit_at(t: i64) -> Vec<u8> {
    format!(
        "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@example> {t} +0000\ncommitter C <c@example> {t} +0000\n\nchange\n"
    )
    .into_bytes()
}

/// A new key of TYPE in DIR: (private key path, public key line).
fn keygen(dir: &Path, kind: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(format!("id_{kind}"));
    let _ = std::fs::remove_file(&key);
    let _ = std::fs::remove_file(key.with_extension("pub"));
    let mut args = vec!["-q", "-t", kind, "-N", "", "-f"];
    let k = key.to_str().unwrap().to_string();
    args.push(&k);
    if kind == "rsa" {
        args.extend(["-b", "2048"]);
    }
    assert!(
        Command::new("ssh-keygen")
            .args(&args)
            .status()
            .unwrap()
            .success()
    );
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

fn sign(dir: &Path, key: &Path, data: &[u8], namespace: &str) -> Vec<u8> {
    let file = dir.join("commit");
    std::fs::write(&file, data).unwrap();
    let _ = std::fs::remove_file(file.with_extension("sig"));
    let out = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", namespace, "-f"])
        .arg(key)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(file.with_extension("sig")).unwrap()
}

const T: i64 = 1_750_000_000; // 2025-06-15T15:06:40Z

#[test]
fn ed25519_ecdsa_and_rsa_keys_verify_and_options_bound_them() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["ed25519", "ecdsa", "rsa"] {
        let (key, public) = keygen(dir.path(), kind);
        let data = commit_at(T);
        let sig = sign(dir.path(), &key, &data, "git");
        let verify = |options: &str| {
            let line = format!("ci@example {options} {public}");
            AllowedSigners::parse("allowed_signers", &line)
                .unwrap()
                .verify("abcdef0123456789", Some(&(sig.clone(), data.clone())))
        };
        let who = verify("").unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(who, "ci@example", "{kind}");
        assert!(verify(r#"namespaces="git,file""#).is_ok(), "{kind}");
        let err = verify(r#"namespaces="file""#).unwrap_err();
        assert!(err.contains("do not include git"), "{kind}: {err}");
        assert!(verify("valid-after=20250101").is_ok());
        let err = verify("valid-after=20250701").unwrap_err();
        assert!(err.contains("before its valid-after"), "{err}");
        let err = verify(r#"valid-before="20250615150000Z""#).unwrap_err();
        assert!(err.contains("after its valid-before"), "{err}");
        assert!(verify("valid-after=20250615,valid-before=20250616").is_ok());
        // Signed data changed: refused.
        let forged = AllowedSigners::parse("a", &format!("ci@example {public}"))
            .unwrap()
            .verify("abcdef0123456789", Some(&(sig.clone(), commit_at(T + 1))));
        assert!(forged.unwrap_err().contains("bad signature"), "{kind}");
    }
    // A signature made for another namespace is not a git signature.
    let (key, public) = keygen(dir.path(), "ed25519");
    let data = commit_at(T);
    let sig = sign(dir.path(), &key, &data, "file");
    let allowed = AllowedSigners::parse("a", &format!("ci@example {public}")).unwrap();
    assert!(
        allowed
            .verify("abcdef0123456789", Some(&(sig, data)))
            .is_err()
    );
}

#[test]
fn unsupported_or_malformed_options_are_refused_when_the_file_is_read() {
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvWzHYtvoDaGV0QoGTWBgSOJ5dmDr9FpTjmfbHc7jWn";
    for (options, expect) in [
        ("cert-authority", "not supported"),
        ("valid-after=yesterday", "bad valid-after"),
        ("no-touch-required,bogus=1", "unknown option"),
    ] {
        let err =
            AllowedSigners::parse("allowed_signers", &format!("ci {options} {key}")).unwrap_err();
        assert!(
            err.starts_with("allowed_signers:1: ") && err.contains(expect),
            "{err}"
        );
    }
}

/// `gpg` in HOME at the faked time AT (`YYYYMMDDThhmmss`), frozen: each run starts from AT, so a
/// clock left running would make the second of two runs see what the first made a second
/// "in the future" (seen in CI: `Key generation failed: Time conflict`); its stdout.
fn gpg(home: &Path, at: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new("gpg")
        .env("GNUPGHOME", home)
        .args([
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ])
        .args(["--faked-system-time", &format!("{at}!")])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gpg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A GnuPG home of its own (mode 0700, as gpg wants it).
fn gpg_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    home
}

/// The primary key fingerprint of the key of UID in HOME.
fn fingerprint(home: &Path, uid: &str) -> String {
    let listed = String::from_utf8(gpg(
        home,
        "20250101T000000",
        &["--with-colons", "--list-keys", uid],
    ))
    .unwrap();
    listed
        .lines()
        .find_map(|l| {
            l.strip_prefix("fpr:")
                .map(|r| r.trim_matches(':').to_string())
        })
        .unwrap()
}

/// A commit made on 2025-01-03, signed then (armored, detached) by SIGNER's key: (commit, signature).
fn signed_commit(home: &Path, signer: &str) -> (Vec<u8>, Vec<u8>) {
    let data = commit_at(1_735_862_400);
    let file = home.join("commit");
    std::fs::write(&file, &data).unwrap();
    let asc = home.join("commit.asc");
    gpg(
        home,
        "20250103T000000",
        &[
            "--armor",
            "--detach-sign",
            "-u",
            signer,
            "-o",
            asc.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
    );
    (data, std::fs::read(&asc).unwrap())
}

#[test]
fn openpgp_keys_that_expired_or_were_revoked_before_the_signature_are_refused() {
    let home = gpg_home();
    let h = home.path();
    gpg(
        h,
        "20250101T000000",
        &[
            "--quick-gen-key",
            "CI <ci@example>",
            "ed25519",
            "sign",
            "never",
        ],
    );
    let fpr = fingerprint(h, "ci@example");
    // A commit made and signed on 2025-01-03.
    let (data, sig) = signed_commit(h, &fpr);
    let verify = || {
        let key =
            String::from_utf8(gpg(h, "20250110T000000", &["--armor", "--export", &fpr])).unwrap();
        let mut allowed = AllowedSigners::default();
        allowed.add_gpg("allowed_gpg_keys", &key).unwrap();
        allowed.verify("abcdef0123456789", Some(&(sig.clone(), data.clone())))
    };
    assert_eq!(verify().unwrap(), fpr);
    // The key set (on 2025-01-01 noon, for one day) to expire before the signature: refused.
    gpg(h, "20250101T120000", &["--quick-set-expire", &fpr, "1d"]);
    let err = verify().unwrap_err();
    assert!(err.contains("expired"), "{err}");
    // Extended again, then revoked with its revocation certificate: refused.
    gpg(h, "20250105T000000", &["--quick-set-expire", &fpr, "0"]);
    assert!(verify().is_ok());
    let rev = h.join("rev.asc");
    std::fs::write(
        &rev,
        rev_text(&std::fs::read_to_string(h.join(format!("openpgp-revocs.d/{fpr}.rev"))).unwrap()),
    )
    .unwrap();
    gpg(h, "20250106T000000", &["--import", rev.to_str().unwrap()]);
    let err = verify().unwrap_err();
    assert!(err.contains("revoked"), "{err}");
}

/// gpg's stored revocation certificate, made importable (its armor line is escaped with `:`).
fn rev_text(stored: &str) -> String {
    stored
        .lines()
        .map(|l| l.strip_prefix(':').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn another_keys_certification_does_not_lift_an_expiry() {
    // A keyserver's copy of a certificate carries whatever certifications others made of it. One
    // newer than the owner's self-signature, and without an expiry of its own, must not count.
    let home = gpg_home();
    let h = home.path();
    for uid in ["CI <ci@example>", "Other <other@example>"] {
        gpg(
            h,
            "20250101T000000",
            &["--quick-gen-key", uid, "ed25519", "sign", "never"],
        );
    }
    let (fpr, other) = (
        fingerprint(h, "ci@example"),
        fingerprint(h, "other@example"),
    );
    // A commit signed on 2025-01-03; CI's key then set (dated 2025-01-01 noon) to expire one day
    // after it was made, so before the signature.
    let (data, sig) = signed_commit(h, &format!("{fpr}!"));
    gpg(h, "20250101T120000", &["--quick-set-expire", &fpr, "1d"]);
    // The other key certifies CI's user ID later that day (no expiry in its signature).
    gpg(
        h,
        "20250101T180000",
        &["-u", &other, "--quick-sign-key", &fpr, "CI <ci@example>"],
    );
    let key = String::from_utf8(gpg(h, "20250101T190000", &["--armor", "--export", &fpr])).unwrap();
    let mut allowed = AllowedSigners::default();
    allowed.add_gpg("allowed_gpg_keys", &key).unwrap();
    let err = allowed
        .verify("abcdef0123456789", Some(&(sig, data)))
        .unwrap_err();
    assert!(err.contains("expired"), "{err}");
}

#[test]
fn a_subkey_bound_by_another_key_signs_for_nobody() {
    // Another key's signing subkey, its binding signature and all, appended to an allowed
    // certificate (a keyserver merges what it is sent): a signature by it is not the owner's.
    use pgp::composed::{Deserializable, SignedPublicKey};
    let home = gpg_home();
    let h = home.path();
    let at = "20250101T000000";
    let mut fprs = Vec::new();
    for uid in ["CI <ci@example>", "Other <other@example>"] {
        gpg(h, at, &["--quick-gen-key", uid, "ed25519", "cert", "never"]);
        let fpr = fingerprint(h, uid);
        gpg(
            h,
            at,
            &["--quick-add-key", &fpr, "ed25519", "sign", "never"],
        );
        fprs.push(fpr);
    }
    // Signed by the other key's signing subkey.
    let (data, sig) = signed_commit(h, &fprs[1]);
    let export = |fpr: &str| {
        let text = String::from_utf8(gpg(h, at, &["--armor", "--export", fpr])).unwrap();
        SignedPublicKey::from_string(&text).unwrap().0
    };
    let (mut ci, other) = (export(&fprs[0]), export(&fprs[1]));
    ci.public_subkeys.extend(other.public_subkeys);
    let grafted = ci.to_armored_string(Default::default()).unwrap();
    let mut allowed = AllowedSigners::default();
    allowed.add_gpg("allowed_gpg_keys", &grafted).unwrap();
    let err = allowed
        .verify("abcdef0123456789", Some(&(sig.clone(), data.clone())))
        .unwrap_err();
    assert!(err.contains("binding"), "{err}");
    // The other key's own certificate, allowed, does accept it: the signature itself is sound.
    let mut theirs = AllowedSigners::default();
    let text = String::from_utf8(gpg(h, at, &["--armor", "--export", &fprs[1]])).unwrap();
    theirs.add_gpg("allowed_gpg_keys", &text).unwrap();
    assert_eq!(
        theirs
            .verify("abcdef0123456789", Some(&(sig, data)))
            .unwrap(),
        fprs[1]
    );
}
