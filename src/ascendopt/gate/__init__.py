"""Step 5, the gate: the integrity, correctness, kernel hit and performance stages run in order and
assembled into one verdict (``stages``). The evidence each stage rests on is produced and checked by
``ascendopt.judge``, which freeze, the rounds and tuning use too."""
