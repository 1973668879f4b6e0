"""A user's own memory as a hook: a fixed note at session start, and per prompt the notes whose keyword the prompt
names, in the Claude Code / Codex JSON shape. One script serves both events (it reads ``hook_event_name``)."""

import json
import sys

NOTE = "Team note: the build runs with `make check`; never push to main directly."
NOTES = {
    "ledger": "Ledger note: the ledger service keeps its records in Postgres 16.",
    "deploy": "Deploy note: deploys go out on Tuesdays after the release review.",
}

hook = json.load(sys.stdin)
event = hook.get("hook_event_name", "")
if event == "SessionStart":
    print(NOTE)
elif event == "UserPromptSubmit":
    prompt = str(hook.get("prompt", "")).lower()
    found = [text for word, text in NOTES.items() if word in prompt]
    if found:
        out = {"hookEventName": event, "additionalContext": "\n".join(found)}
        print(json.dumps({"hookSpecificOutput": out}))
