"""Step 5, the gate: integrity, correctness, kernel hit and performance stages (``stages``), what they
found (``result``), the frozen tests of own code and what "passed" means (``testset``, with the pytest
plugin ``pytest_report`` started by ``pytest_launch``), what the test run may use (``scope``), and the
measurement core they share (``bench``, ``interleave``)."""
