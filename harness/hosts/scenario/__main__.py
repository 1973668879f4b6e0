"""``python -m harness.hosts.scenario [FILE...]``: check scenario files (:func:`harness.hosts.scenario.load.main`)."""

from __future__ import annotations

from harness.hosts.scenario.load import main

raise SystemExit(main())
