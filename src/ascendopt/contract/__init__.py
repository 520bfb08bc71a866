"""Step 1, freeze: the task contract (``model``), its frozen files and git state (``frozen``), and
``freeze`` itself."""
