"""The simulator: seeded GPUs and an inference server speaking each dialect over real HTTP."""
