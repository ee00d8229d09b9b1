//! A stat and a unified patch (`ctl diff`), painted as `git diff` paints them.

use super::style::{Paint, BOLD, CYAN, GREEN, RED};

/// The stat, a blank line, then the patch; on a terminal, file headers bold, hunk headers cyan,
/// added lines green and removed lines red.
pub fn render_diff(stat: &str, patch: &str, paint: Paint) -> String {
    let mut out = String::new();
    for line in stat.lines() {
        out.push_str(&stat_line(line, paint));
        out.push('\n');
    }
    if !stat.is_empty() && !patch.is_empty() {
        out.push('\n');
    }
    let mut in_header = false;
    for line in patch.lines() {
        // A file's header runs from `diff --git` to its first hunk; `---`/`+++` in there are
        // file names, not removed or added lines.
        if line.starts_with("diff --git ") {
            in_header = true;
        } else if line.starts_with("@@") {
            in_header = false;
        }
        let style = if in_header {
            BOLD
        } else if line.starts_with("@@") {
            CYAN
        } else if line.starts_with('+') {
            GREEN
        } else if line.starts_with('-') {
            RED
        } else {
            super::style::PLAIN
        };
        out.push_str(&paint.paint(style, line));
        out.push('\n');
    }
    out
}

/// ` path | 3 ++-` with the pluses green and the minuses red.
fn stat_line(line: &str, paint: Paint) -> String {
    let Some((file, graph)) = line.rsplit_once('|') else {
        return line.to_owned();
    };
    let bar_start = graph.find(['+', '-']).unwrap_or(graph.len());
    let (count, bar) = graph.split_at(bar_start);
    let plus: String = bar.chars().take_while(|c| *c == '+').collect();
    let minus = &bar[plus.len()..];
    format!(
        "{file}|{count}{}{}",
        paint.paint(GREEN, &plus),
        paint.paint(RED, minus)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = " a.txt | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n";
    const PATCH: &str = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n-old\n+new\n+more\n";

    #[test]
    fn plain_text_is_the_stat_then_the_patch() {
        assert_eq!(
            render_diff(STAT, PATCH, Paint::OFF),
            format!("{STAT}\n{PATCH}")
        );
    }

    #[test]
    fn colour_follows_what_each_line_is() {
        let text = render_diff(STAT, PATCH, Paint::ON);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            " a.txt | 3 \u{1b}[32m++\u{1b}[0m\u{1b}[31m-\u{1b}[0m"
        );
        assert_eq!(lines[1], STAT.lines().nth(1).unwrap(), "the total is plain");
        assert_eq!(
            lines[5], "\u{1b}[1m--- a/a.txt\u{1b}[0m",
            "a file name, not a removal"
        );
        assert_eq!(lines[7], "\u{1b}[36m@@ -1 +1,2 @@\u{1b}[0m");
        assert_eq!(lines[8], "\u{1b}[31m-old\u{1b}[0m");
        assert_eq!(lines[9], "\u{1b}[32m+new\u{1b}[0m");
    }
}
