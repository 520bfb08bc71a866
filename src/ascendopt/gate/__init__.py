"""Step 5, the gate: integrity, correctness, kernel hit and performance stages (``stages``), what they
found (``result``), and the measurement core they share (``bench``, ``interleave``)."""
