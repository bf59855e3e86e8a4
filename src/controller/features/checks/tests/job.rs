//! The check job itself: what it asks Slurm for (how its script judges its figure and reports
//! a failure is the probe's wrapper's, tested in `probe/tests.rs`).

use super::*;

#[test]
fn a_gpu_worker_s_check_job_asks_for_its_gpus_and_one_beside_users_jobs_for_none() {
    // Slurm gives a job no GPU it did not ask for, exclusive or not, and with ConstrainDevices
    // (the rendered cgroup.conf) the job could not open one: nvidia-smi would see none.
    let s = spec("{name: c, builtin: gpu, nodeSets: [gpu]}");
    let c = &s.policy.active_checks[0];
    let job = request(c, "j", vec!["gpu-0".into()], "all", 8);
    assert_eq!(job.body()["job"]["tres_per_node"], "gres/gpu:8");
    assert_eq!(job.body()["job"]["shared"], serde_json::json!(["none"]));
    assert!(
        request(c, "j", vec!["cpu-0".into()], "all", 0).body()["job"]["tres_per_node"].is_null()
    );
    let s = spec("{name: c, builtin: gpu, whileJobsRun: true, nodeSets: [gpu]}");
    let beside = request(
        &s.policy.active_checks[0],
        "j",
        vec!["gpu-0".into()],
        "all",
        8,
    );
    assert!(beside.body()["job"]["tres_per_node"].is_null());
}
