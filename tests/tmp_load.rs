#[test]
fn t() {
    let text = std::fs::read_to_string("examples/repo/cluster.yaml").unwrap();
    let c = slurmops::spec::load("x", &text).unwrap();
    let r = slurmops::render::render(&c);
    for (k, v) in &r.slurm { println!("=== {k}\n{v}"); }
    for o in &r.objects { println!("--- {}", o.id()); }
    let sts = r.get("StatefulSet", "h100").unwrap();
    println!("{}", serde_saphyr::to_string(&sts.body).unwrap());
}
