"""The course's tools, fenced off from the library: what the book and its readers use beside the model code.

* `notebook`: the chapters' display helpers (`show_source`, `glue`, `stack`) and `CHAPTERS`, the chapter order
  written once.

The library modules (`transformer_course.attention` ... `transformer_course.modern`) never import from here.
"""
