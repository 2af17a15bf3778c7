"""`python -m specwatch`."""

from __future__ import annotations

from specwatch.cli import main

raise SystemExit(main())
