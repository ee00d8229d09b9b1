//! The `web` row: the dashboard's board on a 100,000-bead store, time to its first byte
//! (headers and page come together: the page is rendered before it is sent), against a static
//! file of the same server in the same run. `catalystd` runs as its own process, as it is
//! deployed (its allocator, without transparent huge pages), not in the benchmark's.

use std::time::{Duration, Instant};

use catalyst_testkit::workload;

use crate::{percentile, row, runtime, target, workspace_with_default};

pub fn web(quick: bool) {
    let (n, requests) = if quick { (10_000, 50) } else { (100_000, 200) };
    let port = catalyst_testkit::web::free_port();
    // Beads without a formula label and no default formula: a store to show, not work to do.
    let ws = workspace_with_default("", &format!("[web]\nlisten = \"127.0.0.1:{port}\"\n"));
    workload::write_journal(&ws.paths.state.join("journal.jsonl"), n);
    let rt = runtime();
    rt.block_on(async {
        let daemon = crate::deployed(&ws).await;
        let token = catalyst_testkit::web::token(&daemon).await;
        let http = reqwest::Client::new();
        let auth = format!("Bearer {}", token.trim());
        let first_byte = async |path: &str| {
            let start = Instant::now();
            let response = http
                .get(format!("http://127.0.0.1:{port}{path}"))
                .header("Authorization", &auth)
                .send()
                .await
                .expect("GET");
            let took = start.elapsed();
            assert!(response.status().is_success(), "{path}: {}", response.status());
            let _ = response.bytes().await.expect("body");
            took
        };
        const PAGES: [&str; 3] = ["/", "/?page=1000", "/?status=open&q=bead%201"];
        let (mut pages, mut statics) = (Vec::new(), Vec::new());
        let mut each: [Vec<Duration>; 3] = Default::default();
        // Interleaved, so both see the same machine; the first of each warms up.
        first_byte("/").await;
        first_byte("/static/catalyst.css").await;
        for i in 0..requests {
            let took = first_byte(PAGES[i % 3]).await;
            pages.push(took);
            each[i % 3].push(took);
            statics.push(first_byte("/static/catalyst.css").await);
        }
        pages.sort();
        statics.sort();
        let (p50, p99) = (percentile(&pages, 50), percentile(&pages, 99));
        let s99 = percentile(&statics, 99);
        row(
            &format!("web: the board on {n} beads, first byte p50 / p99 (first, 1000th and searched pages)"),
            format!("{p50:.2?} / {p99:.2?}"),
            &target("p99 <= 50ms", p99 <= Duration::from_millis(50)),
            &format!("a static file of the same server, p99: {s99:.2?}"),
            p99.as_secs_f64() / s99.as_secs_f64(),
        );
        let each: Vec<String> = PAGES
            .iter()
            .zip(each.iter_mut())
            .map(|(page, took)| {
                took.sort();
                format!("{page} {:.2?}", percentile(took, 99))
            })
            .collect();
        println!("  p99 by page: {}", each.join(", "));
        crate::stop(daemon).await;
    });
}
