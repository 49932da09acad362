/* Tables wider than their box (every .table-scroll, the shared wrapper of
   wide tables) say so: while there is more to see sideways, the box fades
   out at that edge (the classes table-scroll--more-start and
   table-scroll--more-end, static/css/approve.css) and a caption before it
   reads "Scroll sideways to see the whole table", which the region is
   described by, so a screen reader says it when the table is reached.
   Checked on load, as the box scrolls or changes size, and for tables htmx
   swaps in. Without JavaScript the box still scrolls, without the cue. */
(function () {
  "use strict";

  var HINT = "Scroll sideways to see the whole table.";
  var count = 0;
  var watched = typeof WeakSet === "function" ? new WeakSet() : null;
  var resized = typeof ResizeObserver === "function" ? new ResizeObserver(function (entries) {
    entries.forEach(function (entry) { update(entry.target.closest(".table-scroll") || entry.target); });
  }) : null;

  function hintOf(box) {
    // A hint an htmx swap took away (its box kept) is made again.
    var id = box.getAttribute("data-scroll-hint");
    var found = id ? document.getElementById(id) : null;
    if (found) {
      return found;
    }
    count += 1;
    id = "table-scroll-hint-" + count;
    var hint = document.createElement("p");
    hint.className = "table-scroll__hint";
    hint.id = id;
    hint.innerHTML = '<span class="table-scroll__arrows" aria-hidden="true">⇆</span> ';
    hint.appendChild(document.createTextNode(HINT));
    box.parentNode.insertBefore(hint, box);
    box.setAttribute("data-scroll-hint", id);
    var described = box.getAttribute("aria-describedby");
    box.setAttribute("aria-describedby", described ? described + " " + id : id);
    return hint;
  }

  function update(box) {
    if (!box.isConnected) {
      return;  // swapped out since it was watched
    }
    var wider = box.scrollWidth - box.clientWidth > 1;
    var left = box.scrollLeft;
    box.classList.toggle("table-scroll--overflows", wider);
    box.classList.toggle("table-scroll--more-start", wider && left > 1);
    box.classList.toggle("table-scroll--more-end", wider && left + box.clientWidth < box.scrollWidth - 1);
    if (wider || box.hasAttribute("data-scroll-hint")) {
      hintOf(box).hidden = !wider;
    }
  }

  function watch(box) {
    if (watched) {
      if (watched.has(box)) {
        update(box);
        return;
      }
      watched.add(box);
    }
    box.addEventListener("scroll", function () { update(box); }, { passive: true });
    if (resized) {
      resized.observe(box);
      if (box.firstElementChild) {
        resized.observe(box.firstElementChild);
      }
    }
    update(box);
  }

  function watchAll(root) {
    if (root.classList && root.classList.contains("table-scroll")) {
      watch(root);
    }
    if (root.querySelectorAll) {
      Array.prototype.forEach.call(root.querySelectorAll(".table-scroll"), watch);
    }
  }

  function start() {
    watchAll(document);
    if (!resized) {
      window.addEventListener("resize", function () { watchAll(document); });
    }
    if (typeof MutationObserver === "function") {
      new MutationObserver(function (changes) {
        changes.forEach(function (change) { Array.prototype.forEach.call(change.addedNodes, watchAll); });
      }).observe(document.body, { childList: true, subtree: true });
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
