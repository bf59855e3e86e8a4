//! The Slurm instance the size slurmops is sold for (`tests/bed/scale.sh`): its slurmrestd, a
//! client of it, and a queue of individual held jobs (a job array would be one record). Shared
//! by the scale tests and the benchmark.

use std::time::{Duration, Instant};

use futures::StreamExt;
use slurmops::slurm::Client;

/// The scale instance: slurmrestd's URL and a root token. From `up`, it is stopped when dropped.
pub struct Scale {
    pub url: String,
    pub jwt: String,
    owned: bool,
}

impl Scale {
    /// Starts it afresh with SETS x PER node records (`sNNN-I`).
    pub fn up(sets: usize, per: usize) -> Scale {
        let out = std::process::Command::new("bash")
            .args([
                "tests/bed/scale.sh",
                "up",
                &sets.to_string(),
                &per.to_string(),
            ])
            .output()
            .expect("tests/bed/scale.sh");
        assert!(
            out.status.success(),
            "scale.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("scale.sh printed no {k}"))
                .to_string()
        };
        Scale {
            url: get("SCALE_RESTD_URL"),
            jwt: get("SCALE_JWT"),
            owned: true,
        }
    }

    /// PROGRAM's (slurmctld, slurmrestd) peak resident memory so far, MiB, from its pid file.
    pub fn peak_rss_mib(program: &str) -> f64 {
        let run = std::env::var("SLURMOPS_BED_RUN").unwrap_or_else(|_| "/tmp/slurmops-bed".into());
        let file = format!("{run}/slurm/scale/{program}.pid");
        let pid: u32 = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_eq!(
            comm.trim(),
            program,
            "{file} names pid {pid}, not {program}"
        );
        slurmops::bench::peak_rss_mib_of(pid)
    }

    /// The one `scale.sh up` started for this process (SCALE_RESTD_URL, SCALE_JWT).
    pub fn from_env() -> Result<Scale, String> {
        let get = |k: &str| {
            std::env::var(k).map_err(|_| {
                format!("{k} is not set: run `tests/bed/scale.sh up` first (tests/bench.sh does)")
            })
        };
        Ok(Scale {
            url: get("SCALE_RESTD_URL")?,
            jwt: get("SCALE_JWT")?,
            owned: false,
        })
    }

    /// A client with TIMEOUT per request and, when given, a cap of MAX_JOBS jobs kept.
    pub fn client(&self, timeout: Duration, max_jobs: Option<usize>) -> Client {
        let mut config = slurmops::slurm::Config::new(
            self.url.clone(),
            slurmops::slurm::auth::Credentials::Token {
                token: slurmops::slurm::auth::Secret::new(self.jwt.clone()),
                user: None,
            },
        );
        config.timeout = timeout;
        if let Some(m) = max_jobs {
            config.max_jobs = m;
        }
        Client::new(config).expect("Slurm client")
    }

    /// Submits N held one-minute jobs named NAME, sixteen at a time, saying every 5,000; how
    /// long it took.
    pub async fn hold(&self, n: usize, name: &str) -> Result<Duration, String> {
        let http = reqwest::Client::new();
        let started = Instant::now();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let body = serde_json::json!({
            "script": "#!/bin/sh\nsleep 1\n",
            "job": {"name": name, "partition": "all", "hold": true, "tasks": 1,
                "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"],
                "time_limit": {"set": true, "infinite": false, "number": 1}},
        });
        let results: Vec<Result<(), String>> = futures::stream::iter(0..n)
            .map(|_| {
                let (http, done, body) = (&http, &done, &body);
                async move {
                    self.submit(http, body).await?;
                    let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if k % 5000 == 0 {
                        println!(
                            "  {k} of {n} jobs queued ({:.0} s)",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    Ok(())
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        results.into_iter().collect::<Result<Vec<()>, String>>()?;
        Ok(started.elapsed())
    }

    /// Submits one job (BODY); its id.
    pub async fn submit(
        &self,
        http: &reqwest::Client,
        body: &serde_json::Value,
    ) -> Result<u64, String> {
        let r = http
            .post(format!("{}/slurm/v0.0.42/job/submit", self.url))
            .header("X-SLURM-USER-TOKEN", &self.jwt)
            .json(body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("submit: HTTP {}", r.status()));
        }
        let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
        v["job_id"]
            .as_u64()
            .ok_or_else(|| format!("submit: no job_id in {v}"))
    }

    /// Starts the slurmd of records NAMES (`scale.sh slurmd`), as a replaced worker's new pod
    /// does: each registers with slurmctld from its record's own address.
    pub fn start_slurmd(names: &[String]) -> Result<(), String> {
        Scale::script("slurmd", names)
    }

    /// Stops the slurmd of records NAMES.
    pub fn stop_slurmd(names: &[String]) -> Result<(), String> {
        Scale::script("stop-slurmd", names)
    }

    /// The records Slurm holds drained or draining now (`sinfo -t drain`: slurmctld's binary
    /// answer, not slurmrestd's JSON of every node, which at 10,000 records is 23 MB a read).
    pub fn drained() -> Result<std::collections::HashSet<String>, String> {
        let out = std::process::Command::new("bash")
            .args(["tests/bed/slurm.sh", "exec", "scale", "sinfo", "-h", "-N"])
            .args(["-t", "drain", "-o", "%N"])
            .output()
            .map_err(|e| format!("sinfo: {e}"))?;
        if !out.status.success() {
            return Err(format!("sinfo: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect())
    }

    fn script(command: &str, names: &[String]) -> Result<(), String> {
        let out = std::process::Command::new("bash")
            .args(["tests/bed/scale.sh", command])
            .args(names)
            .output()
            .map_err(|e| format!("tests/bed/scale.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scale.sh {command}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Cancels job ID.
    pub async fn cancel(&self, http: &reqwest::Client, id: u64) -> Result<(), String> {
        let r = http
            .delete(format!("{}/slurm/v0.0.42/job/{id}", self.url))
            .header("X-SLURM-USER-TOKEN", &self.jwt)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("cancel {id}: HTTP {}", r.status()));
        }
        Ok(())
    }
}

impl Drop for Scale {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::process::Command::new("bash")
                .args(["tests/bed/scale.sh", "down"])
                .output();
        }
    }
}
