//! Commit signature verification: the daemon applies only commits signed by an allowed key,
//! verified in-process. SSH signatures (`gpg.format=ssh`, namespace `git`) against an
//! allowed-signers file (git's `gpg.ssh.allowedSignersFile` format: `PRINCIPALS [OPTIONS] KEYTYPE
//! BASE64 [COMMENT]`); OpenPGP signatures against armored public keys (`gpg --armor --export`).
//! An unsigned commit, an unknown key or a bad signature is refused with the reason.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;
use ssh_key::{HashAlg, PublicKey, SshSig};

/// Principals and their SSH public keys, and allowed OpenPGP keys.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    ssh: Vec<(String, PublicKey)>,
    gpg: Vec<SignedPublicKey>,
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
            out.push((tokens[0].to_string(), key));
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
        let Some((who, key)) = self
            .ssh
            .iter()
            .find(|(_, k)| k.key_data() == sig.public_key())
        else {
            return Err(format!(
                "commit {short} is signed by {fingerprint}, which is not an allowed signer"
            ));
        };
        key.verify("git", data, &sig)
            .map_err(|e| format!("commit {short}: bad signature by {who} ({fingerprint}): {e}"))?;
        Ok(who.clone())
    }

    fn verify_gpg(&self, short: &str, text: &str, data: &[u8]) -> Result<String, String> {
        let (sig, _) = DetachedSignature::from_string(text)
            .map_err(|e| format!("commit {short}: unreadable OpenPGP signature: {e}"))?;
        for key in &self.gpg {
            let by_primary = sig.verify(key, data).is_ok();
            let by_subkey = key
                .public_subkeys
                .iter()
                .any(|s| sig.verify(s, data).is_ok());
            if by_primary || by_subkey {
                return Ok(format!("{:X}", key.fingerprint()));
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
