//! The vocabulary: every name slurmops puts on or reads from Kubernetes and Slurm objects. A tool
//! without CRDs has no schema to publish; these labels, annotations, field managers, object
//! names, drain reasons, Event reasons, condition types and status keys *are* its API, and users'
//! scripts, alerts and policies depend on them. They live here alone, one line of doc each
//! (`docs/vocabulary.md`'s table is generated from `ALL` and checked by a test, and a test
//! fails when a `slurmops.dev/` or ApplySet name is spelled as a literal anywhere else).

mod drain;
mod state;

pub use drain::{DRAINED_BY, DrainReason, drained_by};
pub use state::{CanaryStage, CanaryVerdict, CheckResult, SLURM_OFF, Verdict};

/// The field manager of cluster NAME's apply (`slurmops/NAME`): one per cluster, so that a
/// field one cluster's daemon set is never another's to drop. At most 49 bytes (names are at
/// most 40), under the API server's 128.
pub fn apply_manager(cluster: &str) -> String {
    format!("{MANAGER_APPLY}/{cluster}")
}

/// The daemon's objects' name (`slurmops-NAME` with `--cluster NAME`) and its pods'
/// `app.kubernetes.io/name`: the clusters' NetworkPolicies let pods so labelled, in any
/// namespace, reach slurmrestd.
pub const DAEMON_NAME: &str = "slurmops";

/// What a term names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Label,
    Annotation,
    FieldManager,
    Object,
    DrainReason,
    EventReason,
    Condition,
    StatusKey,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Label => "label",
            Kind::Annotation => "annotation",
            Kind::FieldManager => "field manager",
            Kind::Object => "object name",
            Kind::DrainReason => "Slurm drain reason",
            Kind::EventReason => "Event reason",
            Kind::Condition => "pod condition",
            Kind::StatusKey => "status key",
        }
    }
}

/// One term of the vocabulary.
#[derive(Debug, Clone, Copy)]
pub struct Term {
    pub kind: Kind,
    pub name: &'static str,
    pub value: &'static str,
    pub doc: &'static str,
}

macro_rules! vocabulary {
    ($( $kind:ident { $( #[doc = $doc:literal] $name:ident = $value:literal; )* } )*) => {
        $( $( #[doc = $doc] pub const $name: &str = $value; )* )*
        /// Every term, in the order of this file.
        pub const ALL: &[Term] = &[
            $( $( Term { kind: Kind::$kind, name: stringify!($name), value: $value, doc: $doc.trim_ascii() }, )* )*
        ];
    };
}

vocabulary! {
    Label {
        /// The Kubernetes recommended label: always `slurm`.
        LABEL_NAME = "app.kubernetes.io/name";
        /// The cluster (cluster.yaml's `metadata.name`) an object belongs to.
        LABEL_INSTANCE = "app.kubernetes.io/instance";
        /// The Slurm component: controller, restapi, accounting, login, worker.
        LABEL_COMPONENT = "app.kubernetes.io/component";
        /// Always `slurmops` on the objects it renders.
        LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
        /// The NodeSet of a worker StatefulSet, PodTemplate and pod.
        LABEL_NODESET = "slurmops.dev/nodeset";
        /// The login set of a login Deployment and its pods.
        LABEL_LOGIN_SET = "slurmops.dev/login-set";
        /// The Slurm release (major.minor) a workload runs, read back during upgrades.
        LABEL_SLURM_VERSION = "slurmops.dev/slurm-version";
        /// `true` on a worker running jobs: the NodeSet's busy PodDisruptionBudget selects it.
        LABEL_BUSY = "slurmops.dev/busy";
        /// The revision (template digest) of a slurmops-made worker and its PodTemplate.
        LABEL_REVISION = "slurmops.dev/revision";
        /// On every status ConfigMap (`slurmops status` lists them by it).
        LABEL_STATUS = "slurmops.dev/status";
        /// The cluster of a daemon run with `--cluster` (its pods, its status ConfigMap).
        LABEL_CLUSTER = "slurmops.dev/cluster";
        /// `true` on the daemon's pod holding the leader Lease: its Service selects it (never a standby).
        LABEL_LEADER = "slurmops.dev/leader";
        /// KEP-3659: the id of the ApplySet, on its parent ConfigMap `NAME-applyset`.
        LABEL_APPLYSET_ID = "applyset.kubernetes.io/id";
        /// KEP-3659: on every member of the ApplySet; only members are ever pruned.
        LABEL_APPLYSET_PART_OF = "applyset.kubernetes.io/part-of";
        /// `1` on the ConfigMap holding the dashboard (`install --grafana-dashboard`): the label the Grafana Helm chart's dashboard sidecar loads ConfigMaps by, by default.
        LABEL_GRAFANA_DASHBOARD = "grafana_dashboard";
    }
    Annotation {
        /// Digest of what slurmops last applied to an object (tells hand edits from git changes).
        ANNOTATION_APPLIED_HASH = "slurmops.dev/applied-hash";
        /// Autoscale's worker count of a NodeSet whose pods slurmops makes (on its PodTemplate).
        ANNOTATION_REPLICAS = "slurmops.dev/replicas";
        /// A NodeSet's canary verdict for a revision (JSON), on its workload.
        ANNOTATION_CANARY = "slurmops.dev/canary";
        /// Autoscale's last decision for a NodeSet, on its workload.
        ANNOTATION_AUTOSCALE = "slurmops.dev/autoscale";
        /// A drain request, its value the reason: on a Kubernetes Node (its workers) or a worker pod, set by a health tool or an operator; removing it resumes the worker (after its active checks).
        ANNOTATION_DRAIN = "slurmops.dev/drain";
        /// Slinky's drain request on a Kubernetes Node, its value the reason (NVIDIA's NVSentinel sets it), read as `slurmops.dev/drain`.
        ANNOTATION_SLINKY_CORDON_REASON = "nodeset.slinky.slurm.net/node-cordon-reason";
        /// Slinky 1.3's drain request on a worker pod (health checks and automation set it; its value `true` or the reason), read as `slurmops.dev/drain`.
        ANNOTATION_SLINKY_POD_CORDON = "nodeset.slinky.slurm.net/pod-cordon-requested";
        /// On the controllers' StatefulSet with `controller.ha.serviceAddress`: how many Ready pods make it available (1, the controller in control; the standbys are never Ready).
        ANNOTATION_READY_REPLICAS = "slurmops.dev/ready-replicas";
        /// Prefix of the config digests in pod templates (`checksum.slurmops.dev/slurm.conf-restart`).
        CHECKSUM_PREFIX = "checksum.slurmops.dev/";
        /// KEP-3659: the tool that manages the ApplySet (`slurmops/vVERSION`).
        ANNOTATION_APPLYSET_TOOLING = "applyset.kubernetes.io/tooling";
        /// KEP-3659: the group-kinds the ApplySet's members have.
        ANNOTATION_APPLYSET_GROUP_KINDS = "applyset.kubernetes.io/contains-group-kinds";
    }
    FieldManager {
        /// Server-side apply of what cluster.yaml renders, as `slurmops/NAME` (one per cluster; alone, the old shared name, handed over once).
        MANAGER_APPLY = "slurmops";
        /// `spec.replicas` of autoscaled NodeSets, so apply never resets them.
        MANAGER_AUTOSCALE = "slurmops-autoscale";
        /// A NodeSet's canary verdict annotation.
        MANAGER_CANARY = "slurmops-canary";
        /// The keys of `<cluster>-maintenance`, the reservations asked of slurmctld's sidecar.
        MANAGER_MAINTENANCE = "slurmops-maintenance";
        /// The daemon's status ConfigMap.
        MANAGER_STATUS = "slurmops-status";
    }
    Object {
        /// The Lease only its holder writes under (`slurmops-leader-NAME` with `--cluster NAME`).
        LEASE = "slurmops-leader";
        /// The daemon's status ConfigMap (`slurmops-status-NAME` with `--cluster NAME`).
        STATUS_CONFIGMAP = "slurmops-status";
        /// The source component of the Events slurmops records.
        EVENT_COMPONENT = "slurmops";
        /// The live view's document (`apiVersion` of `GET /api/v1/cluster`, kind `ClusterView`).
        VIEW_API_VERSION = "slurmops.dev/v1";
        /// Where the daemon serves the live view's document.
        VIEW_API_PATH = "/api/v1/cluster";
        /// Prefix of a maintenance window's Slurm reservation (`slurmops-maint-NODESET`).
        RESERVATION_PREFIX = "slurmops-maint-";
        /// Prefix of a canary's validation job name in Slurm.
        CANARY_JOB_PREFIX = "slurmops-canary";
        /// Prefix of an active check's job name (`slurmops-check:CHECK:NODE:DUE`).
        CHECK_JOB_PREFIX = "slurmops-check";
        /// Prefix of the Slurm license capping an active check's jobs (slurm.conf `Licenses`).
        CHECK_LICENSE_PREFIX = "slurmops-check-";
    }
    DrainReason {
        /// Prefix of every Slurm drain reason slurmops sets; only those it ever resumes.
        REASON_PREFIX = "slurmops:";
        /// A worker replaced by a rollout.
        REASON_ROLLOUT = "rollout";
        /// A worker leaving for a scale-in.
        REASON_SCALE_IN = "scale-in";
        /// A worker autoscale gives back (the queue no longer needs it).
        REASON_AUTOSCALE = "autoscale";
        /// A worker of a NodeSet removed from cluster.yaml.
        REASON_REMOVED = "NodeSet removed";
        /// A perNode worker whose Kubernetes node left or stopped matching.
        REASON_NODE_LEFT = "node left";
        /// A canary that failed its validation (kept drained until git or an operator decides).
        REASON_CANARY_FAILED = "canary failed";
        /// A new worker held out of service until its active checks pass (it registers so).
        REASON_CHECKS_PENDING = "checks pending";
        /// `check NAME failed: job N: ERROR`: a worker whose active check failed, drained until it passes again.
        REASON_CHECK = "check";
        /// `drain requested: REASON` (a worker pod's `slurmops.dev/drain`; on a Node: `node NAME: drain requested: REASON`).
        REASON_DRAIN_REQUESTED = "drain requested";
    }
    EventReason {
        /// The daemon applied a commit.
        EVENT_APPLIED = "Applied";
        /// The daemon applies nothing (`--suspend`, `spec.policy.suspend`).
        EVENT_SUSPENDED = "Suspended";
        /// A commit whose cluster.yaml is invalid: nothing applied.
        EVENT_INVALID_COMMIT = "InvalidCommit";
        /// A commit refused (signature, another cluster's file, a force-push): nothing applied.
        EVENT_REFUSED_COMMIT = "RefusedCommit";
        /// A commit not descending from the last applied one, taken (`--allow-force-push`).
        EVENT_FORCE_PUSH_FOLLOWED = "ForcePushFollowed";
        /// The copy taken before a Slurm upgrade converts data failed: the upgrade stops.
        EVENT_UPGRADE_STOPPED = "UpgradeStopped";
        /// git could not be fetched.
        EVENT_FETCH_FAILED = "FetchFailed";
        /// Applying a commit failed.
        EVENT_APPLY_FAILED = "ApplyFailed";
        /// A commit's canary failed: the rollout is halted.
        EVENT_CANARY_FAILED = "CanaryFailed";
        /// A canary's validation passed: the rollout goes on.
        EVENT_CANARY_PASSED = "CanaryPassed";
        /// An operator proceeded past a failed canary (`rollout --resume`).
        EVENT_CANARY_OVERRIDDEN = "CanaryOverridden";
        /// An operator rolled outside the maintenance windows (`rollout --ignore-window`).
        EVENT_WINDOW_IGNORED = "WindowIgnored";
        /// A worker is being drained.
        EVENT_DRAINING = "Draining";
        /// A drained worker's pod was deleted to be replaced.
        EVENT_WORKER_REPLACED = "WorkerReplaced";
        /// A controller pod was deleted for its StatefulSet to make it again from the new template (`controller.ha.serviceAddress`: slurmops rolls the controllers, the standbys first).
        EVENT_CONTROLLER_REPLACED = "ControllerReplaced";
        /// A drain slurmops set was resumed.
        EVENT_RESUMED = "Resumed";
        /// The jobs on a worker drained for a rollout were requeued (`runningJobs: requeue`).
        EVENT_JOBS_REQUEUED = "JobsRequeued";
        /// A maintenance reservation was made ahead of a window.
        EVENT_MAINTENANCE_RESERVED = "MaintenanceReserved";
        /// A worker waits for jobs before it can go.
        EVENT_WAITING_FOR_JOBS = "WaitingForJobs";
        /// Autoscale added workers.
        EVENT_SCALED_OUT = "ScaledOut";
        /// Autoscale removed workers.
        EVENT_SCALED_IN = "ScaledIn";
        /// An active check failed on a worker (the message names the job).
        EVENT_CHECK_FAILED = "CheckFailed";
        /// An active check passed on a worker that was held or drained for it.
        EVENT_CHECK_PASSED = "CheckPassed";
        /// An active check's job waits for slurmctld to learn its license (next reconfigure).
        EVENT_CHECK_DEFERRED = "CheckDeferred";
    }
    Condition {
        /// Slurm's view of a worker, as a pod condition (Idle, Allocated, Draining, Drained, ...).
        CONDITION_SLURM_NODE = "slurmops.dev/slurm-node";
        /// Prefix of an active check's pod condition (`checks.slurmops.dev/NAME`): last result, time, job, figure.
        CONDITION_CHECK_PREFIX = "checks.slurmops.dev/";
        /// Slinky's: True while the worker's Slurm node is drained or draining (what health tools written for Slinky, e.g. NVSentinel, wait for).
        CONDITION_SLINKY_DRAIN = "SlurmNodeStateDrain";
        /// Slinky's: True while jobs hold the whole node (ALLOCATED).
        CONDITION_SLINKY_ALLOCATED = "SlurmNodeStateAllocated";
        /// Slinky's: True while jobs hold part of the node (MIXED).
        CONDITION_SLINKY_MIXED = "SlurmNodeStateMixed";
        /// Slinky's: True while jobs on the node are completing (COMPLETING).
        CONDITION_SLINKY_COMPLETING = "SlurmNodeStateCompleting";
    }
    StatusKey {
        /// The repository the daemon follows (credentials cut).
        STATUS_REPOSITORY = "repository";
        /// The branch it follows.
        STATUS_BRANCH = "branch";
        /// The newest commit fetched.
        STATUS_LAST_SEEN_COMMIT = "lastSeenCommit";
        /// The commit whose cluster.yaml is applied.
        STATUS_LAST_APPLIED_COMMIT = "lastAppliedCommit";
        /// applied, invalid, refused, failed, fetch-failed, suspended, canary-failed.
        STATUS_RESULT = "result";
        /// The commit the result is about.
        STATUS_RESULT_COMMIT = "resultCommit";
        /// Errors of the last attempt, one per line, with positions.
        STATUS_ERRORS = "errors";
        /// What the last apply and rollout did.
        STATUS_SUMMARY = "summary";
        /// When the last fetch succeeded (RFC 3339).
        STATUS_LAST_FETCH = "lastFetch";
        /// When the last attempt ran (RFC 3339).
        STATUS_LAST_ATTEMPT = "lastAttempt";
        /// Where each NodeSet stands (JSON).
        STATUS_NODE_SETS = "nodeSets";
        /// Empty when Slurm answered the last pass, else why not.
        STATUS_SLURM = "slurm";
        /// What is held back and what it waits for.
        STATUS_HELD = "held";
        /// With backup controllers: which slurmctld answers and has control, which do not.
        STATUS_CONTROLLERS = "controllers";
        /// With several slurmrestd: which pod answered, which could not be reached.
        STATUS_SLURMRESTD = "slurmrestd";
        /// Active checks: per check, workers passed, failed, running and due, and each failure.
        STATUS_CHECKS = "checks";
        /// The highest Slurm job id known: a restarted daemon reads the jobs above it first.
        STATUS_JOBS_LISTED_TO = "jobsListedTo";
    }
}

/// The vocabulary as a Markdown table (docs/vocabulary.md).
pub fn markdown() -> String {
    let mut out = String::from("| kind | name | meaning |\n|---|---|---|\n");
    for t in ALL {
        out += &format!("| {} | `{}` | {} |\n", t.kind.as_str(), t.value, t.doc);
    }
    out
}
