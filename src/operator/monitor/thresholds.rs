//! The thresholds in force: a flag of `exo operator run` (`--monitor-*`)
//! wins, then the Fleet's `spec.monitors`, then the built-in default
//! ([`crate::crd::Monitors::default`]). Pure.

use std::time::Duration;

use crate::crd::Monitors;

/// Values given on the command line; `None` leaves the Fleet's (or the
/// default) in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub crashloop_restarts: Option<u32>,
    pub crashloop_window: Option<Duration>,
    pub tenant_restarts: Option<u32>,
    pub tenant_window: Option<Duration>,
    pub silent_after: Option<Duration>,
}

/// "At least `restarts` within `window`".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub restarts: u32,
    pub window: Duration,
}

/// The thresholds in force; `None` is a disabled monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub crashloop: Option<Rate>,
    pub restarts: Option<Rate>,
    pub silent: Option<Duration>,
}

impl Thresholds {
    /// The longest window any enabled monitor looks back over.
    pub fn longest_window(&self) -> Duration {
        [
            self.crashloop.map(|r| r.window),
            self.restarts.map(|r| r.window),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(Duration::ZERO)
    }
}

/// A Fleet value that could not be used; its default is in force instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("spec.monitors.{field} {value:?} is not a duration ({reason}); using {default}")]
    BadDuration {
        field: &'static str,
        value: String,
        #[source]
        reason: crate::duration::DurationError,
        default: String,
    },
    #[error("spec.monitors.{field} is {value}; it must be a positive duration, using {default}")]
    ZeroDuration {
        field: &'static str,
        value: String,
        default: String,
    },
}

fn duration(
    field: &'static str,
    value: &str,
    default: &str,
    errors: &mut Vec<ThresholdError>,
) -> Duration {
    let fallback = || crate::duration::parse(default).unwrap_or(Duration::from_secs(600));
    match crate::duration::parse(value) {
        Ok(d) if d.is_zero() => {
            errors.push(ThresholdError::ZeroDuration {
                field,
                value: value.to_owned(),
                default: default.to_owned(),
            });
            fallback()
        }
        Ok(d) => d,
        Err(reason) => {
            errors.push(ThresholdError::BadDuration {
                field,
                value: value.to_owned(),
                reason,
                default: default.to_owned(),
            });
            fallback()
        }
    }
}

/// The thresholds from `spec` (a Fleet's, or the default) with `flags`
/// applied over them, and what in `spec` could not be used. A restart
/// count of 0 counts as 1 (otherwise every workload would fire).
pub fn effective(spec: &Monitors, flags: &Overrides) -> (Thresholds, Vec<ThresholdError>) {
    let d = Monitors::default();
    let mut errors = Vec::new();
    let crashloop = spec.crashloop.enabled.then(|| Rate {
        restarts: flags
            .crashloop_restarts
            .unwrap_or(spec.crashloop.restarts)
            .max(1),
        window: flags.crashloop_window.unwrap_or_else(|| {
            duration(
                "crashloop.window",
                &spec.crashloop.window,
                &d.crashloop.window,
                &mut errors,
            )
        }),
    });
    let restarts = spec.restarts.enabled.then(|| Rate {
        restarts: flags
            .tenant_restarts
            .unwrap_or(spec.restarts.restarts)
            .max(1),
        window: flags.tenant_window.unwrap_or_else(|| {
            duration(
                "restarts.window",
                &spec.restarts.window,
                &d.restarts.window,
                &mut errors,
            )
        }),
    });
    let silent = spec.silent.enabled.then(|| {
        flags.silent_after.unwrap_or_else(|| {
            duration(
                "silent.after",
                &spec.silent.after,
                &d.silent.after,
                &mut errors,
            )
        })
    });
    (
        Thresholds {
            crashloop,
            restarts,
            silent,
        },
        errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CrashloopMonitor, SilentMonitor};

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn flags_then_fleet_then_defaults() {
        let defaults = Thresholds {
            crashloop: Some(Rate {
                restarts: 3,
                window: 10 * MIN,
            }),
            restarts: Some(Rate {
                restarts: 10,
                window: 60 * MIN,
            }),
            silent: Some(15 * MIN),
        };
        let fleet = Monitors {
            crashloop: CrashloopMonitor {
                enabled: true,
                restarts: 5,
                window: "2m".into(),
            },
            ..Monitors::default()
        };
        let flags = Overrides {
            crashloop_window: Some(MIN),
            silent_after: Some(30 * MIN),
            ..Overrides::default()
        };
        let disabled = Monitors {
            silent: SilentMonitor {
                enabled: false,
                after: "1m".into(),
            },
            ..Monitors::default()
        };
        let bad = Monitors {
            crashloop: CrashloopMonitor {
                window: "soon".into(),
                restarts: 0,
                ..CrashloopMonitor::default()
            },
            ..Monitors::default()
        };
        let cases = [
            (
                "defaults",
                Monitors::default(),
                Overrides::default(),
                defaults,
                0,
            ),
            (
                "fleet",
                fleet.clone(),
                Overrides::default(),
                Thresholds {
                    crashloop: Some(Rate {
                        restarts: 5,
                        window: 2 * MIN,
                    }),
                    ..defaults
                },
                0,
            ),
            (
                "flags over fleet",
                fleet,
                flags.clone(),
                Thresholds {
                    crashloop: Some(Rate {
                        restarts: 5,
                        window: MIN,
                    }),
                    silent: Some(30 * MIN),
                    ..defaults
                },
                0,
            ),
            (
                "disabled in the fleet stays disabled",
                disabled,
                flags,
                Thresholds {
                    crashloop: Some(Rate {
                        restarts: 3,
                        window: MIN,
                    }),
                    silent: None,
                    ..defaults
                },
                0,
            ),
            (
                "a bad duration falls back to the default, 0 restarts to 1",
                bad,
                Overrides::default(),
                Thresholds {
                    crashloop: Some(Rate {
                        restarts: 1,
                        window: 10 * MIN,
                    }),
                    ..defaults
                },
                1,
            ),
        ];
        for (what, spec, flags, want, errors) in cases {
            let (got, errs) = effective(&spec, &flags);
            assert_eq!(got, want, "{what}");
            assert_eq!(errs.len(), errors, "{what}: {errs:?}");
        }
        assert_eq!(defaults.longest_window(), 60 * MIN);
    }
}
