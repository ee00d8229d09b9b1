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
    let mut lexer = Lexer {
        chars: command.chars().peekable(),
        tokens: Vec::new(),
        word: None,
    };
    while let Some(c) = lexer.chars.next() {
        match c {
            // Not `\r`: bash reads it as part of a word, so `ls\r#; x` runs `x`.
            ' ' | '\t' => lexer.finish(),
            '\n' => lexer.op(Op::List),
            '#' if lexer.word.is_none() => lexer.comment(),
            '\'' => lexer.single_quoted()?,
            '"' => lexer.double_quoted()?,
            '\\' => match lexer.chars.next() {
                Some('\n') | None => {}
                Some(n) => lexer.word().text.push(n),
            },
            '$' if lexer.chars.peek() == Some(&'(') => {
                lexer.chars.next();
                lexer.op(Op::Subshell);
            }
            '$' => {
                let w = lexer.word();
                w.expands = true;
                w.text.push('$');
            }
            '`' | '(' | ')' => lexer.op(Op::Subshell),
            '|' => lexer.pipe(),
            '&' => lexer.ampersand(),
            ';' => {
                lexer.eat(';');
                lexer.op(Op::List);
            }
            '>' | '<' => lexer.redirect(),
            // `{a,b}` and `{1..3}` are brace expansion: one word becomes several.
            '*' | '?' | '[' | '{' => {
                let w = lexer.word();
                w.glob = true;
                w.text.push(c);
            }
            other => lexer.word().text.push(other),
        }
    }
    lexer.finish();
    Ok(lexer.tokens)
}

/// The state of [`lex`]: the characters left, the tokens so far and the word being read.
struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    tokens: Vec<Token>,
    word: Option<Word>,
}

impl Lexer<'_> {
    /// Ends the word being read, if any.
    fn finish(&mut self) {
        if let Some(w) = self.word.take() {
            self.tokens.push(Token::Word(w));
        }
    }

    /// Ends the word being read and adds an operator.
    fn op(&mut self, op: Op) {
        self.finish();
        self.tokens.push(Token::Op(op));
    }

    /// The word being read, started if none is.
    fn word(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    /// Consumes the next character if it is `c`.
    fn eat(&mut self, c: char) -> bool {
        self.chars.next_if_eq(&c).is_some()
    }

    /// Skips a comment up to the end of its line, which still ends the command.
    fn comment(&mut self) {
        for skipped in self.chars.by_ref() {
            if skipped == '\n' {
                self.tokens.push(Token::Op(Op::List));
                break;
            }
        }
    }

    fn single_quoted(&mut self) -> Result<(), Refusal> {
        self.word();
        loop {
            match self.chars.next() {
                Some('\'') => return Ok(()),
                Some(ch) => self.word().text.push(ch),
                None => return Err("unterminated `'` quote".into()),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<(), Refusal> {
        self.word();
        loop {
            match self.chars.next() {
                Some('"') => return Ok(()),
                Some('\\') => match self.chars.next() {
                    Some(n @ ('"' | '\\' | '$' | '`')) => self.word().text.push(n),
                    Some('\n') => {}
                    Some(n) => {
                        self.word().text.push('\\');
                        self.word().text.push(n);
                    }
                    None => return Err("unterminated `\"` quote".into()),
                },
                Some(ch @ ('$' | '`')) => {
                    let w = self.word();
                    w.expands = true;
                    w.text.push(ch);
                }
                Some(ch) => self.word().text.push(ch),
                None => return Err("unterminated `\"` quote".into()),
            }
        }
    }

    /// `|` (a pipe), `||` (a list) or `|&` (a pipe with stderr).
    fn pipe(&mut self) {
        let op = match self.chars.peek() {
            Some('|') => Op::List,
            _ => Op::Pipe,
        };
        if matches!(self.chars.peek(), Some('|' | '&')) {
            self.chars.next();
        }
        self.op(op);
    }

    /// `&&` (a list), `&>` / `&>>` (a redirection) or `&` (a background job).
    fn ampersand(&mut self) {
        let op = match self.chars.peek() {
            Some('&') => Op::List,
            Some('>') => Op::Redirect,
            _ => Op::Background,
        };
        if op != Op::Background {
            self.chars.next();
        }
        if op == Op::Redirect {
            self.eat('>');
        }
        self.op(op);
    }

    /// `>`, `<` and their forms; `<(` and `>(` are process substitutions.
    fn redirect(&mut self) {
        // `2>`: the digits name a file descriptor, not a word.
        if self
            .word
            .as_ref()
            .is_some_and(|w| !w.text.is_empty() && w.text.bytes().all(|b| b.is_ascii_digit()))
        {
            self.word = None;
        }
        if self.eat('(') {
            self.op(Op::Subshell);
            return;
        }
        while matches!(self.chars.peek(), Some('>' | '<' | '&' | '|')) {
            self.chars.next();
        }
        self.op(Op::Redirect);
    }
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
