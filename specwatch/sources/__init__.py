"""I/O: NVML (the only importer of pynvml) and server clients (the only users of httpx)."""
