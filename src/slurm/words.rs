//! Slurm's repeated words — users, accounts, partitions, QOS, job states, reasons, node names —
//! kept once each however many job records say them. A queue of 50,000 jobs says a few hundred
//! users and a few dozen partitions 50,000 times each; as `String`s, each record paid for copies
//! of its own (`queue.kept_bytes_per_job` in `slurmops bench`).
//!
//! [`Word`] is a shared, immutable string; [`Word::new`] hands out the copy already kept when
//! there is one. The pool forgets a word once no record holds it (checked as it grows), so it
//! holds what the records hold, and never more than twice as many words.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// A shared string from the pool of Slurm's words (see the module's comment).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Word(Arc<str>);

/// The pool: the words held, and the size at which it is next swept of those no one holds.
struct Pool {
    words: HashSet<Arc<str>>,
    sweep_at: usize,
}

/// Past this many words the pool sweeps itself (then at twice what it kept).
const FIRST_SWEEP: usize = 4096;

fn pool() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        Mutex::new(Pool {
            words: HashSet::new(),
            sweep_at: FIRST_SWEEP,
        })
    })
}

impl Word {
    /// S, as the copy the pool keeps (the empty word is one shared copy too).
    pub fn new(s: &str) -> Word {
        let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = p.words.get(s) {
            return Word(Arc::clone(w));
        }
        if p.words.len() >= p.sweep_at {
            // Only the pool holds it: no record says it any more.
            p.words.retain(|w| Arc::strong_count(w) > 1);
            p.sweep_at = (p.words.len() * 2).max(FIRST_SWEEP);
        }
        let w: Arc<str> = Arc::from(s);
        p.words.insert(Arc::clone(&w));
        Word(w)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Word {
    fn default() -> Word {
        Word::new("")
    }
}

impl std::ops::Deref for Word {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Word {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Word {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Word {
    fn from(s: &str) -> Word {
        Word::new(s)
    }
}

impl From<String> for Word {
    fn from(s: String) -> Word {
        Word::new(&s)
    }
}

impl From<&String> for Word {
    fn from(s: &String) -> Word {
        Word::new(s)
    }
}

impl From<Word> for String {
    fn from(w: Word) -> String {
        w.0.to_string()
    }
}

impl PartialEq<str> for Word {
    fn eq(&self, o: &str) -> bool {
        &*self.0 == o
    }
}

impl PartialEq<&str> for Word {
    fn eq(&self, o: &&str) -> bool {
        &*self.0 == *o
    }
}

impl PartialEq<String> for Word {
    fn eq(&self, o: &String) -> bool {
        &*self.0 == o.as_str()
    }
}

impl PartialEq<Word> for str {
    fn eq(&self, o: &Word) -> bool {
        self == &*o.0
    }
}

impl PartialEq<Word> for &str {
    fn eq(&self, o: &Word) -> bool {
        *self == &*o.0
    }
}

impl PartialEq<Word> for String {
    fn eq(&self, o: &Word) -> bool {
        self.as_str() == &*o.0
    }
}

impl serde::Serialize for Word {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Word {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Word, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Word;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Word, E> {
                Ok(Word::new(v))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_word_is_one_copy_and_compares_as_text() {
        let a = Word::new("words-test-alice");
        let b = Word::from(String::from("words-test-alice"));
        assert!(Arc::ptr_eq(&a.0, &b.0), "a word said twice is kept once");
        assert_eq!(a, "words-test-alice");
        assert_eq!("words-test-alice", a);
        assert_eq!(a.to_string(), "words-test-alice");
        assert_eq!(format!("{a:?}"), "\"words-test-alice\"");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"words-test-alice\"");
        let c: Word = serde_json::from_str("\"words-test-alice\"").unwrap();
        assert!(Arc::ptr_eq(&a.0, &c.0));
    }

    #[test]
    fn the_pool_forgets_the_words_no_record_holds() {
        // Words no one keeps, far past the sweep's threshold: the pool stays bounded.
        let kept = Word::new("words-test-kept");
        for i in 0..(FIRST_SWEEP * 4) {
            drop(Word::new(&format!("words-test-gone-{i}")));
        }
        let p = pool().lock().unwrap();
        assert!(
            p.words.len() <= p.sweep_at,
            "{} words kept, swept at {}",
            p.words.len(),
            p.sweep_at
        );
        assert!(
            p.words.contains("words-test-kept"),
            "a word still held stays"
        );
        assert!(
            !p.words.contains("words-test-gone-0"),
            "a word no one holds goes"
        );
        drop(p);
        drop(kept);
    }
}
