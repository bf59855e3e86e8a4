//! Pinned SSH host keys: whether an OpenSSH known_hosts file lists a server's key, read with
//! `ssh_key::known_hosts` and matched as OpenSSH does — `[host]:port` for a port other than 22,
//! `*`/`?` globs, `!` negations, hashed names (`|1|salt|hash`, HMAC-SHA1), and `@revoked` keys,
//! which are refused even when another line lists them. `@cert-authority` lines are ignored
//! (host certificates are not supported): list the host keys themselves.

use hmac::{Hmac, Mac};
use ssh_key::HashAlg;
use ssh_key::known_hosts::{HostPatterns, KnownHosts, Marker};

/// What the file says about a server's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pinned,
    /// Listed under `@revoked`.
    Revoked,
    Unknown,
}

/// The verdict of known_hosts TEXT (named NAME in errors) on the key with SHA-256 fingerprint
/// KEY_SHA256 presented by HOST on PORT.
pub fn check(
    name: &str,
    text: &str,
    host: &str,
    port: u16,
    key_sha256: &[u8; 32],
) -> Result<Verdict, String> {
    let target = if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    };
    let mut verdict = Verdict::Unknown;
    for (i, entry) in KnownHosts::new(text).enumerate() {
        let entry = entry.map_err(|e| format!("{name}: entry {} cannot be read: {e}", i + 1))?;
        let same_key = entry.public_key().fingerprint(HashAlg::Sha256).as_bytes() == key_sha256;
        if !same_key || !matches_host(entry.host_patterns(), &target) {
            continue;
        }
        match entry.marker() {
            Some(Marker::Revoked) => return Ok(Verdict::Revoked),
            Some(Marker::CertAuthority) => {}
            None => verdict = Verdict::Pinned,
        }
    }
    Ok(verdict)
}

fn matches_host(patterns: &HostPatterns, target: &str) -> bool {
    match patterns {
        HostPatterns::Patterns(list) => {
            let mut hit = false;
            for p in list {
                match p.strip_prefix('!') {
                    Some(negated) if glob(negated, target) => return false,
                    Some(_) => {}
                    None => hit |= glob(p, target),
                }
            }
            hit
        }
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(target.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
    }
}

/// OpenSSH's pattern match: `*` any run, `?` one character, case-insensitive.
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let n: Vec<char> = name.to_lowercase().chars().collect();
    // Iterative match with one backtrack point (linear for the patterns known_hosts holds).
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some(i);
                mark = j;
                i += 1;
            }
            Some(c) if *c == '?' || *c == n[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some(s) => {
                    i = s + 1;
                    mark += 1;
                    j = mark;
                }
                None => return false,
            },
        }
    }
    p[i.min(p.len())..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGvWzHYtvoDaGV0QoGTWBgSOJ5dmDr9FpTjmfbHc7jWn";
    const OTHER: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    fn sha(key: &str) -> [u8; 32] {
        let k = ssh_key::PublicKey::from_openssh(key).unwrap();
        let f = k.fingerprint(HashAlg::Sha256);
        f.as_bytes().try_into().unwrap()
    }

    fn hashed(salt: &[u8], name: &str) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(name.as_bytes());
        let hash = mac.finalize().into_bytes();
        format!("|1|{}|{}", b64.encode(salt), b64.encode(hash))
    }

    #[test]
    fn ports_globs_negations_hashes_and_revocations() {
        let k = sha(KEY);
        let v = |text: &str, host: &str, port: u16| check("kh", text, host, port, &k).unwrap();
        assert_eq!(
            v(&format!("git.example {KEY}"), "git.example", 22),
            Verdict::Pinned
        );
        // A port other than 22 is part of the name.
        assert_eq!(
            v(&format!("git.example {KEY}"), "git.example", 2222),
            Verdict::Unknown
        );
        assert_eq!(
            v(&format!("[git.example]:2222 {KEY}"), "git.example", 2222),
            Verdict::Pinned
        );
        assert_eq!(
            v(&format!("*.example {KEY}"), "git.example", 22),
            Verdict::Pinned
        );
        assert_eq!(
            v(&format!("*.example,!git.example {KEY}"), "git.example", 22),
            Verdict::Unknown
        );
        assert_eq!(
            v(&format!("git.other {KEY}"), "git.example", 22),
            Verdict::Unknown
        );
        assert_eq!(
            v(&format!("git.example {OTHER}"), "git.example", 22),
            Verdict::Unknown
        );
        let h = hashed(b"0123456789abcdef0123", "[git.example]:2222");
        assert_eq!(
            v(&format!("{h} {KEY}"), "git.example", 2222),
            Verdict::Pinned
        );
        assert_eq!(
            v(&format!("{h} {KEY}"), "git.example", 22),
            Verdict::Unknown
        );
        // Revoked wins over a line that pins the same key.
        let both = format!("git.example {KEY}\n@revoked * {KEY}\n");
        assert_eq!(v(&both, "git.example", 22), Verdict::Revoked);
        assert!(check("kh", "git.example ssh-ed25519 !!!", "git.example", 22, &k).is_err());
    }
}
