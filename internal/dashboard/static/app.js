// oncehook dashboard: the only script (the CSP allows no inline one).
// It refreshes the overview's live counters every 5 seconds, and copies
// the setup page's intake URL.
(function () {
  "use strict";
  function refresh() {
    var cells = document.querySelectorAll("[data-live]");
    if (!cells.length) return;
    fetch(document.body.dataset.liveUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        var fmt = new Intl.NumberFormat(document.documentElement.lang || "en");
        cells.forEach(function (el) {
          var name = el.getAttribute("data-live");
          var dot = name.lastIndexOf(".");
          var src = data[name.slice(0, dot)], field = name.slice(dot + 1);
          if (src && field in src) el.textContent = fmt.format(src[field]);
        });
      })
      .catch(function () {});
  }
  // A button with data-copy copies its input's value (the setup page's
  // intake URL), and says so.
  function copy(ev) {
    var b = ev.currentTarget, el = document.getElementById(b.getAttribute("data-copy"));
    if (!el) return;
    el.select();
    var said = function () { b.textContent = b.getAttribute("data-copied"); };
    if (navigator.clipboard) navigator.clipboard.writeText(el.value).then(said, function () {});
    else if (document.execCommand("copy")) said();
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("[data-live]")) setInterval(refresh, 5000);
    document.querySelectorAll("[data-copy]").forEach(function (b) { b.addEventListener("click", copy); });
  });
})();
