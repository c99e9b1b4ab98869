#!/bin/bash
# contrib/sa1b-stream.sh - streams SA-1B tars from their download links
# straight into sa1b-shard, without storing the 11 GB tars.
#
# Usage: contrib/sa1b-stream.sh [OPTIONS] -o DIR LINKS [NAME...] [-- SA1B-SHARD-OPTIONS...]
#
#   LINKS  SA-1B's link file as Meta's download page gives it: a header line
#          "file_name<TAB>cdn_link", then one "sa_000020.tar<TAB>https://..."
#          line per tar (the links expire after a few days: fetch a fresh
#          file before a long run)
#   NAME   the tars to stream (sa_000020.tar or sa_000020); all when none
#   DIR    the folder of the shards (created); each tar gives DIR/NAME.shard
#
# Options:
#   -o DIR         output folder (required)
#   -t N           sa1b-shard worker threads (default: all cores)
#   --sums FILE    check each tar's SHA-256 against FILE ("HASH  NAME" lines,
#                  sha256sum's format, e.g. the DIR/*.tar.sha256 files of an
#                  earlier run or a mirror's list); a tar not in FILE is an
#                  error
#   --retries N    curl's --retry (default 3)
#   -h, --help     show this help and exit
# Options after "--" go to sa1b-shard (e.g. --image-size 256).
#
# Checksums: SA-1B's link file carries none (only file names and URLs), and
# Meta publishes none, so a first download can only be checked for being
# whole: curl --fail refuses HTTP errors, and sa1b-shard reports a tar that
# ends early (a cut download) and records each input's size and CRC32C in
# the shard's provenance.  The script writes the SHA-256 of the bytes it
# streamed to DIR/NAME.tar.sha256; with --sums, a later download (or one
# from a mirror) is checked against it.  A download that fails (curl's
# status), ends early, or has the wrong SHA-256 leaves no shard: its shards
# are removed, with one line saying why.
#
# A tar whose shard exists and passes sa1b-verify is skipped, so the same
# command, run again, streams only what is missing.  Several at once, with
# GNU parallel:
#   tail -n +2 links.txt | cut -f1 |
#       parallel -j4 contrib/sa1b-stream.sh -t 2 -o shards/ links.txt {}
#
# Exit status: 0 every tar sharded cleanly; 1 some samples skipped; 3 a
# download failed, ended early or had the wrong checksum, or a tar could
# not be sharded; 2 usage error or a NAME not in LINKS.
set -u -o pipefail
prog=${0##*/}
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" | sed '/^set -u -o pipefail$/d'; }
die() { echo "$prog: $*" >&2; exit 2; }

out="" threads="" sums="" retries=3
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        -o) [ $# -ge 2 ] || die "-o needs a folder"; out=$2; shift 2 ;;
        -t) [ $# -ge 2 ] || die "-t needs a number"; threads=$2; shift 2 ;;
        --sums) [ $# -ge 2 ] || die "--sums needs a file"; sums=$2; shift 2 ;;
        --retries) [ $# -ge 2 ] || die "--retries needs a number"; retries=$2; shift 2 ;;
        --) break ;;
        -?*) die "unknown option '$1' (try --help)" ;;
        *) break ;;
    esac
done
if [ $# -lt 1 ] || [ "$1" = -- ]; then die "missing LINKS (try --help)"; fi
links=$1; shift
names=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("${1%.tar}.tar"); shift; done
[ $# -gt 0 ] && shift   # the "--"
[ -n "$out" ] || die "missing -o DIR"
case $threads in *[!0-9]*) die "-t wants a number, not '$threads'" ;; esac
case $retries in ''|*[!0-9]*) die "--retries wants a number, not '$retries'" ;; esac
for tool in curl sha256sum sa1b-shard sa1b-verify; do
    command -v "$tool" >/dev/null || { echo "$prog: $tool not found" >&2; exit 3; }
done
[ -r "$links" ] || { echo "$prog: cannot read '$links'" >&2; exit 3; }
[ -z "$sums" ] || [ -r "$sums" ] || { echo "$prog: cannot read '$sums'" >&2; exit 3; }
if [ "$(head -n 1 "$links" | tr -d '\r')" != "$(printf 'file_name\tcdn_link')" ]; then
    echo "$prog: '$links': not an SA-1B link file (its first line is not \"file_name<TAB>cdn_link\")" >&2
    exit 3
fi
# the URL of a tar named in LINKS, empty when it is not there
url_of() { awk -F'\t' -v n="$1" 'NR > 1 { sub(/\r$/, "") } NR > 1 && $1 == n { print $2; exit }' "$links"; }
if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <(awk -F'\t' 'NR > 1 && $1 != "" { print $1 }' "$links")
fi
for n in "${names[@]}"; do
    [ -n "$(url_of "$n")" ] || die "'$links' has no line for '$n'"
done
mkdir -p "$out" || exit 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sa1b-stream.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT

# the shards of one stem (one file, or the parts of --max-images)
shards_of() { compgen -G "$out/$1.shard" || true; compgen -G "$out/$1-[0-9][0-9][0-9][0-9][0-9].shard" || true; }
drop() { # stem why...: removes what the failed download left
    local stem=$1; shift
    mapfile -t old < <(shards_of "$stem")
    rm -f "${old[@]}" "$out/$stem.tar.sha256"
    echo "$prog: '$stem.tar': $*: no shard kept" >&2
}

status=0
worse() { [ "$1" -gt "$status" ] && status=$1; return 0; }
for name in "${names[@]}"; do
    stem=${name%.tar}
    mapfile -t have < <(shards_of "$stem")
    if [ ${#have[@]} -gt 0 ] && sa1b-verify -q "${have[@]}" >/dev/null 2>&1; then
        echo "$prog: '$name': complete shard exists, skipped" >&2
        continue
    fi
    want=""
    if [ -n "$sums" ]; then
        want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1; exit }' "$sums")
        if [ -z "$want" ]; then
            echo "$prog: '$sums' has no checksum for '$name'" >&2; worse 3; continue
        fi
    fi
    rm -f "$tmp/fifo" "$tmp/sum"
    mkfifo "$tmp/fifo" || exit 3
    sha256sum <"$tmp/fifo" >"$tmp/sum" &
    sumpid=$!
    curl --fail --silent --show-error --location --retry "$retries" "$(url_of "$name")" |
        tee "$tmp/fifo" |
        sa1b-shard -q ${threads:+-j "$threads"} --name "$stem" "$@" -o "$out/" -
    rcs=("${PIPESTATUS[@]}")
    wait "$sumpid"
    got=$(cut -d' ' -f1 "$tmp/sum" 2>/dev/null)
    mapfile -t new < <(shards_of "$stem")
    if [ "${rcs[0]}" -ne 0 ] && [ "${rcs[0]}" -ne 23 ]; then   # 23: sa1b-shard stopped reading
        drop "$stem" "download failed (curl exit ${rcs[0]})"; worse 3
    elif [ "${rcs[2]}" -ge 2 ]; then
        drop "$stem" "sa1b-shard exit ${rcs[2]}"; worse 3
    elif [ "${rcs[0]}" -ne 0 ]; then
        drop "$stem" "download failed (curl exit ${rcs[0]})"; worse 3
    elif [ -n "$want" ] && [ "$got" != "$want" ]; then
        drop "$stem" "SHA-256 $got, but '$sums' says $want"; worse 3
    elif [ "${rcs[1]}" -ne 0 ]; then
        drop "$stem" "tee exit ${rcs[1]}"; worse 3
    elif [ ${#new[@]} -eq 0 ] || ! sa1b-verify -q "${new[@]}" >/dev/null 2>&1; then
        drop "$stem" "the download ended early"; worse 3
    else
        printf '%s  %s\n' "$got" "$name" >"$out/$stem.tar.sha256"
        worse "${rcs[2]}"
    fi
done
exit "$status"
