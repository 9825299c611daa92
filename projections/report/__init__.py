"""Reports: canonical JSON built from the fold, and its Markdown and HTML views."""
