//! Credentials for slurmrestd: a JWT given as is (file, env, Secret), or minted HS256 from the
//! cluster's JWT key (what slurmctld's auth/jwt verifies), renewed well before it expires.
//! Tokens and keys never reach logs or error messages: their Debug output is redacted.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A secret string (a JWT) that prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into().trim().to_string())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where the JWT comes from.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// A ready token; `user` is sent as X-SLURM-USER-NAME when given.
    Token { token: Secret, user: Option<String> },
    /// Minted from the HS256 key slurmctld checks (`AuthAltParameters=jwt_key=`).
    Key {
        key: KeyBytes,
        user: String,
        lifetime: Duration,
    },
}

/// JWT signing key bytes, redacted in Debug.
#[derive(Clone)]
pub struct KeyBytes(pub Vec<u8>);

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} key bytes>", self.0.len())
    }
}

/// A token in use and when to stop using it.
#[derive(Clone, Debug)]
pub struct Issued {
    pub token: Secret,
    pub user: Option<String>,
    /// Renew at or after this time (None: never, a given token).
    pub renew_at: Option<SystemTime>,
}

impl Credentials {
    /// The Slurm user the requests run as: the one named, else the token's `sun` claim (read,
    /// not verified: it is this process's own token); None when neither says.
    pub fn user(&self) -> Option<String> {
        match self {
            Credentials::Key { user, .. }
            | Credentials::Token {
                user: Some(user), ..
            } => Some(user.clone()),
            Credentials::Token { token, user: None } => {
                let payload = token.expose().split('.').nth(1)?;
                let claims: serde_json::Value =
                    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
                claims.get("sun")?.as_str().map(str::to_string)
            }
        }
    }

    /// A token to send now: the given one, or a freshly minted one.
    pub fn issue(&self, now: SystemTime) -> Issued {
        match self {
            Credentials::Token { token, user } => Issued {
                token: token.clone(),
                user: user.clone(),
                renew_at: None,
            },
            Credentials::Key {
                key,
                user,
                lifetime,
            } => Issued {
                token: mint(&key.0, user, now, *lifetime),
                user: Some(user.clone()),
                // Renewed once 80% of its life has passed.
                renew_at: Some(now + lifetime.mul_f32(0.8)),
            },
        }
    }
}

/// An HS256 JWT for Slurm user `user` (claim `sun`), valid from `now` for `lifetime`.
pub fn mint(key: &[u8], user: &str, now: SystemTime, lifetime: Duration) -> Secret {
    let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let exp = iat + lifetime.as_secs().max(1);
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = serde_json::json!({"iat": iat, "exp": exp, "sun": user});
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    // HMAC accepts keys of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    Secret(format!("{signing_input}.{sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_token_carries_user_and_expiry_and_verifies() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let t = mint(
            b"0123456789abcdef0123456789abcdef",
            "slurm",
            now,
            Duration::from_secs(600),
        );
        let parts: Vec<&str> = t.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["sun"], "slurm");
        assert_eq!(claims["exp"], 1_800_000_600u64);
        let mut mac = Hmac::<Sha256>::new_from_slice(b"0123456789abcdef0123456789abcdef").unwrap();
        mac.update(format!("{}.{}", parts[0], parts[1]).as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap())
            .expect("signature verifies with the key");
    }

    #[test]
    fn secrets_never_print() {
        let c = Credentials::Key {
            key: KeyBytes(b"very-secret-key".to_vec()),
            user: "slurm".into(),
            lifetime: Duration::from_secs(60),
        };
        let issued = c.issue(SystemTime::now());
        let printed = format!("{c:?} {issued:?}");
        assert!(!printed.contains("very-secret-key"));
        assert!(!printed.contains(issued.token.expose()));
        assert!(issued.renew_at.is_some());
    }

    #[test]
    fn the_user_of_a_token_is_read_from_its_sun_claim() {
        let token = mint(b"k", "slurm", SystemTime::now(), Duration::from_secs(60));
        let given = Credentials::Token { token, user: None };
        assert_eq!(given.user().as_deref(), Some("slurm"));
        let named = Credentials::Token {
            token: Secret::new("not.a-jwt"),
            user: Some("admin".into()),
        };
        assert_eq!(named.user().as_deref(), Some("admin"));
        let opaque = Credentials::Token {
            token: Secret::new("opaque"),
            user: None,
        };
        assert_eq!(opaque.user(), None);
    }
}
