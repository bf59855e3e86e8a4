//! Small value types of cluster.yaml that have their own syntax: durations (`90s`, `2h30m`),
//! counts-or-percentages (`1`, `25%`), Slurm config values and Kubernetes quantities.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A duration written as `90s`, `10m`, `2h30m`, `1d`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(u64);

impl Duration {
    pub const fn from_secs(s: u64) -> Self {
        Duration(s)
    }
    pub fn as_secs(self) -> u64 {
        self.0
    }

    /// Parses `1d2h3m4s`-style text; every part is optional but at least one is needed.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("invalid duration {text:?}: write it like 90s, 10m, 2h30m or 1d");
        let mut total: u64 = 0;
        let mut digits = String::new();
        let mut any = false;
        for c in text.trim().chars() {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            let unit = match c {
                'd' => 86_400,
                'h' => 3_600,
                'm' => 60,
                's' => 1,
                _ => return Err(bad()),
            };
            let n: u64 = digits.parse().map_err(|_| bad())?;
            total = n
                .checked_mul(unit)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(bad)?;
            digits.clear();
            any = true;
        }
        if !digits.is_empty() || !any {
            return Err(bad());
        }
        Ok(Duration(total))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = self.0;
        if s == 0 {
            return f.write_str("0s");
        }
        for (unit, name) in [(86_400, 'd'), (3_600, 'h'), (60, 'm'), (1, 's')] {
            if s >= unit {
                write!(f, "{}{}", s / unit, name)?;
                s %= unit;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Duration::parse(&text).map_err(de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^([0-9]+[dhms])+$",
            "description": "A duration such as 90s, 10m, 2h30m or 1d."
        })
    }
}

/// A count or a percentage of replicas, as Kubernetes' maxUnavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    /// Resolves against a replica count the way Kubernetes does for maxUnavailable: percentages
    /// round down, but never below one so that a rollout can always progress.
    pub fn resolve(self, replicas: u32) -> u32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => (replicas.saturating_mul(p) / 100).max(1),
        }
    }

    pub fn is_zero(self) -> bool {
        matches!(self, IntOrPercent::Int(0) | IntOrPercent::Percent(0))
    }

    fn parse_percent(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "invalid value {text:?}: write a whole number such as 1, or a percentage such as 25%"
            )
        };
        let num = text.strip_suffix('%').ok_or_else(bad)?;
        let p: u32 = num.trim().parse().map_err(|_| bad())?;
        if p > 100 {
            return Err(format!("{text:?} is more than 100%"));
        }
        Ok(IntOrPercent::Percent(p))
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => s.serialize_u32(*n),
            IntOrPercent::Percent(_) => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number or a percentage such as 25%")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                u32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                u32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom("must not be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                IntOrPercent::parse_percent(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for IntOrPercent {
    fn schema_name() -> Cow<'static, str> {
        "IntOrPercent".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^[0-9]+%$"}
            ],
            "description": "A whole number, or a percentage such as 25%."
        })
    }
}

/// A value in slurm.conf / slurmdbd.conf: a word, a number, a switch, or a list (joined by `,`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SlurmValue {
    Bool(bool),
    Int(i64),
    Text(String),
    List(Vec<String>),
}

impl SlurmValue {
    /// The items of a list-valued parameter (`a,b` and `[a, b]` alike).
    pub fn items(&self) -> Vec<String> {
        match self {
            SlurmValue::List(v) => v.clone(),
            other => other
                .render()
                .split(',')
                .map(str::to_string)
                .filter(|s| !s.is_empty())
                .collect(),
        }
    }

    /// The text written after `Key=`.
    pub fn render(&self) -> String {
        match self {
            SlurmValue::Bool(true) => "YES".into(),
            SlurmValue::Bool(false) => "NO".into(),
            SlurmValue::Int(n) => n.to_string(),
            SlurmValue::Text(s) => s.clone(),
            SlurmValue::List(v) => v.join(","),
        }
    }
}

impl JsonSchema for SlurmValue {
    fn schema_name() -> Cow<'static, str> {
        "SlurmValue".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                {"type": "string"},
                {"type": "integer"},
                {"type": "boolean"},
                {"type": "array", "items": {"type": "string"}}
            ],
            "description": "A slurm.conf value; a list is joined with commas."
        })
    }
}

/// Parses a Kubernetes quantity (`1500Gi`, `64G`, `500m`, `2`) into its value in base units
/// (bytes, or cores), as f64. Returns None for text that is not a quantity.
pub fn parse_quantity(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then_some(n * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_canonically() {
        assert_eq!(Duration::parse("2h30m").unwrap().as_secs(), 9000);
        assert_eq!(Duration::parse("1d").unwrap().to_string(), "1d");
        assert_eq!(Duration::parse("90s").unwrap().to_string(), "1m30s");
        for bad in ["", "10", "5x", "h", "99999999999999999999d"] {
            assert!(Duration::parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn percent_resolves_like_kubernetes_but_never_to_zero() {
        assert_eq!(IntOrPercent::Percent(25).resolve(8), 2);
        assert_eq!(IntOrPercent::Percent(10).resolve(4), 1);
        assert_eq!(IntOrPercent::Int(3).resolve(8), 3);
        assert!(IntOrPercent::parse_percent("150%").is_err());
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("2Gi"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("96"), Some(96.0));
        assert_eq!(parse_quantity("lots"), None);
        assert_eq!(parse_quantity("5Xi"), None);
    }
}

/// A NodeSet's size: a fixed count, or `perNode` (one worker on each Kubernetes node its pod
/// settings match, following the nodes as they come and go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    Count(u32),
    PerNode,
}

/// The most workers a perNode NodeSet may have (its Slurm node range, `NAME-[0-1023]`): a node
/// beyond is left without a worker, and said so.
pub const PER_NODE_LIMIT: u32 = 1024;

/// The word for one worker per matching Kubernetes node.
pub const PER_NODE: &str = "perNode";

impl Replicas {
    /// The fixed count; a perNode NodeSet has none before the nodes are known (0).
    pub fn count(self) -> u32 {
        match self {
            Replicas::Count(n) => n,
            Replicas::PerNode => 0,
        }
    }

    pub fn per_node(self) -> bool {
        self == Replicas::PerNode
    }
}

impl fmt::Display for Replicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Replicas::Count(n) => write!(f, "{n}"),
            Replicas::PerNode => f.write_str(PER_NODE),
        }
    }
}

impl Serialize for Replicas {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Replicas::Count(n) => s.serialize_u32(*n),
            Replicas::PerNode => s.serialize_str(PER_NODE),
        }
    }
}

impl<'de> Deserialize<'de> for Replicas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Replicas;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number, or perNode")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Replicas, E> {
                u32::try_from(v)
                    .map(Replicas::Count)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Replicas, E> {
                u32::try_from(v)
                    .map(Replicas::Count)
                    .map_err(|_| E::custom("must not be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Replicas, E> {
                match v {
                    PER_NODE => Ok(Replicas::PerNode),
                    _ => Err(E::custom(format!(
                        "invalid value {v:?}: write a whole number, or perNode for one worker per matching Kubernetes node"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Replicas {
    fn schema_name() -> Cow<'static, str> {
        "Replicas".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                {"type": "integer", "format": "uint32", "minimum": 0},
                {"type": "string", "enum": [PER_NODE]}
            ],
            "description": "Workers: a whole number, or perNode for one worker on each Kubernetes node the NodeSet's nodeSelector, affinity and tolerations match."
        })
    }
}
