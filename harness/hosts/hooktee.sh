#!/bin/sh
# hooktee.sh DIR EVENT COMMAND_LINE
#
# Runs one hook command line exactly as a host would (sh -c COMMAND_LINE, with the host's stdin), passes its
# stdout and stderr on to the host unchanged and exits with its exit status, and keeps a copy of everything in
# DIR/<EVENT>-<nanoseconds>-<pid>.{start,stdin,stdout,stderr,rc,end,signal} for harness.hosts.wire.hook_records.
#
# A SIGTERM/SIGINT/SIGHUP from the host (Claude Code cancels a SessionEnd hook after its budget) is forwarded to
# the hook's process and noted in .signal, so the hook is cancelled as it would be without the wrapper; the hook's
# output then does not reach the host (a cancelled hook's output is dropped by the host too). A SIGKILL cannot be
# forwarded: the hook would outlive the wrapper, as it would outlive a killed host.
dir=$1
event=$2
cmd=$3
mkdir -p "$dir" || exit 0
base="$dir/$event-$(date +%s%N)-$$"
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
