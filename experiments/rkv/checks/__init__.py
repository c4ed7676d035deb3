"""One module per experiment: its stated properties over its result rows."""
