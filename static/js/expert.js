/* The expert's steps: presentation only. Every number that matters (weights,
   consistency, repair hints, vetoes) comes from the server; without this
   file the pages work as plain forms.
   - method panels: only the chosen method's fields are shown;
   - running totals of percentage inputs (the server validates);
   - "Apply" on a repair hint sets the pair's point and asks for a new
     result (htmx posts the form on "change");
   - Enter on a judgment's radio does not submit the priorities form. */
(function () {
  "use strict";

  function numberOf(input) {
    var text = input.value.trim().replace(",", ".");
    if (text === "") return null;
    var value = Number(text);
    return isFinite(value) ? value : null;
  }

  function updateTotal(total) {
    var form = total.closest("form");
    var prefix = total.getAttribute("data-total-prefix");
    var inputs = form.querySelectorAll('input[name^="' + prefix + '"]');
    var sum = 0, complete = inputs.length > 0;
    inputs.forEach(function (input) {
      var value = numberOf(input);
      if (value === null) complete = false; else sum += value;
    });
    var output = total.querySelector("output");
    var note = total.querySelector(".live-total__note");
    var rounded = Math.round(sum * 100) / 100;
    output.textContent = complete ? String(rounded) : "–";
    // The rule's numbers come from the server (engine.rules.PERCENT_TOTAL and PERCENT_TOTAL_SLACK).
    var target = parseFloat(total.getAttribute("data-total"));
    var slack = parseFloat(total.getAttribute("data-total-slack")) || 0;
    var off = complete && Math.abs(sum - target) > slack;
    total.classList.toggle("live-total--off", off);
    total.classList.toggle("live-total--ok", complete && !off);
    if (!complete) note.textContent = "";
    else if (!off) note.textContent = " ✓";
    else if (total.getAttribute("data-total-rule") === "exact") note.textContent = " (must be " + target + ")";
    else note.textContent = " (scaled to " + target + " when saved)";
  }

  function showChosenPanels(section) {
    var chosen = section.querySelector('.method-choice input[type="radio"]:checked');
    section.querySelectorAll("[data-method-panel]").forEach(function (panel) {
      panel.hidden = !chosen || panel.getAttribute("data-method-panel") !== chosen.value;
    });
  }

  function init() {
    document.querySelectorAll("[data-total-prefix]").forEach(updateTotal);
    document.querySelectorAll("[data-prio-section]").forEach(showChosenPanels);
    document.body.classList.add("js");
  }

  document.addEventListener("input", function (event) {
    var form = event.target.form;
    if (!form) return;
    form.querySelectorAll("[data-total-prefix]").forEach(updateTotal);
    // "Confirm these ranges" while the defaults are unchanged; once edited, saving.
    form.querySelectorAll("[data-changed-label]").forEach(function (button) {
      button.textContent = button.getAttribute("data-changed-label");
    });
  });

  document.addEventListener("change", function (event) {
    var section = event.target.closest("[data-prio-section]");
    if (section && event.target.closest(".method-choice")) showChosenPanels(section);
  });

  // Enter on a judgment (a radio of the priorities form) answers nothing and
  // submits nothing: Save is the only submit. (The form's disabled default
  // button already stops implicit submission; this keeps Enter quiet.)
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key !== "Enter" || !target.matches || !target.matches('input[type="radio"]')) return;
    if (target.closest(".priorities-form")) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-apply-field]");
    if (!button) return;
    event.preventDefault();
    var form = button.closest("form");
    var name = button.getAttribute("data-apply-field");
    var value = button.getAttribute("data-apply-value");
    var radio = Array.prototype.find.call(form.elements, function (element) {
      return element.name === name && element.value === value;
    });
    if (!radio) return;
    radio.checked = true;
    radio.focus();
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
