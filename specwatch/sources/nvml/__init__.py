"""Local GPUs through NVML (binding is the only importer of pynvml)."""
