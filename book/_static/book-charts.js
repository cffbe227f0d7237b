// Default options for every chart the book embeds (loaded after vega-embed, before any chart).
// SVG rendering: charts stay sharp, scale to the column with CSS (book.css), print as vectors, and
// expose the Vega description (diagrams: "Diagram: ...") as the chart's aria-label.
// Links in diagrams (Vega href) open in the same tab, like the book's other links.
(function () {
  if (typeof window.vegaEmbed !== "function" || window.vegaEmbed.bookDefaults) return;
  var original = window.vegaEmbed;
  var wrapped = function (element, spec, options) {
    var defaults = { renderer: "svg", loader: { target: "_self" } };
    return original(element, spec, Object.assign(defaults, options || {}));
  };
  Object.keys(original).forEach(function (key) { wrapped[key] = original[key]; });
  wrapped.bookDefaults = true;
  window.vegaEmbed = wrapped;
})();
