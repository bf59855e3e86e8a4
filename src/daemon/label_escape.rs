//! Label values as `/metrics` writes them, shared by the daemon's own families (`metrics`) and
//! Slurm's (`slurm_metrics`).

/// A label value escaped as the exposition formats require: prometheus-client writes label
/// values as given (prometheus/client_rust#151), and a stray quote would make a whole scrape fail.
pub(super) fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
