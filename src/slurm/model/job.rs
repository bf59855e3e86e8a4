//! A Slurm job as read, and the batch job slurmops submits itself (a canary's validation).

use crate::slurm::words::Word;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Job {
    pub id: u64,
    // Text that repeats across the queue is a shared [`Word`] (users, accounts, partitions,
    // QOS, states, reasons, node names): 50,000 records say a few hundred of them.
    pub name: Word,
    pub user: Word,
    /// The Slurm account the job charges.
    pub account: Word,
    /// Its state flags, comma-separated as Slurm lists them (`PENDING`, `RUNNING,COMPLETING`).
    pub state: Word,
    pub partition: Word,
    /// Expanded from the hostlist slurmrestd reports.
    pub nodes: Vec<Word>,
    /// Real or expected end (UNIX seconds); None when unlimited or unknown.
    pub end_time: Option<i64>,
    pub start_time: Option<i64>,
    /// Why a pending job waits (e.g. `Resources`, `Priority`, `Dependency`, `JobHeldUser`).
    pub state_reason: Word,
    /// Nodes the job asks for (the minimum of a range), at least 1.
    pub node_count: u32,
    /// It takes its nodes whole (`--exclusive`): no other job shares them.
    pub exclusive: bool,
    /// The job's comment (a slurmops validation job writes its result there).
    pub comment: String,
    /// The batch script's exit code, once it ended.
    pub exit_code: Option<i64>,
    /// Submission (UNIX seconds).
    pub submit_time: Option<i64>,
    /// The job's time limit in minutes; None when unlimited or not set (the partition's).
    pub time_limit: Option<i64>,
    /// A batch job (not an `salloc` or `srun` allocation).
    pub batch: bool,
    /// Slurm may requeue it (`--requeue`, or `JobRequeue=1` and not `--no-requeue`).
    pub requeue: bool,
    /// It names the nodes it must run on (`--nodelist`): requeued after its worker was replaced,
    /// Slurm may never start it again (seen on 25.11 and 26.05: pending, `BadConstraints`, the
    /// new worker idle under the same name).
    pub pinned: bool,
    /// Its QOS.
    pub qos: Word,
    /// CPUs allocated, or asked for while pending.
    pub cpus: u32,
    /// GPUs allocated, or asked for while pending (see `gres::JobGpus`).
    pub gpus: u32,
}

impl Job {
    pub fn has_state(&self, s: &str) -> bool {
        self.state.split(',').any(|x| x == s)
    }

    /// Holding nodes: running, suspended or completing.
    pub fn holds_nodes(&self) -> bool {
        ["RUNNING", "SUSPENDED", "COMPLETING"]
            .iter()
            .any(|s| self.has_state(s))
    }
}

/// Job state flags as one [`Word`], comma-separated in Slurm's order.
pub fn state_word(flags: &[String]) -> Word {
    match flags {
        [one] => Word::new(one),
        _ => Word::new(&flags.join(",")),
    }
}

/// A batch job slurmops submits itself (a canary's validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    pub name: String,
    pub script: String,
    pub partition: String,
    /// Exactly these nodes, all of them.
    pub nodes: Vec<String>,
    pub time_limit_minutes: u32,
    /// Its nodes whole: no other job shares them while it runs (an active check).
    pub exclusive: bool,
    /// Slurm licenses it takes while it runs (`NAME:COUNT`): an active check's cap, enforced
    /// by slurmctld.
    pub licenses: Option<String>,
    /// GPUs it asks for on each node (`gres/gpu:N`): a GPU worker's all. Slurm (24.11 to
    /// 26.05) gives an exclusive job the node's GPUs even when it asks for none, but a job
    /// sharing the node gets none, and under ConstrainDevices (what slurmops renders) cannot
    /// open one; asked for explicitly, the GPUs are the job's either way (bed test
    /// `gpu_devices`).
    pub gpus: u32,
}

impl JobRequest {
    /// The priority of slurmops' jobs: the highest a job can be given (an operator's to set).
    pub fn priority() -> serde_json::Value {
        serde_json::json!({"set": true, "infinite": false, "number": 4_294_967_293u32})
    }

    /// The `job/submit` body (the same in v0.0.42 to v0.0.45). The job is submitted while its
    /// nodes are still drained; the highest priority (`priority`, set by the administrator right
    /// after, see `Client::submit`) lets it start before any user job once they are resumed. Its output goes nowhere: the job reports through its comment.
    pub fn body(&self) -> serde_json::Value {
        let n = self.nodes.len().max(1);
        let mut body = serde_json::json!({
            "script": self.script,
            "job": {
                "name": self.name,
                "partition": self.partition,
                "required_nodes": self.nodes,
                "minimum_nodes": n,
                "maximum_nodes": n,
                "tasks": n,
                "time_limit": {"set": true, "infinite": false, "number": self.time_limit_minutes},
                "current_working_directory": "/tmp",
                "environment": [JOB_PATH],
                "standard_output": "/dev/null",
                "standard_error": "/dev/null",
            }
        });
        if self.exclusive {
            body["job"]["shared"] = serde_json::json!(["none"]);
        }
        if let Some(l) = &self.licenses {
            body["job"]["licenses"] = serde_json::json!(l);
        }
        if self.gpus > 0 {
            body["job"]["tres_per_node"] = serde_json::json!(format!("gres/gpu:{}", self.gpus));
        }
        body
    }
}

impl JobRequest {
    /// The same job as a batch script for `sbatch`: `body`'s fields as `#SBATCH` lines after
    /// the script's first line, its interpreter (options given to sbatch on its command line,
    /// e.g. `--nodelist`, override them), and its environment, PATH alone, set after them. What `body` sets and sbatch cannot: the priority, which
    /// slurmops sets as the administrator right after submitting (`Client::submit`).
    pub fn sbatch(&self) -> String {
        let n = self.nodes.len().max(1);
        let mut opts = vec![
            format!("--job-name={}", self.name),
            format!("--partition={}", self.partition),
            format!("--nodes={n}"),
            format!("--ntasks={n}"),
            format!("--time={}", self.time_limit_minutes),
            "--chdir=/tmp".to_string(),
            // Only Slurm's variables from the submitter, PATH set below: `--export=PATH=…`
            // would have slurmd load the user's login environment, which fails for a user with
            // no login shell (`daemon`: the job held, `user_env_retrieval_failed_requeued_held`).
            "--export=NIL".to_string(),
            "--output=/dev/null".to_string(),
            "--error=/dev/null".to_string(),
        ];
        if !self.nodes.is_empty() {
            opts.push(format!("--nodelist={}", self.nodes.join(",")));
        }
        if self.exclusive {
            opts.push("--exclusive".into());
        }
        if let Some(l) = &self.licenses {
            opts.push(format!("--licenses={l}"));
        }
        if self.gpus > 0 {
            opts.push(format!("--gres=gpu:{}", self.gpus));
        }
        let mut header: String = opts.iter().map(|o| format!("#SBATCH {o}\n")).collect();
        header.push_str(&format!("export {JOB_PATH}\n"));
        match self.script.split_once('\n') {
            Some((first, rest)) if first.starts_with("#!") => format!("{first}\n{header}{rest}"),
            _ => format!("#!/bin/sh\n{header}{}", self.script),
        }
    }
}

/// The only environment of slurmops' jobs.
const JOB_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
