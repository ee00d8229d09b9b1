//! Text for a POSIX shell.

/// `text` as one single-quoted shell word: the shell reads it as it is, whatever it holds.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quote_inside_stays_one_word() {
        assert_eq!(super::quote("it's; rm -rf x"), r"'it'\''s; rm -rf x'");
        assert_eq!(super::quote(""), "''");
    }
}
