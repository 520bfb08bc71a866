"""A pool of devices: the same judged work spread over every device of this host, or over a Ray cluster.

One abstraction, two back ends (``pool.core.run_pool`` drives either):

* ``pool.local.LocalPool`` (``--devices N|LIST``): one device process per device of this host, each serving the
  pool's work with the judge's existing code (the screening's smoke check and bench core, the gate's stages and
  their workers). On cuda/npu each process sees its one device only; on cpu a "device" is a slot of the host's
  cores, each process pinned to its own core set where the host has enough cores.
* ``pool.ray_pool.RayPool`` (``--ray [ADDRESS]``): the same work as one Ray actor per device: ``resources={"NPU": 1}``
  on Ascend, ``num_gpus=1`` on CUDA, the custom resource ``device`` standing for a device on cpu. Ray is optional
  (``pip install 'ascendopt[pool]'``).

The judge's rules hold per device (``pool.core``): baseline and candidate are timed interleaved on one device and
only their ratio leaves it; every device re-measures the frozen baseline before its first item and after its last
(the job's ``anchor``: ``judge.engine.anchor_problem``, the same rule a gate applies), and a device whose baseline is
off the frozen anchor is quarantined: named, its results dropped, its items re-queued on the others. A device lost
mid-run (its process killed, its node gone, an item over its time limit) re-queues its item. What runs on the pool
is a *job* (``pool.core.Job``): ``tune.pooled.ScreenJob`` (``optimize-round --auto``'s screening) and
``gate.many.GateJob`` (``gate --all``). This package imports no step package: the jobs bring the step's code.
"""
