//! Checks of `spec.loginSets`: unique names, their Secrets, pods and volumes.

use std::collections::BTreeSet;

use super::super::diag::Path;
use super::super::types::*;
use super::Validator;
use super::pods::LOGIN_VOLUMES;

impl Validator {
    pub(super) fn login_sets(&mut self, s: &ClusterSpec, p: &Path) {
        let mut seen = BTreeSet::new();
        for (i, l) in s.login_sets.iter().enumerate() {
            let lp = p.index(i);
            self.dns_label(lp.key("name"), "login set name", &l.name, 40);
            if !seen.insert(l.name.as_str()) {
                self.err(
                    lp.key("name"),
                    format!("login set {:?} is defined twice", l.name),
                    "names must be unique",
                );
            }
            for (field, r) in [
                ("authorizedKeys", &l.authorized_keys),
                ("sssdConf", &l.sssd_conf),
            ] {
                if let Some(r) = r {
                    self.secret_ref(r, &lp.key(field));
                }
            }
            self.pod(&l.pod, &lp);
            self.volumes(&l.volumes, &[], &l.volume_mounts, LOGIN_VOLUMES, &lp);
        }
    }
}
