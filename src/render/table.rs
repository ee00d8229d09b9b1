//! Columns aligned to their widest cell. The last column is not padded (no trailing blanks),
//! and each cell is painted after it is padded, so colour does not shift the columns.

use anstyle::Style;

use super::style::{Paint, PLAIN};

/// One cell: its text and how it is painted.
pub struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    pub fn new(text: impl Into<String>, style: Style) -> Cell {
        Cell {
            text: text.into(),
            style,
        }
    }

    pub fn plain(text: impl Into<String>) -> Cell {
        Cell::new(text, PLAIN)
    }
}

/// A row of cells, or a line of its own between rows (a step's attempts under it in `show`),
/// which does not count for the widths.
enum Row {
    Cells(Vec<Cell>),
    Line(String),
}

/// Rows of cells, printed with two spaces between columns.
#[derive(Default)]
pub struct Table {
    rows: Vec<Row>,
}

impl Table {
    pub fn new() -> Table {
        Table::default()
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(Row::Cells(cells));
    }

    /// A line printed as it is, after the rows so far (it ends without a newline).
    pub fn line(&mut self, text: impl Into<String>) {
        self.rows.push(Row::Line(text.into()));
    }

    pub fn render(&self, paint: Paint) -> String {
        let mut widths: Vec<usize> = Vec::new();
        for row in &self.rows {
            if let Row::Cells(cells) = row {
                for (i, cell) in cells.iter().enumerate() {
                    let width = cell.text.chars().count();
                    match widths.get_mut(i) {
                        Some(w) => *w = (*w).max(width),
                        None => widths.push(width),
                    }
                }
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            match row {
                Row::Line(text) => out.push_str(text),
                Row::Cells(cells) => {
                    let mut line = String::new();
                    for (i, cell) in cells.iter().enumerate() {
                        if i > 0 {
                            line.push_str("  ");
                        }
                        let last = i + 1 == cells.len();
                        let pad = if last {
                            0
                        } else {
                            widths[i].saturating_sub(cell.text.chars().count())
                        };
                        line.push_str(&paint.paint(cell.style, &cell.text));
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    out.push_str(line.trim_end());
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::style::RED;
    use super::*;

    #[test]
    fn columns_line_up_whatever_the_colour() {
        let mut t = Table::new();
        t.row(vec![
            Cell::plain("ID"),
            Cell::plain("STATUS"),
            Cell::plain("TITLE"),
        ]);
        t.row(vec![
            Cell::plain("cat-gated.implement"),
            Cell::new("blocked", RED),
            Cell::plain("Implement it"),
        ]);
        t.line("    an attempt");
        t.row(vec![Cell::plain("cat-1"), Cell::plain(""), Cell::plain("")]);
        assert_eq!(
            t.render(Paint::OFF),
            "ID                   STATUS   TITLE\n\
             cat-gated.implement  blocked  Implement it\n    an attempt\n\
             cat-1\n"
        );
        let coloured = t.render(Paint::ON);
        assert!(
            coloured.contains("cat-gated.implement  \u{1b}[31mblocked\u{1b}[0m  Implement it"),
            "{coloured}"
        );
    }
}
