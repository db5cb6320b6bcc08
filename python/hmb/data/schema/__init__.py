"""The JSON Schema of HMB's output (data files only; see hmb.validate)."""
