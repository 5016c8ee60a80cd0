// memgate inspector: progressive enhancement only; every page works without it.
"use strict";

// Forms with data-confirm ask before they submit.
document.addEventListener("submit", function (ev) {
  var msg = ev.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) {
    ev.preventDefault();
  }
});

// The user search filters as you type, from /ui/users.json.
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("user-search");
  var body = document.querySelector("#users tbody");
  if (!box || !body) {
    return;
  }
  var tenant = new URLSearchParams(location.search).get("tenant") || "";
  var timer = null;
  var seq = 0;
  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      var mine = ++seq;
      fetch(box.getAttribute("data-json") + "&q=" + encodeURIComponent(box.value), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (res) {
          if (!res || mine !== seq) {
            return;
          }
          render(res.data || []);
        })
        .catch(function () {});
    }, 200);
  });

  function cell(tr, text) {
    var td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function render(users) {
    body.textContent = "";
    if (users.length === 0) {
      var tr = document.createElement("tr");
      tr.className = "empty";
      var td = cell(tr, "No users matching \u201c" + box.value + "\u201d in this tenant.");
      td.colSpan = 4;
      body.appendChild(tr);
      return;
    }
    users.forEach(function (u) {
      var tr = document.createElement("tr");
      var td = document.createElement("td");
      var a = document.createElement("a");
      a.href = "/ui/users/" + encodeURIComponent(u.user) + "?tenant=" + encodeURIComponent(tenant);
      a.textContent = u.user;
      td.appendChild(a);
      tr.appendChild(td);
      cell(tr, String(u.conversations));
      cell(tr, String(u.messages));
      cell(tr, new Date(u.last_active).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"));
      body.appendChild(tr);
    });
  }
});
