//! Capped exponential backoff with full jitter (the delay is uniform in
//! `[0, min(max, base * 2^attempt)]`), reset after a healthy connection.
//! After the loss of an established connection the ceiling starts at the
//! reconnect spread ([`Backoff::after_loss`]): when a control plane restarts,
//! all of its operators lose it at the same instant, and starting from a
//! 500 ms ceiling would bring most of them back in the first second after it
//! returns (BENCHMARKS.md, "reconnect spread").
//! Pure: the caller supplies the random number, so tests are exact.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The ceiling of the next delay, before jitter.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The next delay given a uniformly random `r`; advances the attempt.
    pub fn next_delay(&mut self, r: u64) -> Duration {
        let cap = u64::try_from(self.ceiling().as_millis()).unwrap_or(u64::MAX);
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_millis(r % cap.saturating_add(1))
    }

    /// Raises the ceiling of the next delay to at least `spread` (still
    /// capped by `max`). Called when an established connection is lost, so a
    /// fleet that lost the same server at once spreads its redials over
    /// `spread` instead of arriving together when the server is back.
    pub fn after_loss(&mut self, spread: Duration) {
        let want = spread.min(self.max);
        while self.ceiling() < want && self.attempt < 31 {
            self.attempt += 1;
        }
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// A uniformly random u64 from the OS (0 if it is unavailable, which only
/// removes jitter).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    match getrandom::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let ceilings: Vec<u128> = (0..6)
            .map(|_| {
                let c = b.ceiling().as_millis();
                b.next_delay(0);
                c
            })
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(100));
    }

    #[test]
    fn jitter_is_full_and_bounded() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        assert_eq!(b.next_delay(0), Duration::ZERO);
        assert_eq!(b.next_delay(200), Duration::from_millis(200));
        assert_eq!(b.next_delay(401), Duration::ZERO);
        for _ in 0..100 {
            assert!(b.next_delay(random_u64()) <= Duration::from_secs(1));
        }
    }

    #[test]
    fn huge_attempt_counts_do_not_overflow() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..200 {
            b.next_delay(u64::MAX);
        }
        assert_eq!(b.ceiling(), Duration::from_secs(60));
    }

    #[test]
    fn after_loss_starts_at_the_spread_capped_by_max() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        b.after_loss(Duration::from_secs(15));
        assert_eq!(b.ceiling(), Duration::from_secs(16));
        b.next_delay(0);
        assert_eq!(b.ceiling(), Duration::from_secs(32));
        // A later loss never lowers the ceiling.
        b.after_loss(Duration::from_secs(15));
        assert_eq!(b.ceiling(), Duration::from_secs(32));
        let mut small = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        small.after_loss(Duration::from_secs(15));
        assert_eq!(small.ceiling(), Duration::from_millis(500));
        let mut off = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        off.after_loss(Duration::ZERO);
        assert_eq!(off.ceiling(), Duration::from_millis(500));
    }
}
