"""The judge's evidence, computed where no code under test ran.

``payload``: values (inputs the trusted maker made, outputs a worker returned) as bytes across the process
boundary, read from raw memory; ``evidence``: what the parent compares and checks on those bytes (the
differential check, the timed calls' outputs, the untimed phases' costs). The workers, the engine and the
stages that use them live in ``ascendopt.gate``; this package imports nothing above ``contract``.
"""
