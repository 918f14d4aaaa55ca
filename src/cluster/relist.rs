//! What a relist leaves unsaid. After a watch is cut off for long enough
//! (its revision compacted away: 410 Gone), it lists everything again and
//! re-sends only what exists. An object deleted in the gap is dropped from
//! the cache without an event, so whatever its deletion should have woken
//! (the Agent or Tool owning a deleted pod) would wait for the next
//! unrelated change. [`Relist`] remembers the owner of each watched object
//! and, when a relist ends, names the owners of those that did not come
//! back. Pure: the child feeds (`feeds::child_feed`) drive it.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

#[derive(Debug)]
pub struct Relist<K, O> {
    /// Every object the watch has shown and not seen deleted, with its
    /// owner (objects without one are not kept: nothing to wake).
    known: HashMap<K, O>,
    /// While a relist runs: the objects it has re-sent so far.
    relisting: Option<HashSet<K>>,
}

impl<K, O> Default for Relist<K, O> {
    fn default() -> Self {
        Self {
            known: HashMap::new(),
            relisting: None,
        }
    }
}

impl<K: Hash + Eq + Clone, O: Clone> Relist<K, O> {
    /// The watch showed `key` (changed, or re-sent by a relist), owned by
    /// `owner`.
    pub fn applied(&mut self, key: K, owner: Option<O>) {
        if let Some(seen) = &mut self.relisting {
            seen.insert(key.clone());
        }
        match owner {
            Some(o) => {
                self.known.insert(key, o);
            }
            None => {
                self.known.remove(&key);
            }
        }
    }

    /// The watch saw `key` deleted (its owner is woken by the event itself).
    pub fn deleted(&mut self, key: &K) {
        self.known.remove(key);
        if let Some(seen) = &mut self.relisting {
            seen.remove(key);
        }
    }

    /// A relist begins (`watcher::Event::Init`).
    pub fn started(&mut self) {
        self.relisting = Some(HashSet::new());
    }

    /// A relist ended (`watcher::Event::InitDone`): the owners of the
    /// objects known before it that it did not re-send, which are gone.
    /// Nothing when no relist was running.
    pub fn done(&mut self) -> Vec<O> {
        let Some(seen) = self.relisting.take() else {
            return Vec::new();
        };
        let gone: Vec<K> = self
            .known
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        gone.iter().filter_map(|k| self.known.remove(k)).collect()
    }

    /// How many objects with an owner it holds.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Relist;

    /// One step of a watch as the feed sees it.
    enum Ev {
        Apply(&'static str, Option<&'static str>),
        Delete(&'static str),
        Init,
        Done,
    }
    use Ev::*;

    fn run(events: &[Ev]) -> (Vec<&'static str>, usize) {
        let mut r = Relist::default();
        let mut woken = Vec::new();
        for e in events {
            match e {
                Apply(k, o) => r.applied(*k, *o),
                Delete(k) => r.deleted(k),
                Init => r.started(),
                Done => woken.extend(r.done()),
            }
        }
        woken.sort_unstable();
        (woken, r.len())
    }

    #[test]
    fn a_relist_names_the_owners_of_what_did_not_come_back() {
        let cases: Vec<(&str, Vec<Ev>, Vec<&str>, usize)> = vec![
            (
                "the first list wakes nobody",
                vec![Init, Apply("p1", Some("a1")), Done],
                vec![],
                1,
            ),
            (
                "everything came back",
                vec![
                    Apply("p1", Some("a1")),
                    Apply("p2", Some("a2")),
                    Init,
                    Apply("p1", Some("a1")),
                    Apply("p2", Some("a2")),
                    Done,
                ],
                vec![],
                2,
            ),
            (
                "a pod deleted in the gap wakes its agent",
                vec![
                    Apply("p1", Some("a1")),
                    Apply("p2", Some("a2")),
                    Init,
                    Apply("p1", Some("a1")),
                    Done,
                ],
                vec!["a2"],
                1,
            ),
            (
                "a deletion seen as an event is not reported again",
                vec![
                    Apply("p1", Some("a1")),
                    Apply("p2", Some("a2")),
                    Delete("p2"),
                    Init,
                    Apply("p1", Some("a1")),
                    Done,
                ],
                vec![],
                1,
            ),
            (
                "an object without an owner is not kept",
                vec![Apply("p1", None), Init, Done],
                vec![],
                0,
            ),
            (
                "an owner dropped later is forgotten",
                vec![Apply("p1", Some("a1")), Apply("p1", None), Init, Done],
                vec![],
                0,
            ),
            (
                "a second relist reports only its own gap",
                vec![
                    Apply("p1", Some("a1")),
                    Apply("p2", Some("a2")),
                    Init,
                    Apply("p2", Some("a2")),
                    Done,
                    Init,
                    Done,
                ],
                vec!["a1", "a2"],
                0,
            ),
            (
                "InitDone without Init changes nothing",
                vec![Apply("p1", Some("a1")), Done],
                vec![],
                1,
            ),
        ];
        for (what, events, want, left) in cases {
            assert_eq!(run(&events), (want, left), "{what}");
        }
    }
}
