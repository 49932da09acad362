/* A run's robustness page: each what-if slider's number follows the
   slider as it moves (htmx re-ranks on the server; without JavaScript the
   number is the one the page was drawn with and the Recompute button
   submits the form). "Reset to the run's weights" puts every slider back
   at the run's weight and asks for the run's ranking in place: as a plain
   link it would do nothing once the page's address is already the link's
   (a second reset), and it stays a plain link without JavaScript. */
(function () {
  "use strict";

  function showValue(slider) {
    var output = document.getElementById(slider.id + "-value");
    if (output) {
      output.value = Number(slider.value).toFixed(1);
    }
  }

  document.addEventListener("input", function (event) {
    var slider = event.target;
    if (!slider.matches || !slider.matches(".what-if input[type=range]")) {
      return;
    }
    showValue(slider);
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("[data-what-if-reset]") : null;
    var form = link ? link.closest("form.what-if") : null;
    if (!form || !window.htmx) {
      return;
    }
    event.preventDefault();
    form.querySelectorAll("input[type=range][data-run-value]").forEach(function (slider) {
      slider.value = slider.getAttribute("data-run-value");
      showValue(slider);
    });
    // No weights asked for: the fragment is the ranking at the run's weights.
    window.htmx.ajax("GET", form.getAttribute("hx-get"), { target: "#what-if-ranking", swap: "outerHTML" });
  });
})();
