//! The local terminal for `exo attach`: raw mode while a session runs and
//! its size for resize forwarding.
//!
//! Guarantees: raw mode is set only when stdin is a terminal, and the
//! settings saved before are restored when the [`RawMode`] guard drops, which
//! happens on every way out of a session (normal end, error, `?`, panic
//! unwinding, SIGTERM/SIGHUP handled by the caller). Without a terminal
//! nothing is touched, so pipes and scripts keep working.

use std::io::IsTerminal;
use std::os::fd::AsFd;

use rustix::termios::{self, OptionalActions, Termios};

#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    #[error("cannot read the terminal settings of stdin: {0}")]
    Get(#[source] std::io::Error),
    #[error("cannot switch the terminal to raw mode: {0}")]
    Set(#[source] std::io::Error),
}

/// Raw mode on stdin until dropped.
#[derive(Debug)]
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// `Ok(None)` when stdin is not a terminal (nothing changed).
    pub fn enable() -> Result<Option<Self>, TerminalError> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Ok(None);
        }
        let saved = termios::tcgetattr(stdin.as_fd()).map_err(|e| TerminalError::Get(e.into()))?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(stdin.as_fd(), OptionalActions::Now, &raw)
            .map_err(|e| TerminalError::Set(e.into()))?;
        Ok(Some(Self { saved }))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // Drain: output already written is shown with the raw settings.
        let _ = termios::tcsetattr(
            std::io::stdin().as_fd(),
            OptionalActions::Drain,
            &self.saved,
        );
    }
}

/// `(cols, rows)` of the terminal on stdout, else stdin; `None` without one
/// (or when it reports 0x0).
pub fn size() -> Option<(u16, u16)> {
    let from = |fd: std::os::fd::BorrowedFd<'_>| {
        termios::tcgetwinsize(fd)
            .ok()
            .filter(|w| w.ws_col > 0 && w.ws_row > 0)
            .map(|w| (w.ws_col, w.ws_row))
    };
    let out = std::io::stdout();
    let inp = std::io::stdin();
    (out.is_terminal().then(|| from(out.as_fd())).flatten())
        .or_else(|| inp.is_terminal().then(|| from(inp.as_fd())).flatten())
}
