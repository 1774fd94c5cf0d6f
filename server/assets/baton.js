// Baton's web view: the little its pages need beyond htmx. Served from the server's own
// assets (its Content-Security-Policy allows no inline script and no eval).
"use strict";

// A live stream's events carry their revision as their id. The SSE extension reopens a
// dropped stream from its `sse-connect` URL without sending Last-Event-ID, so the URL is kept
// at the last revision seen: a reconnect resumes from there, missing nothing.
document.addEventListener("htmx:sseMessage", function (e) {
  var detail = e.detail || {};
  if (detail.type === "signed-out") {
    window.location.assign("/signin");
    return;
  }
  var source = e.target && e.target.closest ? e.target.closest("[sse-connect]") : null;
  if (!source || !/^[0-9]+$/.test(detail.lastEventId || "")) {
    return;
  }
  var url = new URL(source.getAttribute("sse-connect"), window.location.href);
  url.searchParams.set("since", detail.lastEventId);
  source.setAttribute("sse-connect", url.pathname + url.search);
});
