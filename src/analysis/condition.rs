//! `successCondition` and `failureCondition`: a small expression over
//! `result`, pure. Comparisons of `result` with a number (`<`, `<=`, `>`,
//! `>=`, `==`, `!=`, either side), joined by `&&` and `||` (`&&` binds
//! tighter), grouped with parentheses:
//!
//! ```text
//! result < 0.05
//! result >= 1 && result <= 10 || result == -1
//! ```
//!
//! Texts are bounded ([`MAX_LEN`] bytes, [`MAX_DEPTH`] parentheses deep),
//! so a parse never recurses without end.

use std::fmt;

use super::AnalysisError;

pub const MAX_LEN: usize = 512;
pub const MAX_DEPTH: usize = 16;

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `result <op> value`.
    Compare {
        op: Op,
        value: f64,
    },
    And(Box<Condition>, Box<Condition>),
    Or(Box<Condition>, Box<Condition>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }

    /// The same comparison with its sides swapped (`1 < result` is
    /// `result > 1`).
    fn swapped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            Op::Eq | Op::Ne => self,
        }
    }

    fn holds(self, left: f64, right: f64) -> bool {
        match self {
            Op::Lt => left < right,
            Op::Le => left <= right,
            Op::Gt => left > right,
            Op::Ge => left >= right,
            Op::Eq => left == right,
            Op::Ne => left != right,
        }
    }
}

impl Condition {
    /// Parses a condition; the error says where and what was expected.
    pub fn parse(text: &str) -> Result<Condition, AnalysisError> {
        let bad = |reason: String| AnalysisError::Condition {
            text: super::clip(text, 80).to_owned(),
            reason,
        };
        if text.len() > MAX_LEN {
            return Err(bad(format!("longer than {MAX_LEN} bytes")));
        }
        let tokens = lex(text).map_err(bad)?;
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
        };
        let c = p.or(0).map_err(bad)?;
        match p.peek() {
            None => Ok(c),
            Some(t) => Err(bad(format!("unexpected {t} after a complete condition"))),
        }
    }

    /// Whether the condition holds for `result`.
    pub fn holds(&self, result: f64) -> bool {
        match self {
            Condition::Compare { op, value } => op.holds(result, *value),
            Condition::And(a, b) => a.holds(result) && b.holds(result),
            Condition::Or(a, b) => a.holds(result) || b.holds(result),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Compare { op, value } => write!(f, "result {} {value}", op.as_str()),
            Condition::And(a, b) => write!(f, "({a} && {b})"),
            Condition::Or(a, b) => write!(f, "({a} || {b})"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Result,
    Number(f64),
    Op(Op),
    And,
    Or,
    Open,
    Close,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Result => f.write_str("`result`"),
            Token::Number(n) => write!(f, "the number {n}"),
            Token::Op(op) => write!(f, "`{}`", op.as_str()),
            Token::And => f.write_str("`&&`"),
            Token::Or => f.write_str("`||`"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
        }
    }
}

fn lex(text: &str) -> Result<Vec<Token>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let two = bytes.get(i..i + 2).unwrap_or_default();
        let (token, len) = match (bytes[i], two) {
            (b' ' | b'\t' | b'\n' | b'\r', _) => {
                i += 1;
                continue;
            }
            (_, b"&&") => (Token::And, 2),
            (_, b"||") => (Token::Or, 2),
            (_, b"<=") => (Token::Op(Op::Le), 2),
            (_, b">=") => (Token::Op(Op::Ge), 2),
            (_, b"==") => (Token::Op(Op::Eq), 2),
            (_, b"!=") => (Token::Op(Op::Ne), 2),
            (b'<', _) => (Token::Op(Op::Lt), 1),
            (b'>', _) => (Token::Op(Op::Gt), 1),
            (b'(', _) => (Token::Open, 1),
            (b')', _) => (Token::Close, 1),
            (b'0'..=b'9' | b'.' | b'-' | b'+', _) => {
                let len = number_len(&bytes[i..]);
                let word = &text[i..i + len];
                let n: f64 = word
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite())
                    .ok_or_else(|| format!("{word:?} at byte {i} is not a number"))?;
                (Token::Number(n), len)
            }
            (b'a'..=b'z' | b'A'..=b'Z' | b'_', _) => {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                let word = &text[i..i + len];
                if word != "result" {
                    return Err(format!(
                        "unknown name {word:?} at byte {i}; the only name is `result`"
                    ));
                }
                (Token::Result, len)
            }
            _ => {
                let c = text[i..].chars().next().unwrap_or_default();
                return Err(format!("unexpected {c:?} at byte {i}"));
            }
        };
        out.push(token);
        i += len;
    }
    Ok(out)
}

/// The length of a number's text: sign, digits and points, an exponent.
fn number_len(b: &[u8]) -> usize {
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
    };
    // Every '.' is taken, so `1.2.3` is one word that is not a number.
    while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
        i += 1;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        digits(&mut i);
    }
    i
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self, expected: &str) -> Result<Token, String> {
        let t = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or_else(|| format!("the condition ends where {expected} was expected"))?;
        self.at += 1;
        Ok(t)
    }

    fn or(&mut self, depth: usize) -> Result<Condition, String> {
        let mut left = self.and(depth)?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            left = Condition::Or(Box::new(left), Box::new(self.and(depth)?));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Condition, String> {
        let mut left = self.atom(depth)?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            left = Condition::And(Box::new(left), Box::new(self.atom(depth)?));
        }
        Ok(left)
    }

    fn atom(&mut self, depth: usize) -> Result<Condition, String> {
        const OPERAND: &str = "`result`, a number or `(`";
        match self.next(OPERAND)? {
            Token::Open => {
                if depth >= MAX_DEPTH {
                    return Err(format!("parentheses nest deeper than {MAX_DEPTH}"));
                }
                let inner = self.or(depth + 1)?;
                match self.next("`)`")? {
                    Token::Close => Ok(inner),
                    t => Err(format!("expected `)`, found {t}")),
                }
            }
            Token::Result => {
                let op = self.op()?;
                match self.next("a number")? {
                    Token::Number(value) => Ok(Condition::Compare { op, value }),
                    t => Err(format!(
                        "expected a number after `result {}`, found {t}",
                        op.as_str()
                    )),
                }
            }
            Token::Number(value) => {
                let op = self.op()?;
                match self.next("`result`")? {
                    Token::Result => Ok(Condition::Compare {
                        op: op.swapped(),
                        value,
                    }),
                    t => Err(format!(
                        "expected `result` after `{value} {}`, found {t}",
                        op.as_str()
                    )),
                }
            }
            t => Err(format!("expected {OPERAND}, found {t}")),
        }
    }

    fn op(&mut self) -> Result<Op, String> {
        match self.next("a comparison")? {
            Token::Op(op) => Ok(op),
            t => Err(format!(
                "expected a comparison (< <= > >= == !=), found {t}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_hold_as_written() {
        let cases: &[(&str, f64, bool)] = &[
            ("result < 0.05", 0.01, true),
            ("result < 0.05", 0.05, false),
            ("result <= 0.05", 0.05, true),
            ("result > 1", 2.0, true),
            ("result >= 1", 1.0, true),
            ("result == 0", 0.0, true),
            ("result != 0", 0.0, false),
            ("1 < result", 2.0, true),
            ("1 < result", 0.5, false),
            ("result > -1.5e1", -10.0, true),
            ("result >= 1 && result <= 10", 5.0, true),
            ("result >= 1 && result <= 10", 11.0, false),
            // && binds tighter than ||.
            ("result == -1 || result >= 1 && result <= 10", -1.0, true),
            ("result == -1 || result >= 1 && result <= 10", 20.0, false),
            ("(result == -1 || result >= 1) && result <= 10", 20.0, false),
            ("(result == -1 || result >= 1) && result <= 10", -1.0, true),
            ("  result<1  ", 0.0, true),
        ];
        for (text, result, want) in cases {
            let c = Condition::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(c.holds(*result), *want, "{text} at {result}");
        }
    }

    #[test]
    fn bad_conditions_are_refused_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "ends where"),
            ("result", "ends where a comparison"),
            ("result <", "ends where a number"),
            ("result < x", "unknown name \"x\""),
            ("value < 1", "unknown name \"value\""),
            ("result = 1", "unexpected '='"),
            ("result < 1 &&", "ends where"),
            ("result < 1 result > 2", "after a complete condition"),
            ("(result < 1", "ends where `)`"),
            ("result < 1)", "unexpected `)`"),
            ("1 < 2", "expected `result` after"),
            ("result < result", "expected a number after"),
            ("result < 1.2.3", "is not a number"),
            ("result < 1e999", "is not a number"),
            ("result & 1", "unexpected '&'"),
        ];
        for (text, want) in cases {
            match Condition::parse(text) {
                Err(AnalysisError::Condition { reason, .. }) => {
                    assert!(reason.contains(want), "{text:?}: {reason}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let deep = format!("{}result < 1{}", "(".repeat(40), ")".repeat(40));
        assert!(Condition::parse(&deep).is_err());
        assert!(Condition::parse(&"result < 1 || ".repeat(100)).is_err());
    }
}
