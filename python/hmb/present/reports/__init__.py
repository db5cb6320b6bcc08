"""The report's sections, one module per benchmark: its declared figures, its readings and its
tables.

A benchmark's figures are declared in figures.toml (the studies' format; declared.py reads it)
and drawn by the one figure engine (hmb.present.figures) from the tidy table. A module here adds
what a declaration cannot carry: the reading under each figure (@reading("FIGURE-ID"): the plan
drawn → one paragraph) and the benchmark's tables (@register("bench", "Section title",
tables=...): a function of the tidy.Table). A benchmark without declared figures gets one per
summary-worthy metric of its descriptor (generic.py). hmb.present.report puts the sections
together; docs/contributing.md walks adding a figure.
"""
