//! beads' loop `range = "start..end"`: two integer expressions (`+ - * / ^`, parentheses, and
//! the formula's vars as `{name}`), evaluated when the formula is read.

use std::collections::BTreeMap;

/// The values from start to end, both included; empty when end is below start.
pub(super) fn evaluate(range: &str, vars: &BTreeMap<String, String>) -> Result<Vec<i64>, String> {
    let (start, end) = range.split_once("..").ok_or("a range is `start..end`")?;
    let start = expression(start, vars)?;
    let end = expression(end, vars)?;
    if end.saturating_sub(start) > 10_000 {
        return Err(format!("{start}..{end} is too long"));
    }
    Ok((start..=end).collect())
}

fn expression(text: &str, vars: &BTreeMap<String, String>) -> Result<i64, String> {
    let mut p = Parser {
        text: text.as_bytes(),
        at: 0,
        vars,
    };
    let value = p.sum()?;
    p.blanks();
    match p.text.get(p.at) {
        None => Ok(value),
        Some(&c) => Err(format!("unexpected `{}` in `{}`", c as char, text.trim())),
    }
}

/// Recursive descent over `sum := product (('+'|'-') product)*`,
/// `product := power (('*'|'/') power)*`, `power := unary ('^' power)?`,
/// `unary := '-' unary | atom`, `atom := integer | '{' name '}' | '(' sum ')'`.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    vars: &'a BTreeMap<String, String>,
}

impl Parser<'_> {
    fn blanks(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.blanks();
        let hit = self.text.get(self.at) == Some(&c);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn sum(&mut self) -> Result<i64, String> {
        let mut value = self.product()?;
        loop {
            if self.eat(b'+') {
                value = value.checked_add(self.product()?).ok_or(OVERFLOW)?;
            } else if self.eat(b'-') {
                value = value.checked_sub(self.product()?).ok_or(OVERFLOW)?;
            } else {
                return Ok(value);
            }
        }
    }

    fn product(&mut self) -> Result<i64, String> {
        let mut value = self.power()?;
        loop {
            if self.eat(b'*') {
                value = value.checked_mul(self.power()?).ok_or(OVERFLOW)?;
            } else if self.eat(b'/') {
                let divisor = self.power()?;
                value = value.checked_div(divisor).ok_or("division by zero")?;
            } else {
                return Ok(value);
            }
        }
    }

    fn power(&mut self) -> Result<i64, String> {
        let base = self.unary()?;
        if !self.eat(b'^') {
            return Ok(base);
        }
        let exponent = self.power()?;
        let exponent = u32::try_from(exponent).map_err(|_| "a negative or huge exponent")?;
        base.checked_pow(exponent).ok_or_else(|| OVERFLOW.into())
    }

    fn unary(&mut self) -> Result<i64, String> {
        if self.eat(b'-') {
            return self.unary()?.checked_neg().ok_or_else(|| OVERFLOW.into());
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<i64, String> {
        if self.eat(b'(') {
            let value = self.sum()?;
            return if self.eat(b')') {
                Ok(value)
            } else {
                Err("a `(` is not closed".into())
            };
        }
        if self.eat(b'{') {
            let start = self.at;
            while self.text.get(self.at).is_some_and(|&c| c != b'}') {
                self.at += 1;
            }
            let name = String::from_utf8_lossy(&self.text[start..self.at])
                .trim()
                .to_owned();
            if !self.eat(b'}') {
                return Err(format!("`{{{name}` is not closed"));
            }
            let value = self
                .vars
                .get(&name)
                .ok_or_else(|| format!("var `{name}` has no default to count with"))?;
            return value
                .trim()
                .parse()
                .map_err(|_| format!("var `{name}` is `{value}`, not an integer"));
        }
        self.blanks();
        let start = self.at;
        while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        if start == self.at {
            return Err(match self.text.get(self.at) {
                Some(&c) => format!("expected a number, not `{}`", c as char),
                None => "expected a number".into(),
            });
        }
        String::from_utf8_lossy(&self.text[start..self.at])
            .parse()
            .map_err(|_| OVERFLOW.into())
    }
}

const OVERFLOW: &str = "the number is too large";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_evaluate_with_precedence_vars_and_both_ends() {
        let vars = BTreeMap::from([("disks".to_string(), "3".to_string())]);
        let cases: &[(&str, Result<Vec<i64>, &str>)] = &[
            ("1..3", Ok(vec![1, 2, 3])),
            ("1..2^{disks}-1", Ok((1..=7).collect())),
            ("(1+1)*2..2*3-1", Ok(vec![4, 5])),
            ("2^3^0..2", Ok(vec![2])),
            ("-1..1", Ok(vec![-1, 0, 1])),
            ("3..1", Ok(vec![])),
            ("1..{nope}", Err("var `nope` has no default")),
            ("1..4/0", Err("division by zero")),
            ("1..(2", Err("`(` is not closed")),
            ("1 2", Err("a range is `start..end`")),
            ("1..2x", Err("unexpected `x`")),
            ("1..99999999", Err("too long")),
        ];
        for (range, want) in cases {
            match (evaluate(range, &vars), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{range}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{range}: {got}"),
                (got, want) => panic!("{range}: got {got:?}, want {want:?}"),
            }
        }
    }
}
