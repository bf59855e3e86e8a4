//! Whether an allowed OpenPGP certificate may have made a commit's signature: the signature must
//! verify with the primary key or a subkey, and that key must have been allowed to sign when the
//! signature was made — not revoked (a revocation in the allowed file counts, whoever made it:
//! it can only refuse), not expired (the newest self-signature's key expiration time), and
//! carrying the signing flag (a subkey needs a binding signature that grants it; a primary key
//! whose self-signature declares flags needs it too). As gpg does, only self-signatures and
//! bindings that verify count: a certificate from a keyserver carries other keys'
//! certifications (anyone may add one), and one newer than the owner's self-signature, read as
//! it, would lift the key's expiry or grant a subkey the right to sign.

use pgp::composed::{DetachedSignature, SignedPublicKey};
use pgp::packet::{KeyFlags, Signature, SignatureType};
use pgp::types::KeyDetails;
use pgp::types::Tag;

/// The newest of SIGS whose type is one of TYPES.
fn newest<'a>(
    sigs: impl Iterator<Item = &'a Signature>,
    types: &[SignatureType],
) -> Option<&'a Signature> {
    sigs.filter(|s| s.typ().is_some_and(|t| types.contains(&t)))
        .max_by_key(|s| s.created().map_or(0, |c| c.as_secs()))
}

/// Why a key created at CREATED may not sign at T under its newest self-signature SELF_SIG.
fn refuse(created: u32, self_sig: Option<&Signature>, t: u32, what: &str) -> Option<String> {
    let s = self_sig?;
    let flags = s.key_flags();
    if flags != KeyFlags::default() && !flags.sign() {
        return Some(format!("{what} is not allowed to sign (no signing flag)"));
    }
    match s.key_expiration_time().map(|d| d.as_secs()) {
        Some(d) if d > 0 && t >= created.saturating_add(d) => Some(format!("{what} had expired")),
        _ => None,
    }
}

/// None when no key of CERT made SIG over DATA; Ok when its primary key or a subkey made it while
/// that key was valid for signing, otherwise why it was not.
pub fn check(
    cert: &SignedPublicKey,
    sig: &DetachedSignature,
    data: &[u8],
) -> Option<Result<(), String>> {
    let t = sig.signature.created().map_or(0, |c| c.as_secs());
    let revoked = !cert.details.revocation_signatures.is_empty();
    if sig.verify(cert, data).is_ok() {
        if revoked {
            return Some(Err("the key is revoked".into()));
        }
        let certifications = [
            SignatureType::CertGeneric,
            SignatureType::CertPersona,
            SignatureType::CertCasual,
            SignatureType::CertPositive,
            SignatureType::Key,
        ];
        let primary = &cert.primary_key;
        let self_sigs = cert
            .details
            .users
            .iter()
            .flat_map(|u| {
                u.signatures
                    .iter()
                    .filter(|s| s.verify_certification(primary, Tag::UserId, &u.id).is_ok())
            })
            .chain(
                cert.details
                    .direct_signatures
                    .iter()
                    .filter(|s| s.verify_key(primary).is_ok()),
            );
        let created = cert.primary_key.created_at().as_secs();
        let why = refuse(
            created,
            newest(self_sigs, &certifications),
            t,
            "the primary key",
        );
        return Some(why.map_or(Ok(()), Err));
    }
    for sub in &cert.public_subkeys {
        if sig.verify(sub, data).is_err() {
            continue;
        }
        // A binding counts when the primary key made it over this subkey and, for a signing
        // subkey, the subkey's own back-signature in it verifies (it consents to the primary).
        let bound = |b: &&Signature| {
            b.verify_subkey_binding(&cert.primary_key, &sub.key).is_ok()
                && (!b.key_flags().sign()
                    || b.embedded_signature().is_some_and(|back| {
                        back.verify_primary_key_binding(&sub.key, &cert.primary_key)
                            .is_ok()
                    }))
        };
        let sigs = || sub.signatures.iter();
        let why = if revoked {
            Some("the key is revoked".to_string())
        } else if newest(sigs(), &[SignatureType::SubkeyRevocation]).is_some() {
            Some("the signing subkey is revoked".to_string())
        } else {
            match newest(sigs().filter(bound), &[SignatureType::SubkeyBinding]) {
                None => Some("the signing subkey has no binding signature".to_string()),
                Some(b) if !b.key_flags().sign() => {
                    Some("the subkey is not allowed to sign (no signing flag)".to_string())
                }
                b => refuse(sub.key.created_at().as_secs(), b, t, "the signing subkey"),
            }
        };
        return Some(why.map_or(Ok(()), Err));
    }
    None
}
