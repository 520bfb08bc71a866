"""Step 3, analyze: profile readers (``traces/``) into one canonical kernel table, then ranking,
bottleneck classification with evidence and levers (``diagnosis``, ``rules``)."""
