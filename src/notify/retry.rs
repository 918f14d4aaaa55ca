//! How often and how long a delivery is tried: exponential backoff with a
//! cap on the delay and on the number of attempts. Pure.

use std::time::Duration;

/// The retry policy of one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failed attempt.
    pub first: Duration,
    /// No wait is longer.
    pub cap: Duration,
    /// Attempts in all, the first included (at least 1).
    pub attempts: u32,
}

impl Default for Backoff {
    /// 1 s, 2 s, 4 s, 8 s between five attempts: a receiver that is down
    /// costs a delivery about 15 s before it is reported as failed.
    fn default() -> Self {
        Backoff {
            first: Duration::from_secs(1),
            cap: Duration::from_secs(30),
            attempts: 5,
        }
    }
}

impl Backoff {
    /// The wait after failed attempt `n` (1 for the first), or `None` when
    /// that was the last one.
    pub fn after(&self, n: u32) -> Option<Duration> {
        if n >= self.attempts.max(1) {
            return None;
        }
        let factor = 2u32.saturating_pow(n.saturating_sub(1));
        Some(self.first.saturating_mul(factor).min(self.cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_then_stop() {
        let b = Backoff {
            first: Duration::from_secs(1),
            cap: Duration::from_secs(5),
            attempts: 6,
        };
        let waits: Vec<Option<u64>> = (1..=6).map(|n| b.after(n).map(|d| d.as_secs())).collect();
        assert_eq!(
            waits,
            [Some(1), Some(2), Some(4), Some(5), Some(5), None],
            "five waits between six attempts, capped at 5 s"
        );
        let once = Backoff {
            attempts: 0,
            ..Backoff::default()
        };
        assert_eq!(once.after(1), None, "at least one attempt, never a retry");
        assert_eq!(Backoff::default().after(64), None);
    }
}
