"""One module per page. Each has PATH, TITLE, `layout(state) -> component` (no data loaded:
the page's callbacks fill it) and `register(app, store)` (its callbacks, on that app only)."""
