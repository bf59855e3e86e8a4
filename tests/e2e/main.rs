//! The bed suite: every test that needs the test bed (tests/bed/: real kube-apiserver and
//! controller-manager, Slurm 24.11, 25.11 and 26.05 from their chroots, MariaDB, git servers on
//! loopback). Needs root; `bash tests/run-all.sh` prepares the bed and runs it. One binary, so
//! libgit2, rustls and kube are linked once.

#[macro_use]
mod support;

mod accounting;
mod apply;
mod autoscale;
mod backpressure;
mod backup;
mod backup_schedule;
mod bed;
mod campaign;
mod campaign_canary;
mod campaign_controllers;
mod campaign_upgrade;
mod canary;
mod cgroup_v2;
mod cgroup_v2_pod;
mod checks;
mod confinement;
mod controller;
mod daemon;
mod deployed;
mod gpu_devices;
mod ha;
mod import;
mod login;
mod one_address;
mod one_entrance;
mod per_node;
mod prometheus;
mod real_slurm;
mod release_images;
mod remediation;
mod requeue;
mod rollout;
mod scale;
mod slurm_client;
mod slurm_reads;
mod sync;
mod topology;
mod trust;
mod upgrade;
mod view;
mod window;
