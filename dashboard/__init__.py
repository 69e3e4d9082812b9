"""The Dash dashboard (built in a later issue; this package holds its pages and figures)."""
