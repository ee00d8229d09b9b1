//! A small shell lexer: enough of `sh`'s quoting and operators to split a command line into
//! simple commands and see what the policy must refuse (redirections, substitutions, globs),
//! without running anything.

use super::Refusal;

/// One shell word, unquoted, with what the checks need to know about how it was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Word {
    pub text: String,
    /// An unquoted `*`, `?` or `[`: the shell would expand it to file names.
    pub glob: bool,
    /// A `$` or backtick outside single quotes: the shell would substitute something.
    pub expands: bool,
}

/// The operators the checks tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// `;`, `&&`, `||` or a newline: the next simple command starts.
    List,
    /// `|` (or `|&`).
    Pipe,
    /// A lone `&`.
    Background,
    /// `>`, `>>`, `<`, `<<`, `>&`, `&>`, …: the next word is a file.
    Redirect,
    /// `(`, `)`, `$(`, a backtick, `<(`, `>(`: a subshell or a substitution.
    Subshell,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Word(Word),
    Op(Op),
}

/// Splits a command line into words and operators, removing quotes. Fails only on an
/// unterminated quote.
pub(super) fn lex(command: &str) -> Result<Vec<Token>, Refusal> {
    fn finish(word: &mut Option<Word>, tokens: &mut Vec<Token>) {
        if let Some(w) = word.take() {
            tokens.push(Token::Word(w));
        }
    }
    let mut tokens = Vec::new();
    let mut word: Option<Word> = None;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' => finish(&mut word, &mut tokens),
            '\n' => {
                finish(&mut word, &mut tokens);
                tokens.push(Token::Op(Op::List));
            }
            '#' if word.is_none() => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        tokens.push(Token::Op(Op::List));
                        break;
                    }
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(Word::default);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.text.push(ch),
                        None => return Err("unterminated `'` quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(Word::default);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => w.text.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                w.text.push('\\');
                                w.text.push(n);
                            }
                            None => return Err("unterminated `\"` quote".into()),
                        },
                        Some(ch @ ('$' | '`')) => {
                            w.expands = true;
                            w.text.push(ch);
                        }
                        Some(ch) => w.text.push(ch),
                        None => return Err("unterminated `\"` quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => word.get_or_insert_with(Word::default).text.push(n),
            },
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                finish(&mut word, &mut tokens);
                tokens.push(Token::Op(Op::Subshell));
            }
            '$' => {
                let w = word.get_or_insert_with(Word::default);
                w.expands = true;
                w.text.push('$');
            }
            '`' | '(' | ')' => {
                finish(&mut word, &mut tokens);
                tokens.push(Token::Op(Op::Subshell));
            }
            '|' => {
                finish(&mut word, &mut tokens);
                let op = match chars.peek() {
                    Some('|') => Op::List,
                    _ => Op::Pipe,
                };
                if matches!(chars.peek(), Some('|' | '&')) {
                    chars.next();
                }
                tokens.push(Token::Op(op));
            }
            '&' => {
                finish(&mut word, &mut tokens);
                let op = match chars.peek() {
                    Some('&') => Op::List,
                    Some('>') => Op::Redirect,
                    _ => Op::Background,
                };
                if op != Op::Background {
                    chars.next();
                }
                if op == Op::Redirect && chars.peek() == Some(&'>') {
                    chars.next();
                }
                tokens.push(Token::Op(op));
            }
            ';' => {
                finish(&mut word, &mut tokens);
                if chars.peek() == Some(&';') {
                    chars.next();
                }
                tokens.push(Token::Op(Op::List));
            }
            '>' | '<' => {
                // `2>`: the digits name a file descriptor, not a word.
                if word.as_ref().is_some_and(|w| {
                    !w.text.is_empty() && w.text.bytes().all(|b| b.is_ascii_digit())
                }) {
                    word = None;
                } else {
                    finish(&mut word, &mut tokens);
                }
                if chars.peek() == Some(&'(') {
                    chars.next();
                    tokens.push(Token::Op(Op::Subshell));
                    continue;
                }
                while matches!(chars.peek(), Some('>' | '<' | '&' | '|')) {
                    chars.next();
                }
                tokens.push(Token::Op(Op::Redirect));
            }
            '*' | '?' | '[' => {
                let w = word.get_or_insert_with(Word::default);
                w.glob = true;
                w.text.push(c);
            }
            other => word.get_or_insert_with(Word::default).text.push(other),
        }
    }
    finish(&mut word, &mut tokens);
    Ok(tokens)
}

/// A simple command: its words, and whether it redirects to or from a file.
#[derive(Debug, Default)]
pub(super) struct Simple {
    pub words: Vec<Word>,
    pub redirected: bool,
}

/// Splits tokens into simple commands at every operator but redirections.
pub(super) fn simple_commands(tokens: Vec<Token>) -> Vec<Simple> {
    let mut out = vec![Simple::default()];
    for token in tokens {
        match token {
            Token::Word(w) => {
                if let Some(simple) = out.last_mut() {
                    simple.words.push(w);
                }
            }
            Token::Op(Op::Redirect) => {
                if let Some(simple) = out.last_mut() {
                    simple.redirected = true;
                }
            }
            Token::Op(_) => out.push(Simple::default()),
        }
    }
    out.retain(|s| !s.words.is_empty() || s.redirected);
    out
}
