"""Chunked gated delta rule forward: one module per stage kernel, each with its own ``KernelSpec``.

Stages (in order): ``gdn_kkt`` (kkt.py), ``gdn_solve_tril`` (solve.py), the two fused as
``gdn_kkt_solve`` (kkt_solve.py), ``gdn_wy`` (wy.py), the first three fused as ``gdn_kkt_solve_wy``
(kkt_solve_wy.py),
``gdn_state`` (state.py), ``gdn_output`` (output.py), the last two fused as ``gdn_state_output``
(state_output.py); the whole forward with the gate cumsum is
``chunk_gated_delta_rule_fwd`` (forward.py). Each spec's oracle is ``<spec name>_reference`` in its
stage module (e.g. ``kkt.gdn_kkt_reference``), built from the fp32 torch math in reference.py.
"""

from ascendopt.kernels.gdn import (
    forward,
    kkt,
    kkt_solve,
    kkt_solve_wy,
    output,
    solve,
    state,
    state_output,
    wy,
)
from ascendopt.kernels.gdn.forward import chunk_gated_delta_rule_fwd

SPECS = [kkt.SPEC, solve.SPEC, kkt_solve.SPEC, kkt_solve_wy.SPEC, wy.SPEC, state.SPEC, output.SPEC, state_output.SPEC,
         forward.SPEC]

__all__ = ["SPECS", "chunk_gated_delta_rule_fwd"]
