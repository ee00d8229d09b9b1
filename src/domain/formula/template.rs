//! Gas Town's Go-template actions in step text: `{{if .x}}…{{else}}…{{end}}`, `{{.x}}`, trim
//! markers (`{{- … -}}`), and the ones catalyst passes through (`{{range …}}`, `{{with …}}`).
//!
//! Gas Town renders a step's description with Go's `text/template` and the molecule's vars.
//! catalyst renders the simple part of that language at pour time, with the bead's values: a
//! var's value (`{{.x}}`), a choice on a var's truthiness (`{{if .x}}`, `{{if not .x}}`,
//! `{{if eq .x "v"}}`, `{{if ne .x "v"}}`, `{{else if …}}`, `{{else}}`, `{{end}}`) and the
//! trim markers. A var is true, as in Go, when its value is set and not empty. Anything else
//! (`{{range}}`, `{{with}}`, pipelines, fields of fields) is passed through verbatim, body and
//! `{{end}}` included, so the agent reads what the author wrote; loading warns of it once per
//! formula. Plain `{{name}}` placeholders are beads' and keep their strict rule
//! ([`super::vars`]); they are substituted in the text around the actions.
//!
//! Only titles, descriptions and notes are rendered: in a gate's `run` every action is refused,
//! so a shell never runs a command whose words depend on a branch the author did not quote.

use std::collections::BTreeMap;

use super::vars::substitute;

/// One `{{…}}` action of a text, as read.
#[derive(Clone, Debug, PartialEq)]
enum Action {
    /// `{{.name}}`.
    Var(String),
    If(Cond),
    ElseIf(Cond),
    Else,
    End,
    /// `{{range …}}`, `{{with …}}`, `{{block …}}`: a block catalyst does not render.
    Block,
    /// Any other action (`{{template …}}`, `{{.a.b}}`, `{{printf …}}`), kept as written.
    Other,
}

/// A condition of `{{if}}` catalyst can decide.
#[derive(Clone, Debug, PartialEq)]
enum Cond {
    Truthy(String),
    Not(String),
    Eq(String, String),
    Ne(String, String),
    /// Not one of the above: the `if` block is passed through.
    Unknown,
}

impl Cond {
    fn holds(&self, values: &BTreeMap<String, String>) -> bool {
        let value = |name: &String| values.get(name).map_or("", String::as_str);
        match self {
            Cond::Truthy(n) => !value(n).is_empty(),
            Cond::Not(n) => value(n).is_empty(),
            Cond::Eq(n, v) => value(n) == v,
            Cond::Ne(n, v) => value(n) != v,
            Cond::Unknown => false,
        }
    }

    fn var(&self) -> Option<&str> {
        match self {
            Cond::Truthy(n) | Cond::Not(n) | Cond::Eq(n, _) | Cond::Ne(n, _) => Some(n),
            Cond::Unknown => None,
        }
    }
}

/// A piece of a text: plain text, or an action with where it stands.
#[derive(Clone, Debug)]
struct Token<'a> {
    /// The action as written, `{{` to `}}`; for plain text, the text.
    raw: &'a str,
    action: Option<Action>,
    /// `{{-`: the text before loses its trailing white space.
    trim_before: bool,
    /// `-}}`: the text after loses its leading white space.
    trim_after: bool,
}

/// What a text's actions are, for the checks.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Scan {
    /// Whether the text has any Go-template action.
    pub actions: bool,
    /// Whether it has control actions (`if`, `else`, `end`, `range`, `with`, …), which choose
    /// what the text says.
    pub control: bool,
    /// The vars the rendered actions read (`.name`), left to right.
    pub vars: Vec<String>,
    /// The actions passed through verbatim, as written.
    pub passed: Vec<String>,
    /// What is wrong with the structure (an `{{end}}` without its `{{if}}`, …).
    pub errors: Vec<String>,
}

/// The actions of `text`: `{{` then an optional `-` and white space, then `.`, a keyword or
/// anything but a plain placeholder's `name}}`.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut i = 0;
    while let Some(offset) = text[i..].find("{{") {
        let start = i + offset;
        let Some(len) = text[start..].find("}}") else {
            break;
        };
        let end = start + len + 2;
        let raw = &text[start..end];
        match parse_action(raw) {
            Some((action, trim_before, trim_after)) => {
                if start > last {
                    out.push(plain(&text[last..start]));
                }
                out.push(Token {
                    raw,
                    action: Some(action),
                    trim_before,
                    trim_after,
                });
                last = end;
                i = end;
            }
            None => i = start + 2,
        }
    }
    if last < text.len() {
        out.push(plain(&text[last..]));
    }
    out
}

fn plain(raw: &str) -> Token<'_> {
    Token {
        raw,
        action: None,
        trim_before: false,
        trim_after: false,
    }
}

/// The action `{{…}}` holds, with its trim markers; `None` for a plain placeholder
/// (`{{name}}`) or text that is none of Go's (`{{ name }}` stays text, as beads leaves it).
fn parse_action(raw: &str) -> Option<(Action, bool, bool)> {
    let inner = &raw[2..raw.len() - 2];
    let trim_before = inner.starts_with("- ") || inner.starts_with("-\t");
    let trim_after = inner.ends_with(" -") || inner.ends_with("\t-");
    let mut body = inner;
    if trim_before {
        body = &body[1..];
    }
    if trim_after {
        body = &body[..body.len() - 1];
    }
    let body = body.trim();
    let words: Vec<&str> = body.split_whitespace().collect();
    let first = *words.first()?;
    let action = match first {
        "else" if words.len() == 1 => Action::Else,
        "else" if words.get(1) == Some(&"if") => Action::ElseIf(cond(&words[2..])),
        "end" if words.len() == 1 => Action::End,
        "if" => Action::If(cond(&words[1..])),
        "range" | "with" | "block" => Action::Block,
        _ if first.starts_with('.') && words.len() == 1 => match field(first) {
            Some(name) => Action::Var(name.to_owned()),
            None => Action::Other,
        },
        "break" | "continue" | "template" | "define" | "printf" | "print" | "len" | "index"
        | "not" | "and" | "or" | "eq" | "ne" => Action::Other,
        _ if first.starts_with('.') || first.starts_with('$') => Action::Other,
        // `{{name}}` is a placeholder (beads'); `{{ name }}` and the like are text.
        _ => return None,
    };
    Some((action, trim_before, trim_after))
}

/// `.name` as a var name; `None` for `.` or `.a.b`.
fn field(word: &str) -> Option<&str> {
    let name = word.strip_prefix('.')?;
    super::vars::is_var_name(name).then_some(name)
}

fn literal(word: &str) -> Option<String> {
    let unquoted = word
        .strip_prefix('"')
        .and_then(|w| w.strip_suffix('"'))
        .or_else(|| word.strip_prefix('`').and_then(|w| w.strip_suffix('`')))?;
    (!unquoted.contains('"') && !unquoted.contains('\\')).then(|| unquoted.to_owned())
}

fn cond(words: &[&str]) -> Cond {
    match words {
        [v] => field(v).map_or(Cond::Unknown, |n| Cond::Truthy(n.to_owned())),
        ["not", v] => field(v).map_or(Cond::Unknown, |n| Cond::Not(n.to_owned())),
        [op @ ("eq" | "ne"), v, lit] => match (field(v), literal(lit)) {
            (Some(n), Some(lit)) if *op == "eq" => Cond::Eq(n.to_owned(), lit),
            (Some(n), Some(lit)) => Cond::Ne(n.to_owned(), lit),
            _ => Cond::Unknown,
        },
        _ => Cond::Unknown,
    }
}

/// A text read as a tree.
#[derive(Clone, Debug)]
enum Node<'a> {
    Text(&'a str),
    Var(String),
    /// `(condition, body)` for `if` and each `else if`, then the `else` body.
    If(Vec<(Cond, Vec<Node<'a>>)>, Vec<Node<'a>>),
    /// Kept as written, from its first token to its last.
    Verbatim(Vec<Token<'a>>),
}

/// Reads the tokens into nodes until an `{{else}}`, `{{else if}}` or `{{end}}` at this level,
/// which is returned (with its index) and not consumed.
struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    at: usize,
    scan: Scan,
}

impl<'a> Parser<'a> {
    fn nodes(&mut self, depth: usize) -> Vec<Node<'a>> {
        let mut nodes = Vec::new();
        while let Some(token) = self.tokens.get(self.at).cloned() {
            match &token.action {
                None => {
                    self.at += 1;
                    nodes.push(Node::Text(token.raw));
                }
                Some(Action::Var(name)) => {
                    self.at += 1;
                    self.scan.vars.push(name.clone());
                    nodes.push(Node::Var(name.clone()));
                }
                Some(Action::Other) => {
                    self.at += 1;
                    self.scan.passed.push(token.raw.to_owned());
                    nodes.push(Node::Verbatim(vec![token]));
                }
                Some(Action::Block) => {
                    self.scan.passed.push(token.raw.to_owned());
                    nodes.push(Node::Verbatim(self.block()));
                }
                Some(Action::If(c)) if *c == Cond::Unknown => {
                    self.scan.passed.push(token.raw.to_owned());
                    nodes.push(Node::Verbatim(self.block()));
                }
                Some(Action::If(c)) => {
                    self.at += 1;
                    nodes.push(self.if_chain(c.clone(), depth));
                }
                Some(Action::Else | Action::ElseIf(_) | Action::End) => {
                    if depth == 0 {
                        self.scan
                            .errors
                            .push(format!("`{}` without its `{{{{if}}}}`", token.raw));
                        self.at += 1;
                        continue;
                    }
                    return nodes;
                }
            }
        }
        nodes
    }

    /// After `{{if c}}`: the branches up to the matching `{{end}}`.
    fn if_chain(&mut self, first: Cond, depth: usize) -> Node<'a> {
        let mut branches = Vec::new();
        let mut cond = Some(first);
        loop {
            let body = self.nodes(depth + 1);
            let next = self.tokens.get(self.at).and_then(|t| t.action.clone());
            match (cond.take(), next) {
                (Some(c), Some(Action::ElseIf(next))) => {
                    if let Some(name) = c.var() {
                        self.scan.vars.push(name.to_owned());
                    }
                    branches.push((c, body));
                    cond = Some(next);
                    self.at += 1;
                }
                (Some(c), Some(Action::Else)) => {
                    if let Some(name) = c.var() {
                        self.scan.vars.push(name.to_owned());
                    }
                    branches.push((c, body));
                    self.at += 1;
                }
                (Some(c), Some(Action::End)) => {
                    if let Some(name) = c.var() {
                        self.scan.vars.push(name.to_owned());
                    }
                    branches.push((c, body));
                    self.at += 1;
                    return Node::If(branches, Vec::new());
                }
                (None, Some(Action::End)) => {
                    self.at += 1;
                    return Node::If(branches, body);
                }
                (None, Some(_)) => {
                    self.scan
                        .errors
                        .push("`{{else}}` after the `{{else}}` of its `{{if}}`".into());
                    self.at += 1;
                    return Node::If(branches, body);
                }
                (c, _) => {
                    self.scan
                        .errors
                        .push("an `{{if}}` without its `{{end}}`".into());
                    if let Some(c) = c {
                        branches.push((c, body));
                    }
                    return Node::If(branches, Vec::new());
                }
            }
        }
    }

    /// A block passed through: its opening token up to its matching `{{end}}`, all verbatim.
    fn block(&mut self) -> Vec<Token<'a>> {
        let mut depth = 0usize;
        let mut out = Vec::new();
        while let Some(token) = self.tokens.get(self.at).cloned() {
            self.at += 1;
            match token.action {
                Some(Action::If(_) | Action::Block) => depth += 1,
                Some(Action::End) => depth = depth.saturating_sub(1),
                _ => {}
            }
            out.push(token);
            if depth == 0 {
                return out;
            }
        }
        self.scan
            .errors
            .push("a block without its `{{end}}`".into());
        out
    }
}

fn parse(text: &str) -> (Vec<Node<'_>>, Scan) {
    let tokens = tokens(text);
    let actions = tokens.iter().any(|t| t.action.is_some());
    let control = tokens.iter().any(|t| {
        matches!(
            t.action,
            Some(Action::If(_) | Action::ElseIf(_) | Action::Else | Action::End | Action::Block)
        )
    });
    let mut parser = Parser {
        tokens,
        at: 0,
        scan: Scan {
            actions,
            control,
            ..Scan::default()
        },
    };
    let nodes = parser.nodes(0);
    (nodes, parser.scan)
}

/// What `text`'s template actions are (for the checks).
pub(crate) fn scan(text: &str) -> Scan {
    parse(text).1
}

/// `text` with its actions rendered for `values` and its `{{name}}` placeholders substituted,
/// in one pass: a value is never read as a template again.
///
/// A text whose actions do not read as a template (an `{{else}}` of Handlebars' `{{#if}}`, say)
/// is not rendered: its placeholders are substituted and its actions kept as written.
pub(crate) fn render(text: &str, values: &BTreeMap<String, String>) -> String {
    // Trim markers change white space, never the actions, so the trimmed text tells whether
    // there are actions and whether they read, in the one parse.
    let trimmed = trimmed(text);
    let (nodes, scanned) = parse(&trimmed);
    if !scanned.actions || !scanned.errors.is_empty() {
        return substitute(text, values);
    }
    let mut out = String::with_capacity(trimmed.len());
    emit(&nodes, values, &mut out);
    out
}

fn emit(nodes: &[Node<'_>], values: &BTreeMap<String, String>, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(&substitute(text, values)),
            Node::Var(name) => out.push_str(values.get(name).map_or("", String::as_str)),
            Node::If(branches, otherwise) => {
                let body = branches
                    .iter()
                    .find(|(c, _)| c.holds(values))
                    .map_or(otherwise, |(_, body)| body);
                emit(body, values, out);
            }
            Node::Verbatim(tokens) => {
                for token in tokens {
                    out.push_str(token.raw);
                }
            }
        }
    }
}

/// Applies the trim markers of `text` to the text around them before it is read into nodes:
/// `{{- ` takes the white space before it, ` -}}` the white space after.
fn trimmed(text: &str) -> String {
    let tokens = tokens(text);
    let mut out = String::with_capacity(text.len());
    let mut trim_next = false;
    for (i, token) in tokens.iter().enumerate() {
        match &token.action {
            None => {
                let mut t = token.raw;
                if std::mem::take(&mut trim_next) {
                    t = t.trim_start();
                }
                if tokens.get(i + 1).is_some_and(|n| n.trim_before) {
                    t = t.trim_end();
                }
                out.push_str(t);
            }
            Some(_) => {
                out.push_str(&strip_markers(token.raw));
                trim_next = token.trim_after;
            }
        }
    }
    out
}

/// `{{- x -}}` as `{{x}}`'s action without its trim markers (`{{x}}` stays as written).
fn strip_markers(raw: &str) -> String {
    let mut inner = &raw[2..raw.len() - 2];
    if inner.starts_with("- ") || inner.starts_with("-\t") {
        inner = &inner[1..];
    }
    if inner.ends_with(" -") || inner.ends_with("\t-") {
        inner = &inner[..inner.len() - 1];
    }
    format!("{{{{{}}}}}", inner.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::formula::vars::tests::values;

    fn go(text: &str, pairs: &[(&str, &str)]) -> String {
        render(text, &values(pairs))
    }

    /// A text, the values, what it renders to.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

    #[test]
    fn renders_if_else_and_fields_like_go_templates() {
        let cases: &[Case<'_>] = &[
            (
                "{{if .pr}}PR {{.pr}}{{else}}no PR{{end}}",
                &[("pr", "7")],
                "PR 7",
            ),
            (
                "{{if .pr}}PR {{.pr}}{{else}}no PR{{end}}",
                &[("pr", "")],
                "no PR",
            ),
            ("{{if .pr}}PR{{end}}.", &[], "."),
            ("{{if not .pr}}none{{end}}", &[], "none"),
            (
                "{{if eq .mode \"fast\"}}F{{else if eq .mode \"slow\"}}S{{else}}?{{end}}",
                &[("mode", "slow")],
                "S",
            ),
            (
                "{{if ne .mode \"fast\"}}careful{{end}}",
                &[("mode", "x")],
                "careful",
            ),
            ("{{ .name }} and {{name}}", &[("name", "n")], "n and n"),
            ("a  {{- if .x -}}  b  {{- end}}  c", &[("x", "1")], "ab  c"),
            (
                "{{if .a}}{{if .b}}ab{{else}}a{{end}}{{end}}",
                &[("a", "1")],
                "a",
            ),
            // Values are not templates.
            ("{{.v}}", &[("v", "{{.w}} {{w}}")], "{{.w}} {{w}}"),
            // `{{ name }}` is text, as beads leaves it.
            ("{{ name }}", &[("name", "n")], "{{ name }}"),
        ];
        for (text, vals, want) in cases {
            assert_eq!(go(text, vals), *want, "{text}");
        }
    }

    #[test]
    fn range_with_and_unknown_actions_pass_through_verbatim() {
        let text = "{{range .items}}- {{.}}\n{{end}}{{if .x}}x{{end}}{{template \"t\"}}{{if and .a .b}}ab{{end}}";
        assert_eq!(
            go(text, &[("x", "1")]),
            "{{range .items}}- {{.}}\n{{end}}x{{template \"t\"}}{{if and .a .b}}ab{{end}}"
        );
        let scan = scan(text);
        assert_eq!(
            scan.passed,
            ["{{range .items}}", "{{template \"t\"}}", "{{if and .a .b}}"]
        );
        assert_eq!(scan.vars, ["x"]);
        assert!(scan.errors.is_empty());
    }

    #[test]
    fn a_broken_structure_is_reported() {
        for (text, want) in [
            ("{{end}}", "`{{end}}` without its `{{if}}`"),
            ("{{else}}", "`{{else}}` without its `{{if}}`"),
            ("{{if .x}}a", "an `{{if}}` without its `{{end}}`"),
            ("{{range .x}}a", "a block without its `{{end}}`"),
        ] {
            assert_eq!(scan(text).errors, [want], "{text}");
        }
        assert!(!scan("{{a}} {{ a }}").actions);
    }
}
