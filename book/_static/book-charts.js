// Default options for every chart the book embeds (loaded after vega-embed, before any chart).
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
