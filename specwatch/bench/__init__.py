"""The benchmark runner, snapshots and their comparison."""
