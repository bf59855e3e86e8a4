//! Checks of `spec.accounting`: its database, and its objects: names Slurm accepts, every QOS
//! and account referenced exists, the account tree has no cycle, defaults are among the allowed,
//! and TRES lists, times and QOS flags parse the way Slurm writes them.

use std::collections::{BTreeSet, HashMap};

use super::super::accounts::{BUILT_IN_QOS, ROOT};
use super::super::diag::{Path, clip, did_you_mean, listed};
use super::super::types::*;
use super::super::values::parse_quantity;
use super::super::words::{QOS_FLAGS, parse_minutes, parse_tres};
use super::{Known, Validator, grammar};

/// Longest TRES list (`cpu=16,mem=64G,...`): Slurm tracks a few dozen TRES at most.
const MAX_TRES: usize = 4096;

fn is_slurm_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Validator {
    pub(super) fn accounting(&mut self, a: &Accounting, p: &Path) {
        self.accounting_objects(a, p);
        self.slurm_conf_map(&a.slurmdbd_conf, &p.key("slurmdbdConf"), false);
        self.pod(&a.pod, p);
        match (&a.database, a.enabled) {
            (None, true) => self.err(
                p.clone(),
                "accounting is enabled but no database is set",
                "add accounting.database with host, user and password",
            ),
            (Some(db), _) => {
                self.database_place(db, &p.key("database"));
                self.database_words(db, &p.key("database"));
                if db.port == 0 {
                    self.err(
                        p.key("database").key("port"),
                        "port 0 is not a database port",
                        "MySQL listens on 3306",
                    );
                }
                self.secret_ref(&db.password, &p.key("database").key("password"));
            }
            (None, false) => {}
        }
    }

    /// The database's host, name and user, each written into slurmdbd.conf as one word
    /// (`StorageHost=`, `StorageLoc=`, `StorageUser=`).
    fn database_words(&mut self, db: &Database, p: &Path) {
        let words = [
            ("host", db.host.as_deref(), "StorageHost"),
            ("name", Some(db.name.as_str()), "StorageLoc"),
            ("user", Some(db.user.as_str()), "StorageUser"),
        ];
        for (field, value, key) in words {
            if let Some(problem) = value.and_then(grammar::word_problem) {
                self.err(
                    p.key(field),
                    format!("{problem} (it is written into slurmdbd.conf as {key}=)"),
                    format!(
                        "write the database {field} as one word, without spaces, line breaks or '#'"
                    ),
                );
            } else if field != "host" && value.is_some_and(|v| !grammar::is_sql_name(v)) {
                // The in-cluster MariaDB's first start splices them into SQL it runs as root.
                self.err(
                    p.key(field),
                    format!(
                        "the database {field} is spliced into SQL (the in-cluster database's first start, slurmdbd's queries): letters, digits and '_' only, at most 64"
                    ),
                    format!("write the database {field} as a plain name, e.g. slurm_acct_db"),
                );
            }
        }
    }

    pub(super) fn accounting_objects(&mut self, a: &Accounting, p: &Path) {
        let declared = !(a.qos.is_empty() && a.accounts.is_empty() && a.users.is_empty());
        if declared && !a.enabled {
            self.err(
                p.key("enabled"),
                "QOS, accounts or users are declared but accounting is not enabled",
                "set accounting.enabled: true (with accounting.database), or remove them",
            );
        }
        let qos =
            Known::new(std::iter::once(BUILT_IN_QOS).chain(a.qos.iter().map(|q| q.name.as_str())));
        let accounts = Known::new(a.accounts.iter().map(|x| x.name.as_str()));
        self.names(
            p.key("qos"),
            "QOS",
            a.qos.iter().map(|q| q.name.as_str()),
            &[],
        );
        self.names(
            p.key("accounts"),
            "account",
            a.accounts.iter().map(|x| x.name.as_str()),
            &[ROOT],
        );
        self.names(
            p.key("users"),
            "user",
            a.users.iter().map(|u| u.name.as_str()),
            &[ROOT],
        );
        for (i, q) in a.qos.iter().enumerate() {
            let qp = p.key("qos").index(i);
            for (j, other) in q.preempt.iter().enumerate() {
                self.qos_ref(qp.key("preempt").index(j), other, &qos);
            }
            for (j, f) in q.flags.iter().enumerate() {
                self.qos_flag(qp.key("flags").index(j), f);
            }
            let l = &q.limits;
            let lp = qp.key("limits");
            for (key, v) in [
                ("maxTRESPerUser", &l.max_tres_per_user),
                ("maxTRESPerAccount", &l.max_tres_per_account),
                ("maxTRESPerJob", &l.max_tres_per_job),
                ("maxTRESPerNode", &l.max_tres_per_node),
                ("grpTRES", &l.grp_tres),
            ] {
                self.tres(lp.key(key), v);
            }
            self.wall(lp.key("maxWall"), &l.max_wall);
        }
        let with_accounts =
            Known::new(std::iter::once(ROOT).chain(a.accounts.iter().map(|x| x.name.as_str())));
        for (i, acc) in a.accounts.iter().enumerate() {
            let ap = p.key("accounts").index(i);
            if let Some(parent) = &acc.parent {
                self.account_ref(ap.key("parent"), parent, &with_accounts);
            }
            self.association(&ap, &acc.association, &qos);
        }
        self.account_cycles(a, &p.key("accounts"));
        for (i, u) in a.users.iter().enumerate() {
            self.user(&p.key("users").index(i), u, &accounts, &qos);
        }
    }

    /// An external host or an in-cluster MariaDB, exactly one.
    pub(super) fn database_place(&mut self, db: &Database, p: &Path) {
        match (&db.host, &db.in_cluster) {
            (None, None) => self.err(
                p.clone(),
                "the database has neither a host nor inCluster",
                "set host (an external MySQL/MariaDB) or inCluster: {storage: 20Gi} (a MariaDB slurmops runs)",
            ),
            (Some(_), Some(_)) => self.err(
                p.key("inCluster"),
                "the database has both a host and inCluster",
                "keep host for an external database, or inCluster for the one slurmops runs",
            ),
            (Some(h), None) if h.trim().is_empty() => self.err(
                p.key("host"),
                "the database host is empty",
                "set the MySQL/MariaDB host name",
            ),
            (Some(_), None) => {}
            (None, Some(ic)) => {
                if parse_quantity(&ic.storage).is_none_or(|b| b <= 0.0) {
                    self.err(
                        p.key("inCluster").key("storage"),
                        format!("{:?} is not a volume size", ic.storage),
                        "e.g. storage: 20Gi",
                    );
                }
                let limit = ic
                    .resources
                    .as_ref()
                    .and_then(|r| r.limits.as_ref())
                    .and_then(|l| l.get("memory"))
                    .and_then(|q| parse_quantity(&q.0));
                // InnoDB's buffer pool is half the limit and at least 2 GiB (slurmdbd warns below).
                if limit.is_some_and(|b| b < 3.0 * 1024.0 * 1024.0 * 1024.0) {
                    self.err(
                        p.key("inCluster").key("resources").key("limits").key("memory"),
                        "MariaDB for slurmdbd needs a memory limit of 3Gi or more",
                        "InnoDB's buffer pool takes 2Gi at least (slurmdbd warns below half of Slurm's recommended 4Gi): use memory: 3Gi",
                    );
                }
                if ic.storage_class.as_deref().is_some_and(|c| c.is_empty()) {
                    self.err(
                        p.key("inCluster").key("storageClass"),
                        "the storage class is empty",
                        "name a StorageClass, or leave storageClass out for the default one",
                    );
                }
            }
        }
    }

    fn names<'a>(
        &mut self,
        p: Path,
        what: &str,
        names: impl Iterator<Item = &'a str>,
        reserved: &[&str],
    ) {
        let mut seen = BTreeSet::new();
        for (i, n) in names.enumerate() {
            let at = p.index(i).key("name");
            if !is_slurm_name(n) {
                self.err(
                    at,
                    format!("{n:?} is not a Slurm {what} name"),
                    "use letters, digits, '-', '_' and '.' (at most 64)",
                );
            } else if reserved.contains(&n) {
                self.err(
                    at,
                    format!("{n:?} is Slurm's own {what}"),
                    format!("slurmops leaves Slurm's {n} {what} as it is: choose another name"),
                );
            } else if !seen.insert(n.to_ascii_lowercase()) {
                self.err(
                    at,
                    format!("{what} {n:?} is declared twice"),
                    "merge the two entries (Slurm names are case-insensitive)",
                );
            }
        }
    }

    fn qos_ref(&mut self, p: Path, name: &str, known: &Known) {
        if !known.contains(name) {
            self.unknown_ref(p, "QOS", name, known);
        }
    }

    fn account_ref(&mut self, p: Path, name: &str, known: &Known) {
        if !known.contains(name) {
            self.unknown_ref(p, "account", name, known);
        }
    }

    fn qos_flag(&mut self, p: Path, flag: &str) {
        if QOS_FLAGS.iter().any(|(f, _)| f.eq_ignore_ascii_case(flag)) {
            return;
        }
        let names: Vec<&str> = QOS_FLAGS.iter().map(|(f, _)| *f).collect();
        let hint = match did_you_mean(flag, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("known: {}", listed(names.iter().copied())),
        };
        self.err(
            p,
            format!("{flag:?} is not a QOS flag slurmops can set"),
            hint,
        );
    }

    fn tres(&mut self, p: Path, v: &Option<String>) {
        if let Some(t) = v.as_deref().filter(|t| t.len() > MAX_TRES) {
            // Each item is compared with those before it: a list as long as a push makes it
            // would be quadratic.
            self.err(
                p,
                format!(
                    "a TRES list of {} bytes; slurmops takes at most {MAX_TRES}",
                    t.len()
                ),
                "list each TRES once: cpu=16,mem=64G,gres/gpu=8",
            );
        } else if let Some(Err(e)) = v.as_deref().map(parse_tres) {
            self.err(p, e, "write TRES as Slurm does: cpu=16,mem=64G,gres/gpu=8");
        }
    }

    fn wall(&mut self, p: Path, v: &Option<String>) {
        if let Some(Err(e)) = v.as_deref().map(parse_minutes) {
            self.err(p, e, "e.g. maxWall: \"2-00:00:00\" (two days)");
        }
    }

    fn association(&mut self, p: &Path, a: &Association, qos: &Known) {
        for (j, q) in a.qos.iter().enumerate() {
            self.qos_ref(p.key("qos").index(j), q, qos);
        }
        if let Some(d) = &a.default_qos {
            self.qos_ref(p.key("defaultQOS"), d, qos);
            if !a.qos.is_empty() && !a.qos.contains(d) {
                self.err(
                    p.key("defaultQOS"),
                    format!(
                        "default QOS {:?} is not one of the allowed QOS ({})",
                        clip(d),
                        listed(a.qos.iter().map(|q| q.as_str()))
                    ),
                    format!("add {d} to qos, or choose one of them"),
                );
            }
        }
        let l = &a.limits;
        let lp = p.key("limits");
        for (key, v) in [
            ("grpTRES", &l.grp_tres),
            ("maxTRESPerJob", &l.max_tres_per_job),
            ("maxTRESPerNode", &l.max_tres_per_node),
        ] {
            self.tres(lp.key(key), v);
        }
        self.wall(lp.key("maxWall"), &l.max_wall);
    }

    /// Accounts whose parents lead round to themselves: one walk up from each account, none
    /// walked twice (a chain of accounts costs its length, not its square), each account on a
    /// cycle named at its parent with the cycle from it (its first names when it is long).
    fn account_cycles(&mut self, a: &Accounting, p: &Path) {
        let index: HashMap<&str, usize> = a
            .accounts
            .iter()
            .enumerate()
            .map(|(i, x)| (x.name.as_str(), i))
            .collect();
        let parent = |i: usize| {
            let up = a.accounts[i].parent.as_deref().unwrap_or(ROOT);
            index.get(up).copied()
        };
        // 0: not walked yet; 1: on the walk now; 2: walked, on no cycle or its cycle found.
        let mut state = vec![0u8; a.accounts.len()];
        let mut cycles: Vec<Vec<usize>> = Vec::new();
        let mut on_cycle: HashMap<usize, (usize, usize)> = HashMap::new();
        for start in 0..a.accounts.len() {
            let mut walk = Vec::new();
            let mut at = Some(start);
            while let Some(i) = at {
                match state[i] {
                    2 => break,
                    1 => {
                        let from = walk.iter().position(|w| *w == i).expect("on the walk");
                        let cycle = walk[from..].to_vec();
                        for (k, m) in cycle.iter().enumerate() {
                            on_cycle.insert(*m, (cycles.len(), k));
                        }
                        cycles.push(cycle);
                        break;
                    }
                    _ => {
                        state[i] = 1;
                        walk.push(i);
                        at = parent(i);
                    }
                }
            }
            for w in walk {
                state[w] = 2;
            }
        }
        for i in 0..a.accounts.len() {
            let Some(&(c, k)) = on_cycle.get(&i) else {
                continue;
            };
            if self.counted_only() {
                continue;
            }
            let cycle = &cycles[c];
            // From this account round to it again.
            let names: Vec<&str> = (0..=cycle.len())
                .map(|s| a.accounts[cycle[(k + s) % cycle.len()]].name.as_str())
                .collect();
            let shown = match names.len() {
                n if n <= 9 => names
                    .iter()
                    .map(|n| clip(n))
                    .collect::<Vec<_>>()
                    .join(" → "),
                n => format!(
                    "{} → … → {} ({} accounts)",
                    names[..6]
                        .iter()
                        .map(|n| clip(n))
                        .collect::<Vec<_>>()
                        .join(" → "),
                    clip(names[n - 1]),
                    n - 1
                ),
            };
            self.err(
                p.index(i).key("parent"),
                format!("the account tree has a cycle: {shown}"),
                "every account must lead up to root: fix one of these parents",
            );
        }
    }

    fn user(&mut self, p: &Path, u: &User, accounts: &Known, qos: &Known) {
        if u.accounts.is_empty() {
            self.err(
                p.key("accounts"),
                format!("user {} has no account", u.name),
                "list at least one account the user may charge",
            );
        }
        let mut seen = BTreeSet::new();
        for (j, m) in u.accounts.iter().enumerate() {
            let mp = p.key("accounts").index(j);
            self.account_ref(mp.key("name"), &m.name, accounts);
            if !seen.insert(m.name.as_str()) {
                self.err(
                    mp.key("name"),
                    format!("user {} is in account {} twice", u.name, m.name),
                    "merge the two entries",
                );
            }
            self.association(&mp, &m.association, qos);
        }
        if let Some(d) = &u.default_account
            && !u.accounts.iter().any(|m| m.name == *d)
        {
            let names = Known::new(u.accounts.iter().map(|m| m.name.as_str()));
            self.unknown_ref(p.key("defaultAccount"), "account of this user", d, &names);
        }
    }
}
