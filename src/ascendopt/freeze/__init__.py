"""Step 1 of the loop: freeze the task (``task``: a bundled kernel or own code into ``contract.yaml``, its baseline
measured). The contract's data model lives in ``ascendopt.contract``; this package runs the processes that fill it."""
