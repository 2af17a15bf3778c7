"""`python -m specwatch`."""

from __future__ import annotations

from specwatch.commands.main import main

raise SystemExit(main())
