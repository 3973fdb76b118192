// jetledger console: pages marked data-live read their main again every
// few seconds, so rows and sites that change or come and go show without
// a reload. Paused while the tab is hidden or a field has focus.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.hasAttribute("data-live")) return;
  var every = 5000;
  var note = document.createElement("p");
  note.className = "live-note";
  note.id = "live-note";
  main.parentNode.insertBefore(note, main.nextSibling);
  function tick() {
    var busy = document.activeElement && /INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName);
    if (document.hidden || busy) return setTimeout(tick, every);
    fetch(location.href, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { location.reload(); throw new Error("signed out"); }
        if (!r.ok) throw new Error(r.status);
        return r.text();
      })
      .then(function (html) {
        if (html !== main.innerHTML) main.innerHTML = html;
        note.textContent = "Updated " + new Date().toLocaleTimeString();
      })
      .catch(function (e) { note.textContent = "Could not update (" + e.message + "): showing what was read last"; })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
