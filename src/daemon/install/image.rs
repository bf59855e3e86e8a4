//! The daemon's default image: its release's tag and, where the build was told the image's
//! digest (`SLURMOPS_IMAGE_DIGEST=sha256:…` when building the release's binary, after its image
//! was pushed), that digest too, so that `install --print` names an image that cannot change
//! under its tag.

/// The repository of the daemon's image.
pub const REPOSITORY: &str = "ghcr.io/slurmops/slurmops";

/// The default image for the digest DIGEST the build knows, if any.
pub fn image_for(digest: Option<&str>) -> Result<String, String> {
    let tagged = format!("{REPOSITORY}:{}", env!("CARGO_PKG_VERSION"));
    match digest {
        None | Some("") => Ok(tagged),
        Some(d) => {
            let hex = d.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                Ok(format!("{tagged}@{d}"))
            } else {
                Err(format!(
                    "this build's SLURMOPS_IMAGE_DIGEST is {d:?}, not sha256: and 64 lowercase hex digits: pass --image"
                ))
            }
        }
    }
}

/// The default image of this build (`install --image`'s default).
pub fn default_image() -> Result<String, String> {
    image_for(option_env!("SLURMOPS_IMAGE_DIGEST"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_image_is_pinned_by_the_digest_the_build_knows() {
        let v = env!("CARGO_PKG_VERSION");
        assert_eq!(image_for(None).unwrap(), format!("{REPOSITORY}:{v}"));
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            image_for(Some(&d)).unwrap(),
            format!("{REPOSITORY}:{v}@{d}")
        );
        for bad in [
            "sha256:abc",
            "md5:00",
            &format!("sha256:{}", "AB".repeat(32)),
        ] {
            assert!(
                image_for(Some(bad)).unwrap_err().contains("--image"),
                "{bad}"
            );
        }
    }
}
