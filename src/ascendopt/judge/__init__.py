"""The judge: the machinery that produces and checks the evidence a verdict rests on, shared by every step
that measures (``freeze``, ``gate``, ``rounds``, ``tune``), so it imports none of them, only ``contract`` and
the shared packages below it.

* measuring: the statistics and the A/B verdict (``bench``), the verdict over a shape mix (``weighted``), own
  code's interleaved timing in warm isolated workers (``engine`` over ``interleave``, which starts
  ``worker``), the trees of recorded commits they run (``worktrees``), the trees' code loaded from source
  (``sources``), one ``@triton.autotune`` config pinned in a worker (``autotune_pin``);
* checking: a bundled kernel against its oracle (``correctness``), own code's outputs against the frozen
  commit's (``equivalence``), on values carried as bytes across the process boundary (``payload``) and
  compared where no code under test runs (``evidence``), which kernels ran and did the work (``kernel_hit``);
* the frozen tests: the run (``testset``, pytest started by ``pytest_launch`` with the reporting plugin
  ``pytest_report``), what it may use (``scope``), the installed environment it starts from
  (``environment``);
* what was found: a stage's checks, its status and the exit code it stands for (``result``).
"""
