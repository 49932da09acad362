/* The study home's live part (#home-live, templates/studyhome/_home_live.html)
   polls the server and is swapped whole when the study changed. A swap must
   never throw away what someone is typing there (the revision round's
   message, say): while a field of the part has the focus, or holds a value
   other than the one the page came with, the new part is not swapped in
   (the next poll asks again, so it arrives once the field is left alone or
   its form submitted). */
(function () {
  "use strict";

  function busy(part) {
    if (part.contains(document.activeElement) && document.activeElement.matches("input, textarea, select")) {
      return true;
    }
    return Array.prototype.some.call(part.querySelectorAll("input, textarea"), function (field) {
      if (field.type === "hidden") {
        return false;
      }
      if (field.type === "checkbox" || field.type === "radio") {
        return field.checked !== field.defaultChecked;
      }
      return field.value !== field.defaultValue;
    }) || Array.prototype.some.call(part.querySelectorAll("select option"), function (option) {
      return option.selected !== option.defaultSelected;
    });
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "home-live" && event.detail.xhr.status === 200 && busy(target)) {
      event.detail.shouldSwap = false;
    }
  });
}());
