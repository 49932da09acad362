/* The designer's pages: copy buttons next to read-only fields (an
   invitation link, the reminder link). Without JavaScript the buttons stay
   hidden and the field is selected and copied by hand. */
(function () {
  "use strict";

  function announce(button, text) {
    var scope = button.closest(".card") || document;
    var status = scope.querySelector(".copy-status");
    if (status) {
      status.textContent = text;
    }
  }

  function copy(button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    if (!field) {
      return;
    }
    field.select();
    var done = function () { announce(button, "Copied to the clipboard."); };
    var manual = function () { announce(button, "Press Ctrl+C (⌘C on a Mac) to copy the selected link."); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, manual);
    } else {
      manual();
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.hidden = false;
      button.addEventListener("click", function () { copy(button); });
    });
    // A field picked from the catalogue's list gets its definition, if none is typed.
    var name = document.querySelector("input[list='attribute-catalogue']");
    var definition = name && name.form ? name.form.querySelector("textarea[name='description']") : null;
    if (name && definition) {
      name.addEventListener("change", function () {
        var option = document.querySelector("#attribute-catalogue option[value='" + CSS.escape(name.value) + "']");
        if (option && option.dataset.definition && !definition.value.trim()) {
          definition.value = option.dataset.definition;
        }
      });
    }
  });
})();
