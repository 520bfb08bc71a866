"""Step 5, the gate: the integrity, correctness, kernel hit and performance stages run in order
(``stages``) and assembled into one verdict with its exit code, JSON and JUnit XML forms (``result``). The
evidence each stage rests on is produced and checked by ``ascendopt.judge``, which freeze, the rounds and
tuning use too."""
