"""Steps 4 and 6, the loop: one recorded round (``run``, ``auto``), its timing and profiles, the round
records and stop criteria (``records``), the round summary as data, ``reprofile`` and the report."""
