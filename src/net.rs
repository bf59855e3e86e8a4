//! Where a URL's traffic goes. slurmops talks plain text (slurmrestd over http://, a repository
//! over http:// or git://) only where nobody else is on the path: this host or the cluster's own
//! Services. One answer for every client, so that slurmrestd and git cannot disagree on it.

/// The host of URL (`scheme://[user@]host[:port]/...`; an IPv6 literal without its brackets).
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    }
}

/// Whether URL's host is loopback or an in-cluster Service name (`*.svc`, `*.svc.cluster.local`):
/// traffic to it stays on the host or inside the cluster network.
pub fn stays_near(url: &str) -> bool {
    let host = host(url);
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || host.ends_with(".svc")
        || host.ends_with(".svc.cluster.local")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_is_loopback_or_an_in_cluster_service_whatever_the_scheme() {
        for near in [
            "http://127.0.0.1:6820",
            "http://localhost/x",
            "git://[::1]:9418/repo.git",
            "http://slurmrestd.slurm.svc:6820",
            "git://git.infra.svc.cluster.local/r.git",
            "http://user@127.0.0.2/r.git",
        ] {
            assert!(stays_near(near), "{near}");
        }
        for far in [
            "http://10.0.0.5:6820",
            "git://git.example.com/r.git",
            "http://svc.example.com/",
            "http://127.0.0.1.example.com/",
            "http://localhost@evil.example.com/",
            "http://[2001:db8::1]:80/",
        ] {
            assert!(!stays_near(far), "{far}");
        }
    }
}
