#[test]
fn t() {
    for f in ["examples/repo/cluster.yaml", "examples/minimal/cluster.yaml"] {
        let text = std::fs::read_to_string(f).unwrap();
        match slurmops::spec::load(f, &text) { Ok(c) => println!("OK {}", c.metadata.name), Err(e) => for d in e { println!("{d}") } }
    }
    let bad = "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {name: Bad_Name, namespace: x}\nspec:\n  slurmVersion: 24.11\n  auth:\n    slurmKey: c2VjcmV0\n    jwtKey: {name: a, key: b, value: x}\n  nodeSets:\n    - name: a\n      replcas: 3\n      update: {maxUnavailable: 0}\n  partitions:\n    - {name: p, nodeSets: [b]}\n";
    match slurmops::spec::load("bad.yaml", bad) { Ok(_) => println!("ok?"), Err(e) => for d in e { println!("{d}") } }
}
