//! slurmrestd's replicas addressed one by one. Behind its Service a request lands on any replica
//! and no answer says which; a replica that restarts fails the requests that reach it. Given the
//! pods behind the Service as they are now (the daemon's watch of its Endpoints, read on every
//! request: a pod that leaves them, before it stops and its IP can go to another pod, is never
//! sent the token again), each request goes to the replica that answered last, moves on at once
//! to the next when one cannot be reached, and the client tells which one answered and which did
//! not (the daemon's status).

use std::time::Duration;

use reqwest::Method;

use super::{Client, SlurmError};

/// One slurmrestd pod: its name and base URL (`http://IP:PORT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub name: String,
    pub base: String,
}

/// The replica that answered the last request sent to replicas (None: none could be reached,
/// the request went to the Service), and those that could not be reached before it, with why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answered {
    pub by: Option<String>,
    pub unreachable: Vec<(String, String)>,
}

impl Answered {
    /// One line: `a answered; b did not answer (why)`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        match &self.by {
            Some(by) => parts.push(format!("{by} answered")),
            None => parts.push("no replica answered (the Service was asked)".into()),
        }
        for (name, why) in &self.unreachable {
            parts.push(format!("{name} did not answer ({why})"));
        }
        parts.join("; ")
    }
}

/// Where the replicas come from (read on every request: a pod that leaves the Service's
/// Endpoints is never sent another request), the one that answered last, and the last outcome.
#[derive(Default)]
pub(super) struct Replicas {
    source: Option<Source>,
    preferred: Option<String>,
    answered: Option<Answered>,
    /// Replicas that could not be reached, and why (the latest), until one answers again or
    /// leaves the Service: a status is a snapshot, and a replica that stopped stays named while
    /// it is down (`Client::recheck_missed` asks each of them once a pass), not only in the
    /// pass that moved on from it.
    missed: Vec<(String, String)>,
}

impl Replicas {
    /// Records a request's outcome: BY answered it (None: none could be reached), UNREACHABLE
    /// could not be reached before.
    fn outcome(&mut self, by: Option<&str>, unreachable: Vec<(String, String)>) {
        for (name, why) in &unreachable {
            match self.missed.iter_mut().find(|(n, _)| n == name) {
                Some(m) => m.1 = why.clone(),
                None => self.missed.push((name.clone(), why.clone())),
            }
        }
        if let Some(by) = by {
            self.missed.retain(|(n, _)| n != by);
            self.preferred = Some(by.to_string());
        }
        self.answered = Some(Answered {
            by: by.map(str::to_string),
            unreachable,
        });
    }

    /// The last request's replica and the replicas that are down, of those LISTED now.
    fn take(&mut self, listed: Option<&[String]>) -> Option<Answered> {
        if let Some(listed) = listed {
            self.missed.retain(|(n, _)| listed.contains(n));
        }
        self.answered.as_ref().map(|a| Answered {
            by: a.by.clone(),
            unreachable: self.missed.clone(),
        })
    }

    /// NAME answered a check of its own (not a request of the pass's: it does not become the
    /// one tried first).
    fn back(&mut self, name: &str) {
        self.missed.retain(|(n, _)| n != name);
    }
}

/// How long a replica that could not be reached is given to answer its check.
const RECHECK_DEADLINE: Duration = Duration::from_secs(3);

/// The replicas as they are now (the daemon's watch of the Service's Endpoints).
pub type Source = std::sync::Arc<dyn Fn() -> Vec<Replica> + Send + Sync>;

/// LIST with the replica named PREFERRED first.
fn ordered(mut list: Vec<Replica>, preferred: Option<&str>) -> Vec<Replica> {
    if let Some(i) = list.iter().position(|r| Some(r.name.as_str()) == preferred) {
        let r = list.remove(i);
        list.insert(0, r);
    }
    list
}

impl Client {
    /// Sends requests to the pods SOURCE lists as it is asked (an empty list: to the Service),
    /// the one that answered last first.
    pub fn set_replicas(&self, source: Source) {
        let mut r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        r.source = Some(source);
    }

    /// The replicas requests go to now, the one tried first first.
    pub fn replicas(&self) -> Vec<Replica> {
        let (source, preferred) = {
            let r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
            (r.source.clone(), r.preferred.clone())
        };
        source.map_or_else(Vec::new, |s| ordered(s(), preferred.as_deref()))
    }

    /// Which replica answered the last request, and every replica behind the Service now that
    /// could not be reached and has not answered since (a pass's status). None without
    /// replicas.
    pub fn take_answered(&self) -> Option<Answered> {
        let listed: Option<Vec<String>> = {
            let r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
            r.source.clone()
        }
        .map(|s| s().into_iter().map(|r| r.name).collect());
        let mut r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        r.take(listed.as_deref())
    }

    /// Asks each replica that could not be reached, and is still behind the Service, for
    /// slurmrestd's ping, once: one that answers is no longer named (a pass's requests go to
    /// the one that answered last, so nothing else would try it again). One small request per
    /// replica that is down, each within a few seconds.
    pub async fn recheck_missed(&self) {
        let down: Vec<Replica> = {
            let r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
            let names: Vec<String> = r.missed.iter().map(|(n, _)| n.clone()).collect();
            let listed = r.source.clone().map(|s| s()).unwrap_or_default();
            listed
                .into_iter()
                .filter(|x| names.contains(&x.name))
                .collect()
        };
        if down.is_empty() {
            return;
        }
        let Ok(p) = self.parser().await else {
            return;
        };
        for x in down {
            let url = format!("{}/slurm/{}/ping/", x.base, p.as_str());
            let answer = self
                .send_once::<Vec<u8>>(&Method::GET, &url, None, RECHECK_DEADLINE, None)
                .await;
            let mut r = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
            match answer {
                Err(SlurmError::Unreachable { detail, .. }) => {
                    if let Some(m) = r.missed.iter_mut().find(|(n, _)| *n == x.name) {
                        m.1 = detail;
                    }
                }
                _ => r.back(&x.name),
            }
        }
    }

    /// URL (on the Service's base) sent to each replica in turn until one can be reached; None
    /// without replicas or when none could be (the caller then asks the Service).
    pub(super) async fn to_replicas<A: super::answer::Answer>(
        &self,
        method: &Method,
        url: &str,
        body: Option<&serde_json::Value>,
        deadline: Duration,
        as_user: Option<&str>,
    ) -> Option<Result<A, SlurmError>> {
        let list = self.replicas();
        if list.is_empty() {
            return None;
        }
        let path = url.strip_prefix(&self.base).unwrap_or(url);
        let mut unreachable = Vec::new();
        for r in &list {
            let url = format!("{}{path}", r.base);
            match self
                .send_once::<A>(method, &url, body, deadline, as_user)
                .await
            {
                Err(SlurmError::Unreachable { detail, .. }) => {
                    unreachable.push((r.name.clone(), detail));
                }
                other => {
                    let mut s = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
                    s.outcome(Some(&r.name), unreachable);
                    return Some(other);
                }
            }
        }
        let mut s = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        s.outcome(None, unreachable);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_who_answered_and_who_did_not() {
        let a = Answered {
            by: Some("r-b".into()),
            unreachable: vec![("r-a".into(), "connection refused".into())],
        };
        assert_eq!(
            a.line(),
            "r-b answered; r-a did not answer (connection refused)"
        );
        let none = Answered {
            by: None,
            unreachable: vec![("r-a".into(), "timed out".into())],
        };
        assert_eq!(
            none.line(),
            "no replica answered (the Service was asked); r-a did not answer (timed out)"
        );
    }

    #[test]
    fn a_replica_that_could_not_be_reached_is_named_until_it_answers_or_leaves_the_service() {
        let mut r = Replicas::default();
        let both: Vec<String> = vec!["a".into(), "b".into()];
        let refused = || vec![("a".to_string(), "connection refused".to_string())];
        // A pass: its first request moves from a to b, the next ones go to b at once.
        r.outcome(Some("b"), refused());
        r.outcome(Some("b"), vec![]);
        let down = "b answered; a did not answer (connection refused)";
        assert_eq!(r.take(Some(&both)).unwrap().line(), down);
        // The next pass, a not tried again by the pass's requests: still named, it is down.
        r.outcome(Some("b"), vec![]);
        assert_eq!(r.take(Some(&both)).unwrap().line(), down);
        // Its check answered: not named, and b is still the one tried first.
        r.back("a");
        assert_eq!(r.take(Some(&both)).unwrap().line(), "b answered");
        assert_eq!(r.preferred.as_deref(), Some("b"));
        // a could not be reached, then answered a request itself: not named.
        r.outcome(Some("b"), refused());
        r.outcome(Some("a"), vec![]);
        assert_eq!(r.take(Some(&both)).unwrap().line(), "a answered");
        // None reached: the Service was asked.
        r.outcome(None, refused());
        assert_eq!(
            r.take(Some(&both)).unwrap().line(),
            "no replica answered (the Service was asked); a did not answer (connection refused)"
        );
        // a left the Service (its pod deleted): no longer named.
        assert_eq!(
            r.take(Some(&["b".to_string()])).unwrap().line(),
            "no replica answered (the Service was asked)"
        );
    }

    #[test]
    fn the_replica_that_answered_is_tried_first() {
        let r = |n: &str| Replica {
            name: n.into(),
            base: format!("http://{n}:6820"),
        };
        assert_eq!(ordered(vec![r("a"), r("b")], Some("b")), [r("b"), r("a")]);
        assert_eq!(
            ordered(vec![r("a"), r("b")], Some("c")),
            [r("a"), r("b")],
            "one no longer listed changes nothing"
        );
    }
}
