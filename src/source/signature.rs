//! Commit signature verification: the daemon applies only commits signed by a key in an
//! allowed-signers file (git's `gpg.ssh.allowedSignersFile` format: `PRINCIPALS [OPTIONS] KEYTYPE
//! BASE64 [COMMENT]`). SSH signatures (`gpg.format=ssh`, namespace `git`) are verified in-process;
//! an unsigned commit, an unknown key, a bad signature or a GPG signature is refused with the
//! reason.

use ssh_key::{HashAlg, PublicKey, SshSig};

/// Principals and their public keys.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners(Vec<(String, PublicKey)>);

impl AllowedSigners {
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
        Ok(AllowedSigners(out))
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
            return Err(format!(
                "commit {short} has a GPG signature; slurmops verifies SSH signatures (git config gpg.format ssh)"
            ));
        }
        let sig = SshSig::from_pem(text.trim())
            .map_err(|e| format!("commit {short}: unreadable signature: {e}"))?;
        let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256);
        let Some((who, key)) = self
            .0
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
}
