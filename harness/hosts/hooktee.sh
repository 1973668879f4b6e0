#!/bin/sh
# hooktee.sh DIR EVENT COMMAND_LINE [GATE_DIR]
#
# Runs one hook command line exactly as a host would (sh -c COMMAND_LINE, with the host's stdin), passes its
# stdout and stderr on to the host unchanged and exits with its exit status, and keeps a copy of everything in
# DIR/<EVENT>-<nanoseconds>-<pid>.{start,stdin,stdout,stderr,rc,end,signal} for harness.hosts.wire.hook_records.
#
# A SIGTERM/SIGINT/SIGHUP from the host (Claude Code cancels a SessionEnd hook after its budget) is forwarded to
# the hook's process and noted in .signal, so the hook is cancelled as it would be without the wrapper; the hook's
# output then does not reach the host (a cancelled hook's output is dropped by the host too). A SIGKILL cannot be
# forwarded: the hook would outlive the wrapper, as it would outlive a killed host. (In a non-interactive sh a
# background command ignores SIGINT, so an INT reaches the hook only when it sets its own handler.)
#
# GATE_DIR (optional): this is the N-th run of EVENT recorded in DIR (0-based); when GATE_DIR/EVENT-N.hold exists
# the wrapper creates GATE_DIR/EVENT-N.waiting and waits (at most 60 s) for GATE_DIR/EVENT-N.go before it runs the
# hook, so a scenario runner can act between two prompts (its operations run while the host waits on this hook);
# the wait is kept in .gate (start and end times) and is not part of .start/.end.
dir=$1
event=$2
cmd=$3
gate=$4
mkdir -p "$dir" || exit 0
n=$(ls "$dir" | grep -c "^$event-.*\.start$")
base="$dir/$event-$(date +%s%N)-$$"
if [ -n "$gate" ] && [ -e "$gate/$event-$n.hold" ]; then
    g0=$(date +%s.%N)
    : > "$gate/$event-$n.waiting"
    i=0
    while [ ! -e "$gate/$event-$n.go" ] && [ "$i" -lt 1200 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    echo "$g0 $(date +%s.%N)" > "$base.gate"
fi
date +%s.%N > "$base.start"
cat > "$base.stdin"
sh -c "$cmd" < "$base.stdin" > "$base.stdout" 2> "$base.stderr" &
child=$!
trap 'echo TERM >> "$base.signal"; kill -TERM "$child" 2>/dev/null' TERM
trap 'echo INT >> "$base.signal"; kill -INT "$child" 2>/dev/null' INT
trap 'echo HUP >> "$base.signal"; kill -HUP "$child" 2>/dev/null' HUP
wait "$child"
rc=$?
while [ -s "$base.signal" ] && kill -0 "$child" 2>/dev/null; do
    wait "$child"
    rc=$?
done
if [ -s "$base.signal" ]; then
    date +%s.%N > "$base.end"
    exit "$rc"
fi
echo "$rc" > "$base.rc"
date +%s.%N > "$base.end"
cat "$base.stdout"
cat "$base.stderr" >&2
exit "$rc"
