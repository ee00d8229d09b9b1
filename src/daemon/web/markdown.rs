//! Markdown on the dashboard: descriptions and comments are written by people and agents, so
//! they are rendered as Markdown but never trusted as markup. HTML in the text shows as text,
//! and a link or image whose address is not `http`, `https`, `mailto` or relative (a
//! `javascript:` link) loses its address.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};

/// `text` as HTML, safe to put in a page.
pub fn to_html(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe(dest_url),
            title,
            id,
        }),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: safe(dest_url),
            title,
            id,
        }),
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// `url` when it is an address a page may follow, else nothing. Browsers drop tabs, line
/// breaks and leading spaces from an address before reading its scheme, so this does too.
fn safe(url: CowStr<'_>) -> CowStr<'_> {
    let plain: String = url
        .chars()
        .filter(|c| !c.is_ascii_control() && *c != ' ')
        .collect::<String>()
        .to_ascii_lowercase();
    let scheme = plain
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| !s.contains(['/', '?', '#']));
    match scheme {
        None | Some("http" | "https" | "mailto") => url,
        Some(_) => CowStr::Borrowed(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_and_markup_in_it_does_not() {
        let html = to_html("**bold** and `code`\n\n- a\n- b\n\n<script>alert(1)</script>\n");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>a</li>"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        let inline = to_html("x <img src=x onerror=alert(1)> y");
        assert!(!inline.contains("<img"), "{inline}");
    }

    #[test]
    fn only_addresses_a_page_may_follow_keep_their_link() {
        for (text, kept) in [
            ("[a](https://example.com/x)", true),
            ("[a](docs/guide.md#part)", true),
            ("[a](mailto:me@example.com)", true),
            ("[a](javascript:alert(1))", false),
            ("[a](JavaScript:alert(1))", false),
            ("[a](<java\tscript:alert(1)>)", false),
            ("[a](data:text/html,x)", false),
            ("![i](javascript:alert(1))", false),
        ] {
            let html = to_html(text);
            let lower = html.to_ascii_lowercase();
            assert!(
                !lower.contains("href=\"java")
                    && !lower.contains("src=\"java")
                    && !lower.contains("=\"data:"),
                "{text}: {html}"
            );
            if kept {
                assert!(!html.contains("href=\"\""), "{text}: {html}");
            }
        }
    }
}
