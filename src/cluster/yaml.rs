//! A YAML tree that remembers where every node came from, so that every error can say
//! `file:line:col`. Built from saphyr-parser's event stream (a maintained, panic-free YAML 1.2
//! parser) with hard limits, so that no input can hang or exhaust memory: size, nesting depth,
//! and nodes and scalar bytes after alias expansion (which defeats "billion laughs" alias bombs,
//! by count or by length). Every step is linear in the input: duplicate keys are found through a
//! hash set, and an alias costs what it expands to, counted once per anchor.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::diag::{Path, PathSeg};

/// Largest cluster.yaml accepted, in bytes.
pub const MAX_BYTES: usize = 4 << 20;
/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 64;
/// Most nodes accepted, counting every alias expansion.
pub const MAX_NODES: usize = 500_000;
/// Most scalar bytes accepted, counting every alias expansion (4 times the largest file).
pub const MAX_EXPANDED_BYTES: usize = 4 * MAX_BYTES;

/// Line (1-based) and column (1-based) of a node. Four bytes each: a tree of a 4 MiB file
/// holds hundreds of thousands of them (a line past 2^32 cannot be in such a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos::at(span.start.line(), span.start.col() + 1)
    }

    fn at(line: usize, col: usize) -> Pos {
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        }
    }

    /// The line, at least 1 (for diagnostics).
    pub fn line(&self) -> usize {
        self.line.max(1) as usize
    }

    /// The column, at least 1.
    pub fn col(&self) -> usize {
        self.col.max(1) as usize
    }
}

/// A node's value, laid out small (24 bytes): a validation keeps the tree of the whole file for
/// its positions, and the largest accepted file makes hundreds of thousands of nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar with its text; `plain` is false when it was quoted or a block scalar, which makes
    /// it a string whatever it looks like.
    Scalar {
        text: Box<str>,
        plain: bool,
    },
    Seq(Box<[Node]>),
    /// Keys in document order.
    Map(Box<[(Key, Node)]>),
}

/// A mapping key. Its text is shared by every key of the same text in the document (a list of
/// 50,000 users spells `name:` 50,000 times, kept once).
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub text: std::sync::Arc<str>,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
}

impl Node {
    /// True for an empty plain scalar, `~` or `null`.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if matches!(&**text, "" | "~" | "null" | "Null" | "NULL"))
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| &*k.text == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Position of the node at `path`, or of its deepest existing ancestor.
    pub fn locate(&self, path: &Path) -> Pos {
        let mut node = self;
        for seg in path.segments() {
            let next = match (seg, &node.value) {
                (PathSeg::Key(k), Value::Map(_)) => node.get(k),
                (PathSeg::Index(i), Value::Seq(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node.pos
    }

    /// Position of the key `key` in the mapping at `path` (for "unknown field" errors).
    pub fn key_pos(&self, key: &str) -> Option<Pos> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| &*k.text == key)
                .map(|(k, _)| k.pos),
            _ => None,
        }
    }
}

/// Why a document could not be read as YAML.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

impl YamlError {
    fn at(pos: Pos, message: impl Into<String>) -> Self {
        YamlError {
            pos,
            message: message.into(),
        }
    }
}

/// Parses exactly one YAML document.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    if text.len() > MAX_BYTES {
        return Err(YamlError::at(
            Pos::at(1, 1),
            format!(
                "file is {} bytes; cluster.yaml may be at most {MAX_BYTES} bytes",
                text.len()
            ),
        ));
    }
    let mut b = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        cost: Cost::default(),
        keys: std::collections::HashSet::new(),
    };
    b.document()
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    /// Anchored nodes with what each costs when aliased.
    anchors: HashMap<usize, (Node, Cost)>,
    cost: Cost,
    /// Every key text met, once.
    keys: std::collections::HashSet<std::sync::Arc<str>>,
}

/// What a tree costs: its nodes and the bytes of its scalars (keys included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cost {
    nodes: usize,
    bytes: usize,
}

impl std::ops::Sub for Cost {
    type Output = Cost;
    fn sub(self, o: Cost) -> Cost {
        Cost {
            nodes: self.nodes - o.nodes,
            bytes: self.bytes - o.bytes,
        }
    }
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok(ev)) => Ok(ev),
            Some(Err(e)) => {
                let m = e.marker();
                Err(YamlError::at(
                    Pos::at(m.line(), m.col() + 1),
                    e.info().to_string(),
                ))
            }
            None => Err(YamlError::at(Pos::default(), "unexpected end of input")),
        }
    }

    fn document(&mut self) -> Result<Node, YamlError> {
        let mut root = None;
        loop {
            let (ev, span) = self.next()?;
            match ev {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => break,
                Event::DocumentStart(_) if root.is_some() => {
                    return Err(YamlError::at(
                        Pos::of(&span),
                        "a second YAML document: cluster.yaml must hold exactly one SlurmCluster",
                    ));
                }
                Event::DocumentStart(_) => root = Some(self.node(0)?),
                _ => return Err(YamlError::at(Pos::of(&span), "unexpected YAML event")),
            }
        }
        root.ok_or_else(|| YamlError::at(Pos::at(1, 1), "the file is empty"))
    }

    /// Charges C to the document; an error once a limit is passed.
    /// Charges the bytes of a scalar's TEXT.
    fn charge_bytes(&mut self, text: &str, pos: Pos) -> Result<(), YamlError> {
        let c = Cost {
            nodes: 0,
            bytes: text.len(),
        };
        self.charge(c, pos)
    }

    fn charge(&mut self, c: Cost, pos: Pos) -> Result<(), YamlError> {
        self.cost.nodes = self.cost.nodes.saturating_add(c.nodes);
        self.cost.bytes = self.cost.bytes.saturating_add(c.bytes);
        if self.cost.nodes > MAX_NODES {
            return Err(YamlError::at(
                pos,
                format!("more than {MAX_NODES} YAML nodes (alias expansion included)"),
            ));
        }
        if self.cost.bytes > MAX_EXPANDED_BYTES {
            return Err(YamlError::at(
                pos,
                format!(
                    "more than {MAX_EXPANDED_BYTES} bytes of text (alias expansion included): aliases repeat their anchor's text"
                ),
            ));
        }
        Ok(())
    }

    /// The next event, for a node at DEPTH (refused past [`MAX_DEPTH`]), and where it stands.
    fn enter(&mut self, depth: usize) -> Result<(Event<'a>, Pos), YamlError> {
        let (ev, span) = self.next()?;
        let pos = Pos::of(&span);
        if depth > MAX_DEPTH {
            return Err(YamlError::at(
                pos,
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok((ev, pos))
    }

    fn node(&mut self, depth: usize) -> Result<Node, YamlError> {
        let (ev, pos) = self.enter(depth)?;
        let before = self.cost;
        self.charge(Cost { nodes: 1, bytes: 0 }, pos)?;
        let (node, anchor) = match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = matches!(style, ScalarStyle::Plain);
                self.charge_bytes(&text, pos)?;
                (
                    Node {
                        value: Value::Scalar {
                            // A copy of exactly its length: the parser's own string has room
                            // for 32 bytes, and shrinking it in place keeps most of that.
                            text: Box::from(&*text),
                            plain,
                        },
                        pos,
                    },
                    anchor,
                )
            }
            Event::Alias(id) => {
                let cost = self
                    .anchors
                    .get(&id)
                    .map(|(_, c)| *c)
                    .ok_or_else(|| YamlError::at(pos, "alias to an unknown anchor"))?;
                // Charged before the copy is made.
                self.charge(cost, pos)?;
                let target = self.anchors.get(&id).map(|(n, _)| n.clone());
                let target =
                    target.ok_or_else(|| YamlError::at(pos, "alias to an unknown anchor"))?;
                return Ok(Node { pos, ..target });
            }
            Event::SequenceStart(anchor, _) => (self.sequence(pos, depth)?, anchor),
            Event::MappingStart(anchor, _) => (self.mapping(pos, depth)?, anchor),
            _ => return Err(YamlError::at(pos, "unexpected YAML event")),
        };
        if anchor != 0 {
            // The copy kept for aliases costs memory too: charged like an alias.
            let cost = self.cost - before;
            self.charge(cost, pos)?;
            self.anchors.insert(anchor, (node.clone(), cost));
        }
        Ok(node)
    }

    /// TEXT as a key, shared with every earlier key of the same text.
    fn key(&mut self, text: &str) -> std::sync::Arc<str> {
        if let Some(k) = self.keys.get(text) {
            return k.clone();
        }
        let k: std::sync::Arc<str> = text.into();
        self.keys.insert(k.clone());
        k
    }

    /// A mapping's key at DEPTH. A plain key (no anchor) is read straight from the parser's
    /// event into the shared text, charged as `node` charges a scalar: no copy of its own first.
    fn key_node(&mut self, depth: usize) -> Result<Key, YamlError> {
        if !matches!(self.parser.peek(), Some(Ok((Event::Scalar(_, _, 0, _), _)))) {
            let key_node = self.node(depth)?;
            return match key_node.value {
                Value::Scalar { text, .. } => Ok(Key {
                    text: self.key(&text),
                    pos: key_node.pos,
                }),
                _ => Err(YamlError::at(
                    key_node.pos,
                    "mapping keys must be plain words, not lists or maps",
                )),
            };
        }
        let (ev, pos) = self.enter(depth)?;
        self.charge(Cost { nodes: 1, bytes: 0 }, pos)?;
        let Event::Scalar(text, ..) = ev else {
            return Err(YamlError::at(pos, "unexpected YAML event"));
        };
        self.charge_bytes(&text, pos)?;
        Ok(Key {
            text: self.key(&text),
            pos,
        })
    }

    fn sequence(&mut self, pos: Pos, depth: usize) -> Result<Node, YamlError> {
        let mut items = Vec::new();
        loop {
            if matches!(self.parser.peek(), Some(Ok((Event::SequenceEnd, _)))) {
                self.next()?;
                // Without the spare capacity growth leaves (a list of one item holds room
                // for four): the tree lives as long as the validation does.
                return Ok(Node {
                    value: Value::Seq(items.into_boxed_slice()),
                    pos,
                });
            }
            items.push(self.node(depth + 1)?);
        }
    }

    fn mapping(&mut self, pos: Pos, depth: usize) -> Result<Node, YamlError> {
        let mut entries = Entries::default();
        let mut merged: Vec<(Key, Node)> = Vec::new();
        loop {
            if matches!(self.parser.peek(), Some(Ok((Event::MappingEnd, _)))) {
                self.next()?;
                break;
            }
            let key = self.key_node(depth + 1)?;
            let value = self.node(depth + 1)?;
            if &*key.text == "<<" {
                merged.extend(merge_source(value)?);
                continue;
            }
            if let Some(first) = entries.first(&key.text) {
                return Err(YamlError::at(
                    key.pos,
                    format!(
                        "duplicate key {:?} (first at line {})",
                        key.text, first.line
                    ),
                ));
            }
            entries.push(key, value);
        }
        for (k, v) in merged {
            if entries.first(&k.text).is_none() {
                entries.push(k, v);
            }
        }
        let entries = entries.list;
        Ok(Node {
            value: Value::Map(entries.into_boxed_slice()),
            pos,
        })
    }
}

/// A mapping's entries as they are read, with where each key first stands. A few keys (nearly
/// every mapping) are searched in place; past `INDEXED` a hash index keeps a mapping of any size
/// linear to read.
#[derive(Default)]
struct Entries {
    list: Vec<(Key, Node)>,
    index: Option<HashMap<std::sync::Arc<str>, Pos>>,
}

impl Entries {
    const INDEXED: usize = 16;

    /// Where the key TEXT stands, if it is there.
    fn first(&self, text: &str) -> Option<Pos> {
        match &self.index {
            Some(index) => index.get(text).copied(),
            None => self
                .list
                .iter()
                .find(|(k, _)| &*k.text == text)
                .map(|(k, _)| k.pos),
        }
    }

    /// Adds an entry whose key is not there yet.
    fn push(&mut self, key: Key, value: Node) {
        match &mut self.index {
            Some(index) => {
                index.insert(key.text.clone(), key.pos);
            }
            None if self.list.len() + 1 >= Self::INDEXED => {
                self.index = Some(
                    self.list
                        .iter()
                        .map(|(k, _)| k)
                        .chain([&key])
                        .map(|k| (k.text.clone(), k.pos))
                        .collect(),
                );
            }
            None => {}
        }
        self.list.push((key, value));
    }
}

/// The entries a `<<: *anchor` (or `<<: [*a, *b]`) merge key brings in.
fn merge_source(value: Node) -> Result<Vec<(Key, Node)>, YamlError> {
    match value.value {
        Value::Map(entries) => Ok(entries.into_vec()),
        Value::Seq(items) => {
            let mut out = Vec::new();
            for item in items.into_vec() {
                out.extend(merge_source(item)?);
            }
            Ok(out)
        }
        Value::Scalar { .. } => Err(YamlError::at(
            value.pos,
            "the merge key `<<` takes a mapping or a list of mappings",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let n = parse("a:\n  b: 1\n  c: [x, 'y']\n").unwrap();
        let b = n.get("a").unwrap().get("b").unwrap();
        assert_eq!(b.pos, Pos { line: 2, col: 6 });
        assert_eq!(
            n.get("a").unwrap().key_pos("c"),
            Some(Pos { line: 3, col: 3 })
        );
    }

    #[test]
    fn alias_bomb_is_refused_quickly() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            doc.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        let err = parse(&doc).unwrap_err();
        assert!(err.message.contains("alias expansion"), "{err:?}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let doc = "[".repeat(10_000) + &"]".repeat(10_000);
        let err = parse(&doc).unwrap_err();
        assert!(
            err.message.contains("nesting") || err.message.contains("recursion"),
            "{err:?}"
        );
    }

    #[test]
    fn duplicate_keys_and_second_documents_are_errors() {
        assert!(
            parse("a: 1\na: 2\n")
                .unwrap_err()
                .message
                .contains("duplicate key")
        );
        assert!(
            parse("a: 1\n---\nb: 2\n")
                .unwrap_err()
                .message
                .contains("second YAML document")
        );
    }

    #[test]
    fn merge_keys_fill_missing_entries() {
        let n = parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n").unwrap();
        let m = n.get("m").unwrap();
        assert!(matches!(&m.get("x").unwrap().value, Value::Scalar { text, .. } if &**text == "1"));
        assert!(matches!(&m.get("y").unwrap().value, Value::Scalar { text, .. } if &**text == "3"));
    }
}
