// Live updates for the inbox: the server sends an event whenever the
// person's inbox changes (Server-Sent Events from the store's watch), and
// the list is fetched again. The page works without this script; it only
// does not update itself.
(function () {
  var list = document.getElementById("inbox-list");
  var live = document.getElementById("live");
  if (!list || !window.EventSource) return;
  var es = new EventSource("/events");
  es.addEventListener("inbox", function (e) {
    var ev = {};
    try { ev = JSON.parse(e.data); } catch (_) {}
    fetch("/inbox/list", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        list.innerHTML = html;
        if (live && ev.kind === "added") live.textContent = "New ask: " + (ev.title || ev.ask);
      })
      .catch(function () {});
  });
  es.addEventListener("synced", function () { document.body.setAttribute("data-live", "synced"); });
})();
