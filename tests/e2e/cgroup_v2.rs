//! Job isolation as rendered, on a node of the unified cgroup v2 hierarchy (issue 78), for each
//! release: the bed's guest (support::guest: Debian trixie's kernel and systemd under QEMU, every
//! controller on) runs the release's Slurm from the bed's own chroot, each daemon a systemd
//! service rooted in it, slurmd's cgroup subtree delegated as Debian's unit runs it — with the
//! slurm.conf cgroup plugins (proctrack/cgroup, task/cgroup, jobacct_gather/cgroup) and the
//! cgroup.conf slurmops renders (`CgroupPlugin=autodetect`, which picks cgroup/v2 there), sized by
//! the StatefulSet's own `--conf`. `confinement.rs`'s job, there: asking for 1 CPU and 100 MB it
//! sees one CPU, its job cgroup's `memory.max` is 100 MB, and the 400 MB it then takes end it
//! OUT_OF_MEMORY by its own cgroup, its slurmd up and the node IDLE after.
//!
//! The worker pod as rendered, from its image under containerd and runc, is cgroup_v2_pod.rs.

use std::time::Instant;

use slurmops::cluster::load;
use slurmops::render::render;

use crate::support::guest;
use crate::support::slurm::{confining_overlay, rendered_slurmd_conf};
use crate::support::{cluster_head, unique_suffix};

/// confinement.rs's job: its CPUs, its job cgroup's cpuset and memory.max, then 400 MB; its
/// output goes to the file OUT.
pub fn confined_job(out: &str) -> String {
    format!(
        r#"#!/bin/sh
exec > {out}
nproc
path=$(sed -n 's/^0:://p' /proc/self/cgroup)
cat "/sys/fs/cgroup${{path%%/step_*}}/cpuset.cpus.effective"
cat "/sys/fs/cgroup${{path%%/step_*}}/memory.max"
head -c 400000000 /dev/zero | tail > /dev/null
echo done
"#
    )
}

/// What `confined_job` printed (OUT) and Slurm's record of it (STATE) say: one CPU, a 100 MB
/// job cgroup, and the job ended OUT_OF_MEMORY.
pub fn assert_confined(out: &str, state: &str) {
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("1"),
        "the job saw more than its one CPU:\n{out}\n{state}"
    );
    let cpuset = lines.next().unwrap_or_default();
    assert!(
        cpuset.parse::<u32>().is_ok(),
        "the job's cpuset is not one CPU of the node's:\n{out}\n{state}"
    );
    assert_eq!(
        lines.next(),
        Some("104857600"),
        "the job's cgroup memory.max is not its 100 MB:\n{out}\n{state}"
    );
    assert!(
        state.contains("JobState=OUT_OF_MEMORY"),
        "the job took 400 MB and was not OOM-killed by its cgroup:\n{out}\n{state}"
    );
}

on_each_slurm! {
async fn on_cgroup_v2_a_job_is_confined_to_what_it_asked_for_by_the_rendered_cgroup_settings() {
    let started = Instant::now();
    let release = crate::support::slurm_release();
    let boot = guest::up();
    guest::assert_cgroup_v2();

    // The rendered files, with the test host's differences (controller on this host, its own
    // directories), the instance named for this run.
    let instance = format!("v2{}", &unique_suffix()[..5]);
    let set = "cg";
    let yaml = cluster_head("c", "confined")
        + &format!(
            "  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"2\", memory: 1Gi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
        );
    let c = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let conf = rendered_slurmd_conf(&r, set);
    assert!(
        conf.contains("CPUs=2") && conf.contains("RealMemory=1024"),
        "{conf}"
    );
    let cgroup = &r.slurm["cgroup.conf"];
    assert!(
        cgroup.contains("CgroupPlugin=autodetect"),
        "the rendered cgroup.conf lets Slurm pick the node's version:\n{cgroup}"
    );
    let files = confining_overlay(&c, &r, &instance, 6817);
    let slurm = guest::Slurm::start(release, &instance, &files, None).await;
    // slurmd as Debian's unit runs it (its cgroup subtree delegated: Slurm's cgroup/v2 plugin
    // makes the job and step cgroups under it).
    let node = format!("{set}-0");
    let dirs = slurm.dirs();
    guest::ok(&slurm.daemon(&format!(
        "--unit=slurmd-{instance} -p Delegate=yes -p KillMode=process /bin/sh -c '{dirs} && exec /usr/sbin/slurmd -D -Z -f /etc/slurm/slurm.conf -N {node} --conf \"{conf}\"'"
    )));
    slurm.wait_idle(&node, String::new).await;
    let (_, state) = slurm
        .job(
            &format!("-p all -w {node} -n1 -c1 --mem=100M -o /dev/null"),
            &confined_job("/mnt/job.out"),
        )
        .await;
    let out = guest::ok(&format!("cat {}/job.out", slurm.out));
    assert_confined(&out, &state);
    // The OOM kill was the job's own: slurmd lives on, the node IDLE.
    assert_eq!(
        guest::ok(&format!("systemctl is-active slurmd-{instance}")).trim(),
        "active"
    );
    let s = slurm
        .client(&format!("/usr/bin/sinfo -h -n {node} -o %T"), "")
        .unwrap_or_else(|e| e);
    assert_eq!(s.trim(), "idle", "{node} after the job");
    eprintln!(
        "cgroup v2 guest, Slurm {release}: booted in {boot} s; the test {:.1?}",
        started.elapsed()
    );
}
}
