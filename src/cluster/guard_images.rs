//! The guardrail on images (issue 54): an image outside the install's allowed repositories, or
//! one without a digest when the install requires digests, is refused, whether cluster.yaml
//! names it or slurmops renders it by default; image references are read as the container
//! runtime resolves them.

use super::diag::{Finding, Path};
use super::guardrails::Guardrails;
use super::types::ClusterFile;

/// The repositories an install allows when it names none: the images slurmops renders.
pub const DEFAULT_IMAGES: &[&str] = &["ghcr.io/slinkyproject", "docker.io/library/mariadb"];

/// The image the in-cluster database runs when cluster.yaml names none.
const DATABASE_IMAGE: &str = "docker.io/library/mariadb:11.8";

/// The images slurmops renders for C where cluster.yaml names none.
pub(super) fn default_images(g: &Guardrails, c: &ClusterFile, spec: &Path, out: &mut Vec<Finding>) {
    let s = &c.spec;
    let i = &s.images;
    let slurmd = i.slurmd.is_none() && s.node_sets.iter().any(|n| n.image.is_none());
    let login = i.login.is_none() && s.login_sets.iter().any(|l| l.image.is_none());
    for (program, used) in [
        ("slurmctld", i.slurmctld.is_none()),
        ("slurmd", slurmd),
        ("slurmrestd", i.slurmrestd.is_none() && s.restapi.enabled),
        ("slurmdbd", i.slurmdbd.is_none() && s.accounting.enabled),
        ("login", login),
    ] {
        if used {
            let image = format!("{}/{program}:{}-{}", i.registry, s.slurm_version, i.flavor);
            image_finding(
                g,
                &image,
                spec.key("images").key("registry"),
                &format!("{program}'s default image"),
                &format!("images.{program}"),
                out,
            );
        }
    }
    if let Some(db) = s
        .accounting
        .database
        .as_ref()
        .and_then(|d| d.in_cluster.as_ref())
        && db.image.is_none()
        && s.accounting.enabled
    {
        let at = spec.key("accounting").key("database").key("inCluster");
        image_finding(
            g,
            DATABASE_IMAGE,
            at,
            "the database's default image",
            "accounting.database.inCluster.image",
            out,
        );
    }
}

/// A finding when IMAGE (WHAT, set at AT; KEY pins it) is not one G allows.
pub(super) fn image_finding(
    g: &Guardrails,
    image: &str,
    at: Path,
    what: &str,
    key: &str,
    out: &mut Vec<Finding>,
) {
    let Some(r) = Reference::parse(image) else {
        out.push(
            Finding::new(
                at,
                format!("{what} {image:?} is not an image reference the install can check"),
            )
            .hint("write REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST"),
        );
        return;
    };
    let allowed: Vec<&str> = match g.images.is_empty() {
        true => DEFAULT_IMAGES.to_vec(),
        false => g.images.iter().map(String::as_str).collect(),
    };
    if !allowed.iter().any(|a| r.under(a)) {
        out.push(
            Finding::new(
                at,
                format!(
                    "{what} {image} is from {}, not a repository this install allows ({}): an image runs with its pod's rights, in slurmd's privileged container for workers",
                    r.repository,
                    super::diag::listed(allowed.iter().copied())
                ),
            )
            .hint(format!(
                "use an image under an allowed repository, or the install allows it with the daemon's --allow-image {} (policy allowImages)",
                r.repository
            )),
        );
    } else if g.require_digests && !r.digest {
        out.push(
            Finding::new(
                at,
                format!(
                    "{what} {image} is not pinned by digest, and this install requires digests (a tag can be moved to other code)"
                ),
            )
            .hint(format!("set {key} to {}@sha256:<digest>", r.repository)),
        );
    }
}

/// Why G does not allow IMAGE (WHAT names it), with the setting that would: None if allowed.
pub fn image_refusal(g: &Guardrails, image: &str, what: &str) -> Option<(String, String)> {
    let mut out = Vec::new();
    image_finding(g, image, Path::root(), what, "image", &mut out);
    out.pop().map(|f| (f.message, f.hint.unwrap_or_default()))
}

/// An image reference, as the container runtime resolves it.
struct Reference {
    /// Registry and path, `docker.io/library/` added where the runtime adds it.
    repository: String,
    /// Pinned by a well-formed sha256 digest.
    digest: bool,
}

impl Reference {
    fn parse(image: &str) -> Option<Reference> {
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (image, None),
        };
        let digest = match digest {
            Some(d) => {
                let hex = d.strip_prefix("sha256:")?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                true
            }
            None => false,
        };
        // The tag follows the last ':' after the last '/' (a registry's port comes before).
        let slash = name.rfind('/').map_or(0, |i| i + 1);
        let name = match name[slash..].find(':') {
            Some(i) => {
                // A tag as the runtime takes it: a word character first, then at most 127 of
                // word characters, '.' and '-' (no space, no line break).
                let tag = &name[slash + i + 1..];
                let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
                let ok = tag.len() <= 128
                    && tag.bytes().next().is_some_and(word)
                    && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-');
                if !ok {
                    return None;
                }
                &name[..slash + i]
            }
            None => name,
        };
        let parts: Vec<&str> = name.split('/').collect();
        let valid = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
        };
        if !parts.iter().all(|p| valid(p)) {
            return None;
        }
        let host = parts.len() > 1
            && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost");
        let repository = match (host, parts.len()) {
            (true, _) => name.to_string(),
            (false, 1) => format!("docker.io/library/{name}"),
            (false, _) => format!("docker.io/{name}"),
        };
        Some(Reference { repository, digest })
    }

    /// Whether this image is in repository ALLOWED or below it (as written by the install:
    /// `ghcr.io/org` allows `ghcr.io/org/x`, never `ghcr.io/organisation/x`).
    fn under(&self, allowed: &str) -> bool {
        let Some(a) = Reference::parse(allowed.trim_end_matches('/')) else {
            return false;
        };
        self.repository == a.repository
            || self
                .repository
                .strip_prefix(&a.repository)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_resolve_as_the_runtime_resolves_them() {
        let repo = |s: &str| Reference::parse(s).map(|r| (r.repository, r.digest));
        let d = "a".repeat(64);
        assert_eq!(
            repo("mariadb:11.8"),
            Some(("docker.io/library/mariadb".into(), false))
        );
        assert_eq!(repo("evil/x"), Some(("docker.io/evil/x".into(), false)));
        assert_eq!(
            repo("localhost:5000/slurmd:1"),
            Some(("localhost:5000/slurmd".into(), false))
        );
        assert_eq!(
            repo(&format!("ghcr.io/slinkyproject/slurmd@sha256:{d}")),
            Some(("ghcr.io/slinkyproject/slurmd".into(), true))
        );
        for bad in [
            "ghcr.io/slinkyproject/../evil/x",
            "ghcr.io/slinkyproject/slurmd:24.11-a b",
            "ghcr.io/slinkyproject/slurmd:24.11-a\nb",
            "ghcr.io/slinkyproject/slurmd:",
            "ghcr.io//x",
            "x@sha256:zz",
            "a b",
            "",
        ] {
            assert!(repo(bad).is_none(), "{bad}");
        }
        let r = Reference::parse("ghcr.io/slinkyproject/slurmd:25.11").unwrap();
        assert!(r.under("ghcr.io/slinkyproject") && r.under("ghcr.io/slinkyproject/"));
        assert!(!r.under("ghcr.io/slinky") && !r.under("ghcr.io/slinkyproject/slurmctld"));
        assert!(
            Reference::parse("mariadb")
                .unwrap()
                .under("docker.io/library/mariadb")
        );
    }
}
