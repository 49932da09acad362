/* A run's robustness page: each what-if slider's number follows the
   slider as it moves (htmx re-ranks on the server; without JavaScript the
   number is the one the page was drawn with and the Recompute button
   submits the form). */
(function () {
  "use strict";

  document.addEventListener("input", function (event) {
    var slider = event.target;
    if (!slider.matches || !slider.matches(".what-if input[type=range]")) {
      return;
    }
    var output = document.getElementById(slider.id + "-value");
    if (output) {
      output.value = Number(slider.value).toFixed(1);
    }
  });
})();
