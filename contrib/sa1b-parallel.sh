#!/bin/sh
# contrib/sa1b-parallel.sh - shards a list of SA-1B tars with GNU parallel,
# on this machine's cores or on several machines over ssh.
#
# Usage: contrib/sa1b-parallel.sh [OPTIONS] -o DIR LIST [-- SA1B-SHARD-OPTIONS...]
#
#   LIST  a file with one tar path a line ("-": standard input), e.g.
#         ls /data/sa1b/*.tar > tars.txt
#   DIR   the folder of the shards (created); each tar gives DIR/NAME.shard
#         (NAME: the tar's file name without .tar, .tar.gz, .tgz, ...), so
#         two tars of one NAME in different folders would write one shard:
#         such a LIST is refused (exit 2) before anything starts
#
# Options:
#   -o DIR           output folder (required)
#   -t N             worker threads of each sa1b-shard (default 2)
#   -J N             sa1b-shard runs at once on each host (default: the
#                    host's cores divided by -t, at least 1)
#   -S LOGIN         run on this ssh login (GNU parallel's --sshlogin:
#                    "host", "user@host", "8/host" for 8 jobs there, ":" for
#                    this machine); repeat for several hosts (without -S:
#                    this machine only; with -S, add "-S :" to use it as
#                    well).  Every host
#                    must see LIST's tars and DIR at the same paths (a shared
#                    file system) and have sa1b-shard on its PATH.
#   --joblog FILE    keep GNU parallel's job log (one line per tar: host,
#                    run time, exit status)
#   -h, --help       show this help and exit
# Options after "--" go to every sa1b-shard (e.g. --image-size 256
# --max-masks 64).  Each run is "sa1b-shard -q --skip-existing", so running
# the same command again after a failure shards only the tars whose complete
# output is missing or stale (sa1b-shard(1), --skip-existing); outputs do not
# depend on -t, -J or the hosts: they equal sequential runs byte for byte.
#
# Exit status: 0 every tar sharded cleanly; otherwise the worst status of
# its sa1b-shard runs (1 samples skipped or a tar cut short, 3 a tar that
# could not be sharded, or a run that could not start or was killed), with
# one line per failing tar; 2 usage error, or two lines of LIST with one
# NAME (one line names both).
set -u
prog=${0##*/}
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" | sed '/^set -u$/d'; }
die() { echo "$prog: $*" >&2; exit 2; }

out="" threads=2 jobs="" joblog="" logins=""
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        -o) [ $# -ge 2 ] || die "-o needs a folder"; out=$2; shift 2 ;;
        -t) [ $# -ge 2 ] || die "-t needs a number"; threads=$2; shift 2 ;;
        -J) [ $# -ge 2 ] || die "-J needs a number"; jobs=$2; shift 2 ;;
        -S) [ $# -ge 2 ] || die "-S needs an ssh login"; logins="$logins,$2"; shift 2 ;;
        --joblog) [ $# -ge 2 ] || die "--joblog needs a file"; joblog=$2; shift 2 ;;
        --) break ;;
        -?*) die "unknown option '$1' (try --help)" ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ] || [ "$1" = -- ]; then die "missing LIST (try --help)"; fi
list=$1; shift
if [ $# -gt 0 ]; then
    [ "$1" = -- ] || die "unexpected '$1' after LIST (sa1b-shard options go after --)"
    shift
fi
[ -n "$out" ] || die "missing -o DIR"
case $threads in ''|*[!0-9]*|0) die "-t wants a positive number, not '$threads'" ;; esac
case $jobs in *[!0-9]*|0) die "-J wants a positive number, not '$jobs'" ;; esac
command -v parallel >/dev/null || { echo "$prog: GNU parallel not found (Debian: apt install parallel)" >&2; exit 3; }
if [ "$list" != - ] && [ ! -r "$list" ]; then
    echo "$prog: cannot read '$list'" >&2; exit 3
fi
if [ "$list" = - ]; then   # read once: checked, then given to parallel
    if [ -n "$joblog" ] && [ -e "$joblog" ] &&
        [ "$(stat -L -c %d:%i -- "$joblog")" = "$(stat -L -c %d:%i /dev/stdin 2>/dev/null)" ]; then
        die "--joblog '$joblog' is LIST (standard input): give another file"
    fi
    stdin_list=$(mktemp "${TMPDIR:-/tmp}/sa1b-parallel.XXXXXX") || exit 3
    cat >"$stdin_list" || { rm -f "$stdin_list"; exit 3; }
    trap 'rm -f "$stdin_list"' EXIT
    list=$stdin_list listname="standard input"
else
    listname="'$list'"
fi
# Two tars of one output name (sa1b-shard's: the file name without folder
# and .tar, .tar.gz, .tar.zst, .tar.xz, .tgz) would each write NAME.shard,
# in two runs that do not see each other: the last one wins, the other tar's
# samples are lost.  One sa1b-shard run refuses that (exit 2); so does this
# script, for the whole LIST, before anything runs.
dup=$(awk '
function stem(p,    n, i, e, ext) {
    n = p; sub(/.*\//, "", n)
    split(".tar.gz .tar.zst .tar.xz .tgz .tar", ext, " ")
    for (i = 1; i <= 5; i++) {
        e = ext[i]
        if (length(n) > length(e) && substr(n, length(n) - length(e) + 1) == e)
            return substr(n, 1, length(n) - length(e))
    }
    return n
}
/\r$/ { printf "line %d ends in a carriage return (Windows line ends: convert the list with dos2unix)", NR; bad = 1; exit }
$0 == "" { printf "line %d is empty (every line names a tar)", NR; bad = 1; exit }
{
    s = stem($0)
    if (s in line) {
        printf "lines %d and %d, \047%s\047 and \047%s\047, would both write \047%s.shard\047 (shard them into different folders)", line[s], NR, path[s], $0, s
        exit
    }
    line[s] = NR; path[s] = $0
}' "$list") || exit 3
if [ -n "$dup" ]; then
    echo "$prog: $listname: $dup" >&2
    exit 2
fi
# GNU parallel truncates the job log first: never LIST or one of its tars
if [ -n "$joblog" ] && [ -e "$joblog" ]; then
    jid=$(stat -L -c %d:%i -- "$joblog") || exit 3
    [ "$jid" = "$(stat -L -c %d:%i -- "$list")" ] && die "--joblog '$joblog' is LIST ($listname): give another file"
    hit=$(grep -v '^$' "$list" | tr '\n' '\0' | xargs -0 -r stat -L -c '%d:%i %n' -- 2>/dev/null |
        awk -v j="$jid" '$1 == j { sub(/^[^ ]* /, ""); print; exit }')
    [ -z "$hit" ] || die "--joblog '$joblog' is the tar '$hit' of LIST: give another file"
fi
mkdir -p "$out" || exit 3
[ -n "$jobs" ] || jobs="$((100 / threads))%"   # of each host's cores
case $jobs in 0%) jobs=1 ;; esac

log=$joblog
[ -n "$log" ] || log=$(mktemp "${TMPDIR:-/tmp}/sa1b-parallel.XXXXXX") || exit 3
set -- --will-cite --quote --jobs "$jobs" --joblog "$log" --arg-file "$list" \
    ${logins:+--sshlogin "${logins#,}" --workdir "$PWD"} \
    sa1b-shard -q --skip-existing -j "$threads" "$@" -o "$out/" '{}'
parallel "$@"
rc=$?
# the job log's 7th column is each run's exit status, the 8th the signal
# that killed it, the 9th its command; a run that could not start (127) or
# was killed counts as 3
worst=$(awk -F'\t' 'NR > 1 && ($7 != 0 || $8 != 0) { s = ($8 != 0 || $7 > 3 || $7 < 0) ? 3 : $7; if (s > w) w = s }
    END { print w + 0 }' "$log")
awk -F'\t' -v p="$prog" 'NR > 1 && ($7 != 0 || $8 != 0) {
    print p ": " ($8 != 0 ? "killed by signal " $8 : "exit " $7) " (host " $2 "): " $9 }' "$log" >&2
[ -n "$joblog" ] || rm -f "$log"
if [ "$worst" = 0 ] && [ "$rc" -ne 0 ]; then
    echo "$prog: GNU parallel failed with status $rc" >&2; worst=3
fi
exit "$worst"
