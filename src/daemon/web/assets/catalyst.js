// The dashboard's live part. Pages follow the journal's events from /events (Server-Sent
// Events); when one arrives, the page is fetched again and each part marked `data-live` that
// changed is swapped in (a part being typed in is left alone), so counters, rows, steps and
// the diff move without a reload. The board lists the events; a bead's page shows the running
// attempt's output as it is written. Every text goes in as text, never as markup.
(function () {
  "use strict";
  const body = document.body;
  const bead = body.dataset.bead;
  const feed = document.getElementById("feed");
  const output = document.getElementById("output");
  // The page's own address. After a refused form the browser shows the form's, which a
  // refresh (or a reload) must not post again.
  const posted = /^\/actions\/|^\/beads\/[^/]+\/[a-z]+$/.test(window.location.pathname);
  const page = posted ? body.dataset.page : window.location.pathname + window.location.search;
  if (posted) window.history.replaceState(null, "", page);

  // Whether a part holds what a person is doing: focus, or text typed in a field.
  function busy(part) {
    if (part.contains(document.activeElement) && document.activeElement !== document.body) return true;
    return Array.from(part.querySelectorAll("input[type=text], textarea")).some(function (f) {
      return f.value !== "";
    });
  }

  // Times as people read them: how long ago, in words, with the local date and time on
  // hover. The page carries them as UTC (`<time datetime>`).
  function localTimes(root) {
    const now = Date.now();
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      const at = new Date(t.getAttribute("datetime"));
      if (isNaN(at)) return;
      const secs = Math.round((now - at.getTime()) / 1000);
      let text;
      if (secs < 45) text = "just now";
      else if (secs < 90 * 60) text = Math.round(secs / 60) + " min ago";
      else if (secs < 36 * 3600) text = Math.round(secs / 3600) + " h ago";
      else text = at.toLocaleDateString();
      t.textContent = text;
      t.title = at.toLocaleString();
    });
  }
  localTimes(document);

  // A form that asks first (cancelling a bead) goes only once the person confirms.
  document.addEventListener("submit", function (e) {
    const question = e.target.dataset && e.target.dataset.confirm;
    if (question && !window.confirm(question)) e.preventDefault();
  });

  let refreshing = false;
  let again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch(page, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html");
        localTimes(fresh);
        document.querySelectorAll("[data-live]").forEach(function (part) {
          const next = fresh.querySelector('[data-live="' + part.dataset.live + '"]');
          if (!next || next.outerHTML === part.outerHTML || busy(part)) return;
          part.replaceWith(document.importNode(next, true));
        });
        follow();
      })
      .catch(function () {})
      .finally(function () {
        refreshing = false;
        if (again) { again = false; setTimeout(refresh, 250); }
      });
  }

  // At most one refresh per quarter second, the last event always followed by one.
  let timer = null;
  function soon() {
    if (timer === null) timer = setTimeout(function () { timer = null; refresh(); }, 250);
  }

  function describe(event) {
    const about = event.id || event.step || (event.bead && (event.bead.id || event.bead)) || "";
    return "#" + event.seq + " " + event.type + " " + about +
      (event.status ? " " + event.status : "") + (event.summary ? ": " + event.summary : "");
  }

  const start = Number(body.dataset.seq || 0);
  // The last event seen: a stream opened again (the page came back from the browser's
  // back/forward cache) goes on from there.
  let seen = Math.max(0, start - (feed ? 20 : 0));
  let source = null;
  function listen() {
    let url = "/events?since=" + seen;
    if (bead) url += "&bead=" + encodeURIComponent(bead);
    source = new EventSource(url);
    source.onmessage = function (message) {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.seq <= seen) return;
      seen = event.seq;
      if (feed) {
        const item = document.createElement("li");
        item.textContent = describe(event);
        feed.insertBefore(item, feed.firstChild);
        while (feed.children.length > 200) feed.removeChild(feed.lastChild);
      }
      if (event.seq > start && event.type !== "agent.tool") soon();
    };
  }
  listen();

  // A page kept in the back/forward cache would keep its streams open, and a browser has six
  // connections per host: after a few visits the next page waited for one. Streams close when
  // the page is hidden and open again if it is shown again.
  window.addEventListener("pagehide", function () {
    if (source) { source.close(); source = null; }
    if (tail) { tail.close(); tail = null; }
    tailing = "";
  });
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) return;
    if (!source) listen();
    refresh();
  });

  // The running attempt's output, restarted when a refresh shows another attempt running.
  let tail = null;
  let tailing = "";
  function follow() {
    if (!output) return;
    const part = document.querySelector('[data-live="running"]');
    const run = part ? part.dataset.run : "";
    if (run === tailing) return;
    tailing = run;
    if (tail) { tail.close(); tail = null; }
    // Once the attempt is over its last output stays until another one starts.
    if (run === "") {
      if (output.textContent === "") output.hidden = true;
      return;
    }
    output.hidden = false;
    output.textContent = "";
    tail = new EventSource("/beads/" + encodeURIComponent(bead) + "/output");
    tail.addEventListener("output", function (message) {
      const atEnd = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
      output.appendChild(document.createTextNode(message.data + "\n"));
      if (atEnd) output.scrollTop = output.scrollHeight;
    });
    tail.addEventListener("end", function () { tail.close(); tail = null; });
  }
  follow();
})();
