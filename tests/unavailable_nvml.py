"""NVML without a driver, at the nvidia-ml-py function level (tests of the "no GPU" paths)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, NoReturn

from specwatch.sources.nvml import binding as N


class _UnavailableNvml:
    """NVML without a driver: ``nvmlInit`` fails; everything else is uninitialised."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        raise N.nvml_error(N.ERROR_LIBRARY_NOT_FOUND)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def uninitialized(*args: object) -> NoReturn:
            self.calls[name] += 1
            raise N.nvml_error(N.ERROR_UNINITIALIZED)

        return uninitialized


def unavailable_nvml() -> Any:
    """A module-like object whose ``nvmlInit`` raises ``NVMLError_LibraryNotFound``."""
    return _UnavailableNvml()
