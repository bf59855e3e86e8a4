//! slurmrestd's answer to `ping/`: each controller, whether it responds and its mode.

/// One answer of the ping endpoint.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Ping {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub pinged: String,
    #[serde(default)]
    pub responding: bool,
    #[serde(default)]
    pub mode: String,
}

#[derive(serde::Deserialize)]
pub(super) struct PingsWire {
    #[serde(default)]
    pub(super) pings: Vec<Ping>,
}
