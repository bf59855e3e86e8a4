//! Paths into a document ("spec.nodeSets.0.podTemplate"): parsing, showing, reading and setting.

use serde_json::{Value as Json, json};

#[derive(Clone, Debug)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) fn show_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Parses "spec.nodeSets.0.podTemplate" (numbers are indexes).
pub(super) fn parse_path(p: &str) -> Vec<Seg> {
    p.split('.')
        .map(|s| match s.parse::<usize>() {
            Ok(i) => Seg::Index(i),
            Err(_) => Seg::Key(s.to_string()),
        })
        .collect()
}

/// Sets PATH in DOC to V, making the objects and arrays on the way (an index past the end
/// appends).
pub(super) fn set_at(doc: &mut Json, path: &[Seg], v: Json) {
    let Some((last, up)) = path.split_last() else {
        *doc = v;
        return;
    };
    let mut cur = doc;
    for (i, seg) in up.iter().enumerate() {
        let next_is_index = matches!(path[i + 1], Seg::Index(_));
        let fresh = || if next_is_index { json!([]) } else { json!({}) };
        cur = match seg {
            Seg::Key(k) => {
                if !cur.is_object() {
                    *cur = json!({});
                }
                let m = cur.as_object_mut().unwrap();
                let e = m.entry(k.clone()).or_insert_with(fresh);
                if e.is_null() || (next_is_index && !e.is_array()) {
                    *e = fresh();
                }
                e
            }
            Seg::Index(i) => {
                if !cur.is_array() {
                    *cur = json!([]);
                }
                let a = cur.as_array_mut().unwrap();
                let i = (*i).min(a.len());
                if i == a.len() {
                    a.push(fresh());
                }
                &mut a[i]
            }
        };
    }
    match last {
        Seg::Key(k) => {
            if !cur.is_object() {
                *cur = json!({});
            }
            cur.as_object_mut().unwrap().insert(k.clone(), v);
        }
        Seg::Index(i) => {
            if !cur.is_array() {
                *cur = json!([]);
            }
            let a = cur.as_array_mut().unwrap();
            if *i < a.len() {
                a[*i] = v;
            } else {
                a.push(v);
            }
        }
    }
}

pub(super) fn get_at<'a>(doc: &'a Json, path: &[Seg]) -> Option<&'a Json> {
    path.iter().try_fold(doc, |cur, seg| match seg {
        Seg::Key(k) => cur.get(k.as_str()),
        Seg::Index(i) => cur.get(*i),
    })
}
