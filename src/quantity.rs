//! Parsing Kubernetes quantities (`20Gi`, `1.5G`, `500Mi`, `1e9`) into
//! bytes, so sizes can be compared. Pure; fractional bytes round up.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a valid quantity")]
pub struct QuantityError(pub String);

/// The value of `q` in bytes (rounded up to a whole byte).
pub fn to_bytes(q: &str) -> Result<u128, QuantityError> {
    let err = || QuantityError(q.to_owned());
    let s = q.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num = num.strip_prefix('+').unwrap_or(num);
    if num.is_empty() {
        return Err(err());
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(err());
    }
    if !int_part.chars().all(|c| c.is_ascii_digit())
        || !frac_part.chars().all(|c| c.is_ascii_digit())
    {
        return Err(err());
    }
    // value = digits / 10^frac_len * multiplier
    let digits: u128 = format!("{int_part}{frac_part}")
        .parse()
        .map_err(|_| err())?;
    let frac_len = u32::try_from(frac_part.len()).map_err(|_| err())?;
    let (mul, div_exp): (u128, u32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "m" => (1, 3),
        "k" => (1_000, 0),
        "M" => (1_000_000, 0),
        "G" => (1_000_000_000, 0),
        "T" => (1_000_000_000_000, 0),
        "P" => (1_000_000_000_000_000, 0),
        "E" => (1_000_000_000_000_000_000, 0),
        other => {
            let exp = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or_else(err)?;
            let exp: u32 = exp.parse().map_err(|_| err())?;
            (10u128.checked_pow(exp).ok_or_else(err)?, 0)
        }
    };
    let numerator = digits.checked_mul(mul).ok_or_else(err)?;
    let denominator = 10u128.checked_pow(frac_len + div_exp).ok_or_else(err)?;
    Ok(numerator.div_ceil(denominator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        let cases: &[(&str, u128)] = &[
            ("0", 0),
            ("1", 1),
            ("1Ki", 1024),
            ("20Gi", 20 * (1 << 30)),
            ("100Gi", 100 * (1 << 30)),
            ("1.5Gi", 3 * (1 << 29)),
            ("1G", 1_000_000_000),
            ("500M", 500_000_000),
            ("1e3", 1000),
            ("1500m", 2),
            ("2Ti", 2 << 40),
            ("+5k", 5000),
        ];
        for (q, want) in cases {
            assert_eq!(to_bytes(q), Ok(*want), "{q}");
        }
    }

    #[test]
    fn refuses_garbage() {
        for q in ["", "Gi", "abc", "1.2.3Gi", "1Zi", "-1Gi", "."] {
            assert!(to_bytes(q).is_err(), "{q}");
        }
    }

    #[test]
    fn compares_across_units() {
        assert!(to_bytes("1Gi").unwrap() > to_bytes("1G").unwrap());
        assert!(to_bytes("1024Mi").unwrap() == to_bytes("1Gi").unwrap());
    }
}
