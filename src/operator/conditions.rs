//! Status conditions: built fresh each reconcile, then merged with the
//! previous ones so `lastTransitionTime` only moves when `status` flips.
//! Keeping it stable is what makes a no-op reconcile write nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// A condition without its timestamp; [`merge`] adds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Turns `want` into Conditions, keeping the old `lastTransitionTime` of a
/// condition whose status did not change.
pub fn merge(
    old: &[Condition],
    want: &[Cond],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    want.iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let prev = old.iter().find(|o| o.type_ == c.type_);
            let last_transition_time = match prev {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => Time(now),
            };
            Condition {
                type_: c.type_.to_owned(),
                status: status.to_owned(),
                reason: c.reason.to_owned(),
                message: c.message.clone(),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_transition_time_when_status_is_unchanged() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let first = merge(
            &[],
            &[Cond::new("Ready", true, "Active", "ok")],
            Some(1),
            t0,
        );
        let again = merge(
            &first,
            &[Cond::new("Ready", true, "Active", "still ok")],
            Some(2),
            t1,
        );
        assert_eq!(again[0].last_transition_time, Time(t0));
        let flipped = merge(
            &again,
            &[Cond::new("Ready", false, "Error", "bad")],
            Some(2),
            t1,
        );
        assert_eq!(flipped[0].last_transition_time, Time(t1));
        assert_eq!(flipped[0].status, "False");
    }
}
