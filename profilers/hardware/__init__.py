"""Facts about the hardware a run is on.

One table of GPU models (:mod:`.gpus`) and their compute peaks (:mod:`.peaks`): pure data, no torch,
no NVML.
"""
