//! Online, degraded and offline: a deployment's state judged from how long
//! it has been silent, against the thresholds given at start. The one
//! judgement every view uses, live (`live`) or from a replica's row
//! (`crate::controlplane::view`).

use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Online,
    Degraded,
    Offline,
}

#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub degraded_after: Duration,
    pub offline_after: Duration,
}

impl Health {
    pub fn judge(last_frame: Option<Instant>, now: Instant, t: Thresholds) -> Health {
        Self::after(last_frame.map(|at| now.saturating_duration_since(at)), t)
    }

    /// The state after `silent` without a frame (`None`: never a frame).
    pub fn after(silent: Option<Duration>, t: Thresholds) -> Health {
        match silent {
            None => Health::Offline,
            Some(silent) => {
                if silent < t.degraded_after {
                    Health::Online
                } else if silent < t.offline_after {
                    Health::Degraded
                } else {
                    Health::Offline
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thresholds = Thresholds {
        degraded_after: Duration::from_secs(90),
        offline_after: Duration::from_secs(300),
    };

    #[test]
    fn judge_uses_the_receive_time() {
        let now = Instant::now();
        assert_eq!(Health::judge(None, now, T), Health::Offline);
        assert_eq!(Health::judge(Some(now), now, T), Health::Online);
        let later = now + Duration::from_secs(91);
        assert_eq!(Health::judge(Some(now), later, T), Health::Degraded);
        let much_later = now + Duration::from_secs(300);
        assert_eq!(Health::judge(Some(now), much_later, T), Health::Offline);
    }
}
