//! Colour for people at a terminal. It is on when stdout is a terminal and `NO_COLOR` is unset
//! or empty (no-color.org), and off otherwise, so pipes and files get plain text. Cells are
//! padded before they are painted: escape codes never count as width.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Effects, Style};

/// Whether to paint, decided once per command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Plain text.
    pub const OFF: Paint = Paint { on: false };
    /// Colour whatever the output is (tests of the colours).
    pub const ON: Paint = Paint { on: true };

    /// For stdout: colour on a terminal, unless `NO_COLOR` says otherwise.
    pub fn for_stdout() -> Paint {
        Paint::decide(
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }

    /// Colour on a terminal, unless `NO_COLOR` is set to something non-empty.
    pub fn decide(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> Paint {
        Paint {
            on: terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    pub fn is_on(self) -> bool {
        self.on
    }

    /// `text` in `style`, or as it is when painting is off.
    pub fn paint(self, style: Style, text: &str) -> String {
        if self.on && style != Style::new() && !text.is_empty() {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }
}

/// A foreground colour.
pub const fn fg(color: AnsiColor) -> Style {
    Style::new().fg_color(Some(anstyle::Color::Ansi(color)))
}

pub const PLAIN: Style = Style::new();
pub const BOLD: Style = Style::new().effects(Effects::BOLD);
pub const DIM: Style = Style::new().effects(Effects::DIMMED);
pub const RED: Style = fg(AnsiColor::Red);
pub const GREEN: Style = fg(AnsiColor::Green);
pub const YELLOW: Style = fg(AnsiColor::Yellow);
pub const CYAN: Style = fg(AnsiColor::Cyan);
pub const MAGENTA: Style = fg(AnsiColor::Magenta);

/// The style of a status as `list` and `show` print it (`cancelled` included).
pub fn status(label: &str) -> Style {
    match label {
        "in_progress" => CYAN,
        "blocked" => RED,
        "closed" => GREEN,
        "cancelled" => MAGENTA,
        "deferred" => DIM,
        _ => PLAIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(Paint::decide(true, None).is_on());
        assert!(
            Paint::decide(true, Some(OsStr::new(""))).is_on(),
            "an empty NO_COLOR is unset"
        );
        assert!(!Paint::decide(true, Some(OsStr::new("1"))).is_on());
        assert!(!Paint::decide(false, None).is_on());
    }

    #[test]
    fn painting_wraps_the_text_in_escape_codes_only_when_on() {
        assert_eq!(Paint::OFF.paint(RED, "x"), "x");
        assert_eq!(Paint::ON.paint(RED, "x"), "\u{1b}[31mx\u{1b}[0m");
        assert_eq!(Paint::ON.paint(PLAIN, "x"), "x");
    }
}
