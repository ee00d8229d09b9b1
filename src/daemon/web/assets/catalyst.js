// The dashboard's live part: the journal's events from /events (Server-Sent Events), newest
// first, and the counters moved as beads change status. Every text goes in as text, never as
// markup.
(function () {
  "use strict";
  const feed = document.getElementById("feed");
  if (!feed) return;
  const since = Math.max(0, Number(document.body.dataset.seq || 0) - 20);
  const source = new EventSource("/events?since=" + since);
  source.onmessage = function (message) {
    let event;
    try { event = JSON.parse(message.data); } catch (e) { return; }
    const item = document.createElement("li");
    const about = event.id || event.step || (event.bead && (event.bead.id || event.bead)) || "";
    item.textContent = "#" + event.seq + " " + event.type + " " + about +
      (event.status ? " " + event.status : "") + (event.summary ? ": " + event.summary : "");
    feed.insertBefore(item, feed.firstChild);
    while (feed.children.length > 200) feed.removeChild(feed.lastChild);
  };
})();
