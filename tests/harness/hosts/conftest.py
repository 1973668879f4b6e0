"""Host tests: where they find the pinned hosts, and how they skip without them.

The real-host tests use :func:`harness.hosts.install.find_host`, so they find the hosts where ``memsim hosts
install`` put them (``$MEMSIM_HOSTS_DIR``, else the user cache folder); ``$MEMSIM_HOSTS_EXTRA`` (npm prefixes,
``os.pathsep``-separated) also accepts other installs of the pinned versions, for example exploration copies.
Without a pinned host each of its tests skips with one reason line naming the install command."""

from __future__ import annotations

import pytest

from harness.hosts.install import HOSTS, InstalledHost, find_host


def require_host(name: str) -> InstalledHost:
    """The pinned host, or a skip saying how to install it."""
    h = find_host(name)
    if h is None:
        pytest.skip(f"{name} {HOSTS[name].version} not installed (memsim hosts install {name})")
    return h
