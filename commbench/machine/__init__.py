"""Facts of the machine a rank runs on: CPUs and caches, where the rank sits, hardware for `commbench topo`,
background load, power (NVML, RAPL) and link byte counters."""
