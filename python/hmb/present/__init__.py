"""The present layer: what people read, made from the tidy table (hmb.data.tidy): the one figure
engine (figures), `hmb report` (report, with a module per benchmark in reports/), `hmb compare`,
the `--repeats` summary, `hmb project`, and the number and text formats they share (format).
docs/architecture.md."""
