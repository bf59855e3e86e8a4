//! The skeleton of a cluster: the same cluster.yaml with every free-form addition of the push
//! left out — pod template additions (env, containers, labels, annotations, pod fields), the
//! volumes and mounts cluster.yaml adds, the containers' security contexts, Slurm keys written
//! as free maps (`slurmConf`, `slurmdbdConf`, partition `options`) and config files. Rendered,
//! it is what slurmops itself makes of the typed settings: anything the full rendering holds
//! beyond it is the push's, and meets the closed policy.

use crate::cluster::ClusterFile;
use crate::cluster::types::PodSettings;

/// C without its free-form additions (see the module's doc).
pub fn skeleton(c: &ClusterFile) -> ClusterFile {
    let mut c = c.clone();
    c.metadata.annotations.clear();
    let s = &mut c.spec;
    bare(&mut s.controller.pod);
    s.controller.slurm_conf.clear();
    s.controller.config_files.clear();
    bare(&mut s.restapi.pod);
    bare(&mut s.accounting.pod);
    s.accounting.slurmdbd_conf.clear();
    for l in &mut s.login_sets {
        bare(&mut l.pod);
        l.service.annotations.clear();
        l.volumes.clear();
        l.volume_mounts.clear();
        l.container_security_context = None;
    }
    for n in &mut s.node_sets {
        bare(&mut n.pod);
        n.volumes.clear();
        n.volume_mounts.clear();
        n.volume_claim_templates.clear();
        n.container_security_context = None;
    }
    for p in &mut s.partitions {
        p.options.clear();
    }
    c
}

fn bare(p: &mut PodSettings) {
    p.pod_template = None;
}
