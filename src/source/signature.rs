//! Commit signature verification: the daemon applies only commits signed by an allowed key,
//! verified in-process. SSH signatures (`gpg.format=ssh`, namespace `git`) against an
//! allowed-signers file (git's `gpg.ssh.allowedSignersFile` format: `PRINCIPALS [OPTIONS] KEYTYPE
//! BASE64 [COMMENT]`); OpenPGP signatures against armored public keys (`gpg --armor --export`).
//! An unsigned commit, an unknown key or a bad signature is refused with the reason.
//!
//! Allowed-signers options are honoured as `ssh-keygen -Y verify` (what git runs) honours them:
//! `namespaces=` must include `git`; `valid-after=` / `valid-before=` (`YYYYMMDD[HHMM[SS]][Z]`)
//! bound the commit's committer time; `cert-authority` (signing certificates) is not supported
//! and refused when the file is read. SSH keys: Ed25519, ECDSA (P-256/384/521) and RSA.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;
use ssh_key::{HashAlg, PublicKey, SshSig};

/// Principals and their SSH public keys, and allowed OpenPGP keys.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    ssh: Vec<Signer>,
    gpg: Vec<SignedPublicKey>,
}

/// One line of an allowed-signers file.
#[derive(Debug, Clone)]
struct Signer {
    principals: String,
    key: PublicKey,
    limits: Limits,
}

/// What a line's options allow.
#[derive(Debug, Clone, Default)]
struct Limits {
    /// `namespaces=`: the signature namespaces the key may sign (None: any).
    namespaces: Option<Vec<String>>,
    /// `valid-after=` / `valid-before=`, in UNIX seconds.
    valid_after: Option<i64>,
    valid_before: Option<i64>,
}

impl Limits {
    /// Why the key may not sign a git commit made at TIME (UNIX seconds), if it may not.
    fn refuse(&self, time: Option<i64>) -> Option<String> {
        if let Some(ns) = &self.namespaces
            && !ns.iter().any(|n| n == "git")
        {
            return Some(format!(
                "its namespaces={} do not include git",
                ns.join(",")
            ));
        }
        let bounded = self.valid_after.is_some() || self.valid_before.is_some();
        match time {
            None if bounded => Some(
                "the commit has no committer time to check valid-after/valid-before against".into(),
            ),
            Some(t) if self.valid_after.is_some_and(|a| t < a) => {
                Some("the commit was made before its valid-after".into())
            }
            Some(t) if self.valid_before.is_some_and(|b| t >= b) => {
                Some("the commit was made after its valid-before".into())
            }
            _ => None,
        }
    }
}

/// Parses `YYYYMMDD[HHMM[SS]][Z]` (UTC; ssh-keygen reads it as local time without `Z`, and a
/// daemon in a container runs in UTC) into UNIX seconds.
fn parse_time(text: &str) -> Option<i64> {
    let t = text.strip_suffix('Z').unwrap_or(text);
    if !t.bytes().all(|b| b.is_ascii_digit()) || !matches!(t.len(), 8 | 12 | 14) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| t.get(r).and_then(|s| s.parse::<i16>().ok());
    let date = k8s_openapi::jiff::civil::date(n(0..4)?, n(4..6)? as i8, n(6..8)? as i8);
    let (h, m, s) = (
        n(8..10).unwrap_or(0),
        n(10..12).unwrap_or(0),
        n(12..14).unwrap_or(0),
    );
    let dt = date.at(h as i8, m as i8, s as i8, 0);
    dt.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp().as_second())
}

/// The committer time (UNIX seconds) in a commit object's text.
fn committer_time(data: &[u8]) -> Option<i64> {
    let text = String::from_utf8_lossy(data);
    let line = text.lines().find(|l| l.starts_with("committer "))?;
    let mut fields = line.rsplit(' ');
    let _tz = fields.next()?;
    fields.next()?.parse().ok()
}

/// Splits an options field at the commas outside double quotes.
fn split_options(field: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in field.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The options of one allowed-signers line (the tokens between principals and key), checked.
fn limits(name: &str, line: usize, tokens: &[&str]) -> Result<Limits, String> {
    let at = |e: String| format!("{name}:{line}: {e}");
    let time = |v: &str, what: &str| {
        parse_time(v).ok_or_else(|| at(format!("bad {what} {v:?}: write YYYYMMDD[HHMM[SS]][Z]")))
    };
    let mut l = Limits::default();
    for opt in split_options(&tokens.join(" ")) {
        let (k, v) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
        match k.trim().to_ascii_lowercase().as_str() {
            "" => {}
            "namespaces" => {
                l.namespaces = Some(v.split(',').map(|n| n.trim().to_string()).collect())
            }
            "valid-after" => l.valid_after = Some(time(v, "valid-after")?),
            "valid-before" => l.valid_before = Some(time(v, "valid-before")?),
            "cert-authority" => {
                return Err(at("cert-authority (signing certificates) is not supported: list the signers' keys".into()));
            }
            other => return Err(at(format!("unknown option {other:?}"))),
        }
    }
    Ok(l)
}

impl AllowedSigners {
    /// Adds the armored OpenPGP public keys in TEXT (one or more blocks).
    pub fn add_gpg(&mut self, name: &str, text: &str) -> Result<(), String> {
        let (keys, _) = SignedPublicKey::from_string_many(text)
            .map_err(|e| format!("{name}: cannot read OpenPGP keys: {e}"))?;
        for k in keys {
            self.gpg
                .push(k.map_err(|e| format!("{name}: cannot read an OpenPGP key: {e}"))?);
        }
        if self.gpg.is_empty() {
            return Err(format!("{name}: no OpenPGP public key in it"));
        }
        Ok(())
    }

    /// Parses an allowed-signers file; every line must hold a key slurmops can read.
    pub fn parse(name: &str, text: &str) -> Result<AllowedSigners, String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = tokens.iter().position(|t| {
                t.starts_with("ssh-") || t.starts_with("ecdsa-") || t.starts_with("sk-")
            }) else {
                return Err(format!("{name}:{}: no public key on this line", i + 1));
            };
            let key_text = tokens[at..]
                .iter()
                .take(2)
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            let key = PublicKey::from_openssh(&key_text)
                .map_err(|e| format!("{name}:{}: cannot read the key: {e}", i + 1))?;
            let options = tokens.get(1..at).unwrap_or_default();
            out.push(Signer {
                principals: tokens.first().copied().unwrap_or_default().to_string(),
                key,
                limits: limits(name, i + 1, options)?,
            });
        }
        if out.is_empty() {
            return Err(format!("{name}: no allowed signers listed"));
        }
        Ok(AllowedSigners {
            ssh: out,
            gpg: Vec::new(),
        })
    }

    /// Verifies COMMIT's SIGNATURE over its signed DATA; the signer's principal, or why the
    /// commit is refused.
    pub fn verify(
        &self,
        commit: &str,
        signature: Option<&(Vec<u8>, Vec<u8>)>,
    ) -> Result<String, String> {
        let short = commit.get(..12).unwrap_or(commit);
        let Some((sig, data)) = signature else {
            return Err(format!(
                "commit {short} is not signed; only signed commits are applied"
            ));
        };
        let text = String::from_utf8_lossy(sig);
        if text.contains("BEGIN PGP SIGNATURE") {
            return self.verify_gpg(short, &text, data);
        }
        let sig = SshSig::from_pem(text.trim())
            .map_err(|e| format!("commit {short}: unreadable signature: {e}"))?;
        let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256);
        let lines: Vec<&Signer> = self
            .ssh
            .iter()
            .filter(|s| s.key.key_data() == sig.public_key())
            .collect();
        if lines.is_empty() {
            return Err(format!(
                "commit {short} is signed by {fingerprint}, which is not an allowed signer"
            ));
        }
        // The key may be listed more than once (other principals, other validity).
        let time = committer_time(data);
        let mut why = String::new();
        for s in lines {
            match s.limits.refuse(time) {
                Some(w) => why = w,
                None => {
                    s.key.verify("git", data, &sig).map_err(|e| {
                        format!(
                            "commit {short}: bad signature by {} ({fingerprint}): {e}",
                            s.principals
                        )
                    })?;
                    return Ok(s.principals.clone());
                }
            }
        }
        Err(format!(
            "commit {short} is signed by {fingerprint}, which may not sign it: {why}"
        ))
    }

    fn verify_gpg(&self, short: &str, text: &str, data: &[u8]) -> Result<String, String> {
        let (sig, _) = DetachedSignature::from_string(text)
            .map_err(|e| format!("commit {short}: unreadable OpenPGP signature: {e}"))?;
        for key in &self.gpg {
            match super::openpgp::check(key, &sig, data) {
                None => {}
                Some(Ok(())) => return Ok(format!("{:X}", key.fingerprint())),
                Some(Err(why)) => {
                    return Err(format!(
                        "commit {short}: signed by allowed key {:X}, but {why}",
                        key.fingerprint()
                    ));
                }
            }
        }
        Err(if self.gpg.is_empty() {
            format!(
                "commit {short} has an OpenPGP signature, and no OpenPGP key is allowed (--allowed-gpg-keys)"
            )
        } else {
            format!("commit {short}: its OpenPGP signature is not valid for any allowed key")
        })
    }
}
