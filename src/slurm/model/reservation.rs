//! A maintenance reservation: the one slurmops asks for ahead of a window, and one as read.

/// A maintenance reservation slurmops makes ahead of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRequest {
    pub name: String,
    pub nodes: Vec<String>,
    pub start: i64,
    pub end: i64,
}

impl ReservationRequest {
    /// `MAINT`: the nodes show as in maintenance; `IGNORE_JOBS`: made even while jobs run there
    /// (they may end before the window). Slurm starts no job there that would run into it.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "node_list": self.nodes,
            "start_time": {"set": true, "infinite": false, "number": self.start},
            "end_time": {"set": true, "infinite": false, "number": self.end},
            "flags": ["MAINT", "IGNORE_JOBS"],
            "users": ["root"],
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub name: String,
    pub nodes: Vec<String>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub flags: Vec<String>,
}
