// @jupyter-widgets/html-manager typesets widget labels with MathJax 2's API,
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads MathJax 3, which has no Hub,
// so every widget page would log "Cannot read properties of undefined (reading 'Queue')".
// This file gives whatever object is (or later becomes) window.MathJax a small Hub that forwards
// to MathJax 3's typesetPromise. It must load before embed.js (see nb_ipywidgets_js in _config.yml).
(function () {
  "use strict";
  var hub = {
    Queue: function () {
      var elements = [];
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[2]) elements.push(job[2]);
      }
      var typeset = function () {
        var mj = window.MathJax;
        if (!mj || !mj.typesetPromise || !mj.startup) return false;
        mj.startup.promise.then(function () { return mj.typesetPromise(elements); });
        return true;
      };
      if (!typeset()) window.addEventListener("load", typeset);
    },
  };
  var current = window.MathJax;
  if (current && typeof current === "object" && !current.Hub) current.Hub = hub;
  // MathJax 3 replaces window.MathJax when it starts: add the Hub to the new object too.
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) {
      if (value && typeof value === "object" && !value.Hub) value.Hub = hub;
      current = value;
    },
  });
})();
