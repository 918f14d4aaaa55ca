//! Promoted or rolled back: how a wave pointer's move is told apart. Pure.
//!
//! A wave whose release changed was promoted, unless its new release is
//! one it ran before: one in the pointer's `history` as it was before the
//! move (what `exo release rollback` returns to). When that history is not
//! known (the first sync of a leadership term sees the move), the
//! releases its tenants' Rollouts verified stand in for it.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::EventKind;
use crate::fleet::release::{WaveName, WavePointer, WavePointersSpec};

/// What a wave pointed at before the move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub release: String,
    /// The pointer's history then, when known.
    pub history: Option<Vec<String>>,
}

impl From<&WavePointer> for Before {
    fn from(p: &WavePointer) -> Self {
        Before {
            release: p.release.clone(),
            history: Some(p.history.clone()),
        }
    }
}

/// One wave's move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveMove {
    pub wave: WaveName,
    pub from: String,
    pub to: String,
    /// [`EventKind::Promoted`] or [`EventKind::RolledBack`].
    pub kind: EventKind,
}

impl WaveMove {
    /// The event's message.
    pub fn message(&self) -> String {
        let how = match self.kind {
            EventKind::RolledBack => "rolled back",
            _ => "promoted",
        };
        format!("wave {} {how} from {} to {}", self.wave, self.from, self.to)
    }
}

/// The waves whose release differs between `before` and `now`, in wave
/// order. `verified` holds, per wave, the releases its tenants verified:
/// the stand-in for an unknown history.
pub fn moves(
    before: &BTreeMap<WaveName, Before>,
    now: &WavePointersSpec,
    verified: &BTreeMap<WaveName, BTreeSet<String>>,
) -> Vec<WaveMove> {
    WaveName::ORDER
        .into_iter()
        .filter_map(|wave| {
            let old = before.get(&wave)?;
            let to = &now.get(wave).release;
            if *to == old.release {
                return None;
            }
            let ran_before = match &old.history {
                Some(h) => h.contains(to),
                None => verified.get(&wave).is_some_and(|v| v.contains(to)),
            };
            Some(WaveMove {
                wave,
                from: old.release.clone(),
                to: to.clone(),
                kind: if ran_before {
                    EventKind::RolledBack
                } else {
                    EventKind::Promoted
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointers(canary: (&str, &[&str]), low: &str, fleet: &str) -> WavePointersSpec {
        let p = |r: &str, h: &[&str]| WavePointer {
            release: r.to_owned(),
            history: h.iter().map(|s| (*s).to_owned()).collect(),
        };
        WavePointersSpec {
            canary: p(canary.0, canary.1),
            low_risk: p(low, &[]),
            fleet: p(fleet, &[]),
        }
    }

    fn before(p: &WavePointersSpec) -> BTreeMap<WaveName, Before> {
        WaveName::ORDER
            .into_iter()
            .map(|w| (w, Before::from(p.get(w))))
            .collect()
    }

    #[test]
    fn a_move_forward_is_a_promotion_and_back_into_history_a_rollback() {
        let none = BTreeMap::new();
        let r1 = pointers(("r1", &["r0"]), "r1", "r1");
        let r2 = pointers(("r2", &["r1", "r0"]), "r1", "r1");
        let got = moves(&before(&r1), &r2, &none);
        assert_eq!(
            got,
            [WaveMove {
                wave: WaveName::Canary,
                from: "r1".into(),
                to: "r2".into(),
                kind: EventKind::Promoted
            }]
        );
        assert_eq!(got[0].message(), "wave canary promoted from r1 to r2");
        let back = pointers(("r1", &["r2", "r0"]), "r1", "r1");
        let got = moves(&before(&r2), &back, &none);
        assert_eq!(got[0].kind, EventKind::RolledBack);
        assert_eq!(got[0].message(), "wave canary rolled back from r2 to r1");
        assert!(moves(&before(&r2), &r2, &none).is_empty());
    }

    #[test]
    fn without_the_history_the_verified_releases_decide() {
        let now = pointers(("r1", &["r2"]), "r1", "r1");
        let unknown: BTreeMap<WaveName, Before> = [(
            WaveName::Canary,
            Before {
                release: "r2".into(),
                history: None,
            },
        )]
        .into();
        let verified = [(WaveName::Canary, BTreeSet::from(["r1".to_owned()]))].into();
        assert_eq!(
            moves(&unknown, &now, &verified)[0].kind,
            EventKind::RolledBack
        );
        assert_eq!(
            moves(&unknown, &now, &BTreeMap::new())[0].kind,
            EventKind::Promoted
        );
        // A wave not seen before moves nowhere.
        assert!(moves(&BTreeMap::new(), &now, &verified).is_empty());
    }
}
