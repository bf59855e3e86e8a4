//! The worker pod as rendered, on a node of the unified cgroup v2 hierarchy (issue 78), for each
//! release: in the bed's guest (support::guest), containerd and runc (Debian trixie's, runc with
//! the systemd cgroup driver, as a kubelet with `--cgroup-driver=systemd` has them) start the
//! release's worker image — the image the real node runs, imported from the bed's archive — with
//! the rendered pod's command and arguments, environment, privileges, volume (the projected
//! slurm.key), resource limits and a cgroup namespace of its own, as containerd's CRI plugin
//! translates a pod (support::oci, which refuses a rendered field it does not translate); the
//! pod's /etc/hosts, as a kubelet writes it, names the controller's Service. slurmd in it
//! registers, configless, with the release's slurmctld (the bed's chroot, its slurm user given
//! the image's uid 401) and is IDLE with the pod's limits, not the guest's: 1 CPU and 1024 MB of
//! the guest's 2 and 2 GB, the pod's scope in the guest holding `cpu.max` 1 CPU and `memory.max`
//! 1 GiB. Then, with the rendered cgroup.conf and gres.conf (`File=/dev/nvidia[0-1]`, stand-in
//! GPU devices made as the NVIDIA driver makes them, major 195, no driver behind them):
//! `confinement.rs`'s job is confined to its one CPU and 100 MB and ends OUT_OF_MEMORY, the pod
//! and its slurmd living on; a job given one GPU opens it (ENXIO: let through, no driver) and is
//! denied the other (EPERM: Slurm's device program on the job's cgroup, ConstrainDevices).
//!
//! Not here: the guest's own kubelet joined to the bed's apiserver (docs/tests.md says why).

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;
use slurmops::cluster::load;
use slurmops::render::render;

use crate::cgroup_v2::{assert_confined, confined_job};
use crate::support::oci::{Device, Pod, runtime_spec};
use crate::support::slurm::confining_overlay;
use crate::support::{cluster_head, guest, unique_suffix};

/// The image archives the bed builds (tests/bed/images.sh), as the guest sees the host's cache.
fn image_archive(release: &str) -> String {
    let out = std::process::Command::new("bash")
        .arg("tests/bed/images.sh")
        .output()
        .expect("run tests/bed/images.sh");
    assert!(out.status.success(), "the bed's images");
    let cache = std::env::var("SLURMOPS_CACHE").unwrap_or("/var/cache/slurmops".into());
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.ends_with(&format!("/slurm-{release}.oci.tar")))
        .unwrap_or_else(|| panic!("no image archive of Slurm {release}"))
        .to_string();
    let rel = path
        .strip_prefix(&format!("{}/", cache.trim_end_matches('/')))
        .unwrap_or_else(|| panic!("{path} is not under {cache}"));
    format!("/mnt/cache/{rel}")
}

/// The guest's character devices in /dev (a privileged container gets them all).
fn guest_devices() -> Vec<Device> {
    guest::ok("for d in /dev/*; do [ -c \"$d\" ] && stat -c '%n %t %T' \"$d\"; done; true")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (path, major, minor) = (w.next()?, w.next()?, w.next()?);
            Some(Device {
                path: path.to_string(),
                kind: 'c',
                major: i64::from_str_radix(major, 16).ok()?,
                minor: i64::from_str_radix(minor, 16).ok()?,
            })
        })
        .filter(|d| !d.path.starts_with("/dev/tty") && d.path != "/dev/console")
        .collect()
}

/// What a job saw of /dev/nvidia0 and /dev/nvidia1, written to OUT: `DEV allowed` (ENXIO: the
/// device cgroup let it through, no driver answered) or `DEV denied` (EPERM).
fn see_devices(out: &str) -> String {
    format!(
        r#"#!/bin/bash
for d in /dev/nvidia0 /dev/nvidia1; do
  if err=$( (: < "$d") 2>&1 ); then echo "$d opened"
  else case "$err" in
    *"No such device or address"*) echo "$d allowed";;
    *"Operation not permitted"*) echo "$d denied";;
    *) echo "$d other: $err";;
  esac; fi
done > {out}
"#
    )
}

/// The pod's container in the guest's containerd, stopped and removed when dropped.
struct Container {
    id: String,
    dir: String,
}

impl Container {
    /// CMD run in the container (`ctr task exec`): its output.
    fn exec(&self, cmd: &str) -> Result<String, String> {
        let id = &self.id;
        guest::run(
            &format!("ctr -n k8s.io task exec --exec-id x$RANDOM {id} /bin/sh -c '{cmd}'"),
            b"",
        )
    }

    fn log(&self) -> String {
        guest::run(&format!("tail -30 {}/log", self.dir), b"").unwrap_or_else(|e| e)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let (id, dir) = (&self.id, &self.dir);
        let _ = guest::run(
            &format!(
                "ctr -n k8s.io task kill -s KILL {id}; sleep 1; ctr -n k8s.io task rm -f {id}; \
                 ctr -n k8s.io containers rm {id}; ctr -n k8s.io images unmount --rm {dir}/rootfs; rm -rf {dir}"
            ),
            b"",
        );
    }
}

on_each_slurm! {
async fn on_cgroup_v2_the_rendered_worker_pod_run_by_containerd_registers_its_limits_and_confines_jobs_and_gpus() {
    let started = Instant::now();
    let release = crate::support::slurm_release();
    let boot = guest::up();
    guest::assert_cgroup_v2();

    let instance = format!("v2{}", &unique_suffix()[..5]);
    let set = "gp";
    let yaml = cluster_head("c", "pod")
        + &format!(
            "  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"1\", memory: 1Gi, gpus: {{count: 2, type: h100, autodetect: files}}}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
        );
    let c = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let sts = &r
        .get("StatefulSet", set)
        .expect("a StatefulSet per NodeSet")
        .body;
    let template = &sts["spec"]["template"];
    let image = template
        .pointer("/spec/containers/0/image")
        .and_then(|i| i.as_str())
        .expect("the worker's image")
        .to_string();
    // The controller's address in the worker's arguments: a Service name the pod's /etc/hosts
    // resolves here.
    let args: Vec<String> = serde_json::from_value(template["spec"]["containers"][0]["args"].clone()).unwrap();
    let conf_server = args[args.iter().position(|a| a == "--conf-server").expect("--conf-server") + 1].clone();
    let ctld_host = conf_server.rsplit_once(':').map_or(conf_server.as_str(), |(h, _)| h).to_string();
    assert!(conf_server.ends_with(":6817"), "{conf_server}");

    // slurmctld: the rendered slurm.conf with the test host's differences, the rendered
    // cgroup.conf and gres.conf as they are (served to slurmd configless); the slurmd
    // pid file where the rendered slurm.conf puts it (the image's layout).
    let mut files = confining_overlay(&c, &r, &instance, 6817);
    files.insert("gres.conf".into(), r.slurm["gres.conf"].clone());
    assert!(files["gres.conf"].contains(" File=/dev/nvidia[0-1]"), "{}", files["gres.conf"]);
    let rendered_pid = r.slurm["slurm.conf"]
        .lines()
        .find(|l| l.starts_with("SlurmdPidFile="))
        .expect("SlurmdPidFile")
        .to_string();
    let conf = files["slurm.conf"]
        .lines()
        .map(|l| if l.starts_with("SlurmdPidFile=") { rendered_pid.as_str() } else { l })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    files.insert("slurm.conf".into(), conf);
    let slurm = guest::Slurm::start(release, &instance, &files, Some(401)).await;

    // containerd with its images; the stand-in GPUs.
    guest::ok(
        "systemctl start containerd && for i in $(seq 1 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done; \
         for i in 0 1 2; do [ -e /dev/nvidia$i ] || mknod -m 666 /dev/nvidia$i c 195 $i; done; \
         [ -e /dev/nvidiactl ] || mknod -m 666 /dev/nvidiactl c 195 255",
    );
    let archive = image_archive(release);
    let imported = Instant::now();
    guest::ok(&format!(
        "ctr -n k8s.io images ls -q | grep -qxF '{image}' || ctr -n k8s.io images import {archive} >/dev/null"
    ));
    let imported = imported.elapsed();

    // The pod: its volume's files, its /etc/hosts, its runtime spec.
    let pod_name = format!("{set}-0");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let uid = format!("c0de0078-0000-4000-8000-{:012x}", nanos & 0xffff_ffff_ffff);
    let dir = format!("/run/slurmops-pods/{instance}");
    let key_hex = guest::ok(&format!("od -An -tx1 -v {}/slurm.key", slurm.etc));
    let key: Vec<u8> = key_hex
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    let sources = BTreeMap::from([("slurm-auth".to_string(), BTreeMap::from([("slurm.key".to_string(), key)]))]);
    let pod = Pod {
        spec: &template["spec"],
        name: &pod_name,
        namespace: "pod",
        uid: &uid,
        volumes_dir: &format!("{dir}/volumes"),
        sources: &sources,
    };
    let container = Container { id: format!("{instance}-{pod_name}"), dir: dir.clone() };
    let (mut spec, volume_files) = runtime_spec(&pod, "slurmd", &container.id, &format!("{dir}/rootfs"), &[], &guest_devices())
        .unwrap_or_else(|e| panic!("the rendered worker pod: {e}"));
    for f in &volume_files {
        guest::run(
            &format!("install -D -m {:o} /dev/stdin {dir}/volumes/{}", f.mode, f.path),
            &f.content,
        )
        .unwrap_or_else(|e| panic!("the pod's volume file {}: {e}", f.path));
    }
    // The kubelet's /etc/hosts for the pod: its own name, and (here) the controller's Service.
    let hosts = format!("127.0.0.1 localhost\n127.0.0.1 {ctld_host}\n127.0.1.1 {pod_name}\n");
    guest::run(&format!("install -D -m 644 /dev/stdin {dir}/etc-hosts"), hosts.as_bytes()).unwrap();
    spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/etc/hosts", "type": "bind", "source": format!("{dir}/etc-hosts"), "options": ["rbind", "rprivate", "ro"]}));
    guest::run(&format!("cat > {dir}/config.json"), serde_json::to_string_pretty(&spec).unwrap().as_bytes()).unwrap();
    let id = &container.id;
    let cgroup = spec["linux"]["cgroupsPath"].as_str().unwrap().to_string();
    let start = Instant::now();
    guest::ok(&format!(
        "mkdir -p {dir}/rootfs && ctr -n k8s.io images mount --rw '{image}' {dir}/rootfs >/dev/null && \
         ctr -n k8s.io run -d --log-uri file://{dir}/log --runc-systemd-cgroup --cgroup {cgroup} --config {dir}/config.json {id}"
    ));
    slurm.wait_idle(&pod_name, || container.log()).await;
    let registered = start.elapsed();

    // The node is the pod's limits, not the guest's.
    let node = slurm
        .client(&format!("/usr/bin/scontrol -o show node {pod_name}"), "")
        .unwrap_or_else(|e| e);
    for want in ["CPUTot=1 ", "RealMemory=1024 ", "Gres=gpu:h100:2"] {
        assert!(node.contains(want), "the node registered without {want}: {node}");
    }
    let guest_cpus: u32 = guest::ok("nproc").trim().parse().unwrap();
    assert!(guest_cpus > 1, "the guest has {guest_cpus} CPUs");
    // The container's cgroup, seen from the guest: the pod's slice, its scope.
    let path = guest::ok(&format!(
        "pid=$(ctr -n k8s.io task ls | awk '$1==\"{id}\" {{print $2}}') && sed -n 's/^0:://p' /proc/$pid/cgroup"
    ));
    let scope_of_pod = format!(
        "/kubepods-pod{}.slice/cri-containerd-{id}.scope",
        uid.replace('-', "_")
    );
    let path = path
        .trim()
        .split_once(&scope_of_pod)
        .map(|(slices, _)| format!("{slices}{scope_of_pod}"))
        .unwrap_or_else(|| panic!("the container's cgroup is not its pod's scope: {path}"));
    let scope = format!("/sys/fs/cgroup{path}");
    let limits = guest::ok(&format!("cat {scope}/cpu.max {scope}/memory.max"));
    assert_eq!(limits, "100000 100000\n1073741824\n", "the pod's scope {scope}");
    // slurmd sees its own cgroup namespace: its cgroup is the root, in a child it made.
    let own = container.exec("cat /proc/1/cgroup").unwrap_or_else(|e| e);
    assert!(own.trim().starts_with("0::/"), "{own}");

    // Confinement, in the pod's cgroup namespace.
    let (_, state) = slurm
        .job(&format!("-p all -w {pod_name} -n1 -c1 --mem=100M -o /dev/null"), &confined_job("/tmp/confined.out"))
        .await;
    let out = container.exec("cat /tmp/confined.out").unwrap_or_else(|e| e);
    assert_confined(&out, &state);
    // A job given one GPU of the two: that one is let through, the other denied.
    let (_, state) = slurm
        .job(&format!("-p all -w {pod_name} -n1 -c1 --mem=50M --gres=gpu:1 -o /dev/null"), &see_devices("/tmp/devices.out"))
        .await;
    let seen = container.exec("cat /tmp/devices.out").unwrap_or_else(|e| e);
    let allowed = seen.lines().filter(|l| l.ends_with(" allowed")).count();
    let denied = seen.lines().filter(|l| l.ends_with(" denied")).count();
    assert_eq!((allowed, denied), (1, 1), "a one-GPU job in the pod:\n{seen}\n{state}\n{}", container.log());
    // Both OOM kill and denial were the job's own: the pod's slurmd lives on, the node IDLE.
    let s = slurm
        .client(&format!("/usr/bin/sinfo -h -n {pod_name} -o %T"), "")
        .unwrap_or_else(|e| e);
    assert_eq!(s.trim(), "idle", "{pod_name} after the jobs\n{}", container.log());
    eprintln!(
        "cgroup v2 guest, Slurm {release} worker pod: booted in {boot} s; image import {imported:.1?}, container start to IDLE {registered:.1?}; the test {:.1?}",
        started.elapsed()
    );
    drop(container);
}
}
