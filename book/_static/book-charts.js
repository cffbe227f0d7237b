// Default options for every chart the book embeds (loaded after vega-embed, before any chart),
// and wide tables made keyboard-scrollable (at the end).
// SVG rendering: charts stay sharp, scale to the column with CSS (book.css), print as vectors, and
// expose the Vega description (diagrams: "Diagram: ...") as the chart's aria-label.
// Links in diagrams (Vega href) open in the same tab, like the book's other links.
// The action menu's icon-only button is named "Chart actions" for screen readers.
(function () {
  if (typeof window.vegaEmbed !== "function" || window.vegaEmbed.bookDefaults) return;
  var original = window.vegaEmbed;
  var wrapped = function (element, spec, options) {
    var defaults = { renderer: "svg", loader: { target: "_self" } };
    return original(element, spec, Object.assign(defaults, options || {})).then(function (result) {
      // The chart's action menu opens from a <summary> that holds only an icon: give it a name.
      var root = typeof element === "string" ? document.querySelector(element) : element;
      var summary = root && root.querySelector("details > summary");
      if (summary && !summary.hasAttribute("aria-label")) summary.setAttribute("aria-label", "Chart actions");
      return result;
    });
  };
  Object.keys(original).forEach(function (key) { wrapped[key] = original[key]; });
  wrapped.bookDefaults = true;
  window.vegaEmbed = wrapped;
})();

// Wide tables (a pandas DataFrame on a phone) scroll sideways in their own box (book.css): one that
// does is made focusable and named, so that a keyboard can scroll it too (axe's
// scrollable-region-focusable). Checked again when the window's width changes.
(function () {
  function mark() {
    document.querySelectorAll(".cell_output table").forEach(function (table) {
      var scrolls = table.scrollWidth > table.clientWidth + 1;
      if (scrolls && !table.hasAttribute("tabindex")) {
        table.setAttribute("tabindex", "0");
        table.setAttribute("role", "region");
        table.setAttribute("aria-label", "Table (scrolls sideways)");
        table.dataset.bookScrolls = "1";
      } else if (!scrolls && table.dataset.bookScrolls) {
        ["tabindex", "role", "aria-label", "data-book-scrolls"].forEach(function (name) {
          table.removeAttribute(name);
        });
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mark);
  else mark();
  window.addEventListener("resize", mark);
})();
