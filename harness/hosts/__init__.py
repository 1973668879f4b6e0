"""Real agent hosts (Claude Code, Codex) run offline against memsim's loopback model server: install them pinned
(:mod:`harness.hosts.install`), run a scripted session isolated from the user's configuration
(:mod:`harness.hosts.drivers`, :mod:`harness.hosts.isolate`) and record every model request
(:mod:`harness.hosts.server`)."""
