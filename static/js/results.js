/* A run's page: the Print button (hidden without JavaScript, where the
   browser's own print command does the same), and focus moved to a
   candidate's breakdown once htmx has swapped it in, so keyboard and
   screen-reader users land on what they asked for. */
(function () {
  "use strict";

  function showPrintButtons() {
    document.querySelectorAll("[data-print]").forEach(function (button) {
      button.hidden = false;
    });
  }

  document.addEventListener("DOMContentLoaded", showPrintButtons);
  // The status partial brings the buttons once a watched run has succeeded.
  document.addEventListener("htmx:afterSettle", showPrintButtons);

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-print]");
    if (button) {
      window.print();
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "candidate") {
      var section = document.getElementById("candidate");
      if (section) {
        section.focus();
      }
    }
  });
})();
