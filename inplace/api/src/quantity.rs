//! Kubernetes resource quantities (`80m`, `1Gi`, `1.5G`, `12e3`) read exactly, so sums and
//! comparisons do not depend on how a value was written (`1Gi` equals `1073741824`).

use std::fmt;

/// A malformed or out-of-range quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {why}")]
pub struct QuantityError {
    text: String,
    why: &'static str,
}

/// An exact quantity, held in nano-units (10⁻⁹).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// Parses Kubernetes quantity syntax: a signed decimal number followed by a binary suffix
    /// (`Ki`…`Ei`), a decimal suffix (`n u m k M G T P E`) or an exponent (`e3`, `E-2`).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let err = |why| QuantityError {
            text: text.to_owned(),
            why,
        };
        let (negative, body) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("it has no number"));
        }
        if frac_part.contains('.') {
            return Err(err("it has more than one decimal point"));
        }
        // value = digits × 10^(exp10 − frac_len) × 2^exp2
        let digits: String = format!("{int_part}{frac_part}");
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| err("the number is too large"))?
        };
        let (exp10, exp2): (i32, u32) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            s if s.starts_with(['e', 'E']) => {
                let exp: i32 = s[1..]
                    .parse()
                    .map_err(|_| err("the exponent is malformed"))?;
                (exp, 0)
            }
            _ => {
                return Err(err(
                    "the suffix is unknown; use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent",
                ));
            }
        };
        let scale = exp10 + 9 - frac_part.len() as i32;
        let mut nanos = mantissa
            .checked_mul(
                1_i128
                    .checked_shl(exp2)
                    .ok_or_else(|| err("it is too large"))?,
            )
            .ok_or_else(|| err("it is too large"))?;
        if scale >= 0 {
            let factor = 10_i128
                .checked_pow(scale as u32)
                .ok_or_else(|| err("it is too large"))?;
            nanos = nanos
                .checked_mul(factor)
                .ok_or_else(|| err("it is too large"))?;
        } else {
            let divisor = 10_i128
                .checked_pow((-scale) as u32)
                .ok_or_else(|| err("it is finer than 1n"))?;
            if nanos % divisor != 0 {
                return Err(err("it is finer than 1n"));
            }
            nanos /= divisor;
        }
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// Whether the quantity is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Adds two quantities.
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.nanos
            .checked_add(other.nanos)
            .map(|nanos| Quantity { nanos })
    }

    /// The canonical text: the value in nano-units, e.g. `1073741824000000000n` for `1Gi`.
    pub fn canonical(&self) -> String {
        format!("{}n", self.nanos)
    }
}

impl fmt::Display for Quantity {
    /// Plain decimal form without suffix, e.g. `0.08` for `80m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap()
    }

    #[test]
    fn equal_values_written_differently_are_equal() {
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1024Mi"), q("1Gi"));
        assert_eq!(q("80m"), q("0.08"));
        assert_eq!(q("1.5G"), q("1500M"));
        assert_eq!(q("12e3"), q("12k"));
        assert_eq!(q("1E-3"), q("1m"));
        assert_eq!(q("-1"), Quantity::parse("-1000m").unwrap());
        assert!(q("-1").is_negative());
    }

    #[test]
    fn sums_are_exact() {
        let sum = q("80m").checked_add(q("20m")).unwrap();
        assert_eq!(sum, q("100m"));
        assert_eq!(sum.to_string(), "0.1");
        assert_eq!(q("1Gi").to_string(), "1073741824");
        assert_eq!(q("1").canonical(), "1000000000n");
    }

    #[test]
    fn malformed_quantities_are_refused() {
        for bad in ["", "Gi", "1.2.3", "1Gb", "1ee", "0.5n", "1e100", "--1"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
