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
#                  error; not one of DIR's own NAME.tar.sha256 marks, which
#                  a tar streamed again loses first (exit 2: give a copy)
#   --retries N    a download that fails on the way (a reset, a stall of
#                  5 minutes) is done again from the start, up to N times
#                  (default 3)
#   -h, --help     show this help and exit
# Options after "--" go to sa1b-shard (e.g. --image-size 256).  Needs curl,
# sha256sum, jq, and sa1b-shard, sa1b-verify and sa1b-inspect on PATH.
#
# Checksums: SA-1B's link file carries none (only file names and URLs), and
# Meta publishes none, so a first download can only be checked for being
# whole: curl --fail refuses HTTP errors, and sa1b-shard reports a tar that
# ends early (a cut download) and records each input's size and CRC32C in
# the shard's provenance.  The script writes the SHA-256 of the bytes it
# streamed to DIR/NAME.tar.sha256; with --sums, a later download (or one
# from a mirror) is checked against it.  sa1b-shard writes into a folder
# of its own in DIR (DIR/.sa1b-stream.NAME.XXXXXX), whose shards replace
# the tar's in DIR only once every check passed.  A download that fails
# (curl's status), ends early, or has the wrong SHA-256 leaves no shard of
# its own, with one line saying why; the tar's shards that were there
# before stay, unmarked: the next run streams it again.  SIGTERM, SIGINT
# or SIGHUP while the checked shards go in place waits until all are; a
# run killed there otherwise (SIGKILL) leaves its folder, marked .in-place,
# which later runs leave alone (it may hold the only copy of those shards)
# until the tar's shards in place are its own.
#
# DIR/NAME.tar.sha256 is written last, once every check passed: it marks
# the tar as done (a run killed before it leaves no mark).  A tar is skipped
# when its mark is there (with --sums, holding FILE's SHA-256) and its
# complete shard (sa1b-verify) carries the provenance this run's options
# would write, compared as sa1b-shard --skip-existing compares it (the
# input's name, the part and the options; the tar's size is not asked for:
# the SHA-256 stands for its bytes); anything else is streamed again, its
# mark removed first (unless it is a checksum line of the tar: then,
# without --sums, the download must match it, and it stays; a mirror's
# NAME.tar.sha256 beside its tars is one), with one line saying why.  So
# the same command, run
# again, streams only what is missing, unfinished or made with other
# options.  Several at once, with GNU parallel:
#   tail -n +2 links.txt | cut -f1 |
#       parallel -j4 contrib/sa1b-stream.sh -t 2 -o shards/ links.txt {}
#
# LINKS with two lines of one NAME, or a NAME given twice, is refused (exit
# 2) before anything is streamed: two runs would write one shard.
#
# For the test suite: SA1B_STREAM_TEST_KILL=shard makes the script kill
# itself (SIGTERM) right after a tar's checked shards were put in place,
# before the mark, as a run killed there would stop.
#
# Exit status: 0 every tar sharded cleanly; 1 some samples skipped; 3 a
# download failed, ended early or had the wrong checksum, a tar could not
# be sharded, another run was streaming it into DIR, or LINKS names a tar
# by a path or has a line that is not NAME<TAB>URL (before anything is
# streamed); 2 usage error
# (sa1b-shard's options included), a NAME not in LINKS, two of one NAME,
# or a file in DIR of a name its shards take that is another tar's shard
# or no shard (without --force after --), left as it was (at the shard's
# name, or part 0's, found before anything is downloaded).
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
case $threads in *[!0-9]*|0) die "-t wants a positive number, not '$threads'" ;; esac
case $retries in ''|*[!0-9]*) die "--retries wants a number, not '$retries'" ;; esac
for tool in curl sha256sum sa1b-shard sa1b-verify sa1b-inspect jq flock; do
    command -v "$tool" >/dev/null || { echo "$prog: $tool not found" >&2; exit 3; }
done
[ -r "$links" ] || { echo "$prog: cannot read '$links'" >&2; exit 3; }
[ -z "$sums" ] || [ -r "$sums" ] || { echo "$prog: cannot read '$sums'" >&2; exit 3; }
if [ "$(head -n 1 "$links" | tr -d '\r')" != "$(printf 'file_name\tcdn_link')" ]; then
    echo "$prog: '$links': not an SA-1B link file (its first line is not \"file_name<TAB>cdn_link\")" >&2
    exit 3
fi
# every line after the header is "NAME<TAB>URL" (an empty one aside)
bad=$(awk -F'\t' 'NR > 1 { sub(/\r$/, "") }
    NR > 1 && $0 != "" && (NF < 2 || $1 == "" || $2 == "") { print NR; exit }' "$links")
if [ -n "$bad" ]; then
    echo "$prog: '$links': line $bad is not \"NAME<TAB>URL\" (a tar's file name, a TAB, its link)" >&2
    exit 3
fi
# the URL of a tar named in LINKS, empty when it is not there
url_of() { awk -F'\t' -v n="$1" 'NR > 1 { sub(/\r$/, "") } NR > 1 && $1 == n { print $2; exit }' "$links"; }
if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <(awk -F'\t' 'NR > 1 && $1 != "" { print $1 }' "$links")
fi
dup=$(awk -F'\t' 'NR > 1 { sub(/\r$/, "") }
    NR > 1 && $1 != "" { s = $1; sub(/\.tar$/, "", s)
        if (s in line) { printf "lines %d and %d (\047%s\047, \047%s\047)", line[s], NR, name[s], $1; exit }
        line[s] = NR; name[s] = $1 }' "$links")
[ -z "$dup" ] || die "'$links': $dup would both write one shard"
for i in "${!names[@]}"; do
    n=${names[$i]}
    [ -n "$(url_of "$n")" ] || die "'$links' has no line for '$n'"
    case $n in   # a name, never a path: DIR/NAME.shard and its mark stay in DIR
        */*|.tar|..tar) echo "$prog: '$links': '$n' is not a tar's file name" >&2; exit 3 ;;
    esac
    for ((k = 0; k < i; k++)); do
        [ "${names[$k]}" != "$n" ] || die "'$n' is given twice"
    done
done
# a tar streamed again loses its mark first: --sums naming one of them (as
# an earlier run's DIR/NAME.tar.sha256 may be) would be removed with it
if [ -n "$sums" ]; then
    sid=$(stat -L -c %d:%i -- "$sums") || exit 3
    for n in "${names[@]}"; do
        f="$out/${n%.tar}.tar.sha256"
        if [ -e "$f" ] && [ "$(stat -L -c %d:%i -- "$f")" = "$sid" ]; then
            die "--sums '$sums' is '$f', the mark of '$n', which is removed when the tar is streamed again: give a copy (cat '$out'/*.tar.sha256 >SHA256SUMS)"
        fi
    done
fi
mkdir -p "$out" || exit 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sa1b-stream.XXXXXX") || exit 3
if [ -n "$sums" ]; then   # read once (a FIFO, <(...)), as sha256sum -c reads it: CR line ends, any case, *NAME
    tr -d '\r' <"$sums" | awk '/^[[:space:]]*(#|$)/ { next }
        { h = tolower($1); n = $0; sub(/^[^ \t]+[ \t]+\*?/, "", n); print h "  " n }' >"$tmp/sums" || exit 3
fi
stage=""   # the folder sa1b-shard writes the current tar's shards into
# (a stage marked .in-place may hold the only copy of a tar's shards: kept)
trap 'rm -rf "$tmp"; [ -z "$stage" ] || [ -e "$stage/.in-place" ] || rm -rf "$stage"' EXIT

# The provenance sa1b-shard writes with these options, from a run over an
# empty tar (also refuses bad options before anything is streamed; an
# input with no member is exit 1, "no member", and still gives its shard)
head -c 1024 /dev/zero >"$tmp/empty.tar" || exit 3
sa1b-shard -q -j 1 "$@" --name probe -o "$tmp/probe/" - <"$tmp/empty.tar" >/dev/null 2>"$tmp/probe.err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
    cat "$tmp/probe.err" >&2
    echo "$prog: sa1b-shard refuses the options after -- (exit $rc)" >&2
    [ $rc -eq 2 ] && exit 2
    exit 3
fi
probe=$(compgen -G "$tmp/probe/probe*.shard" | head -n 1)
want_prov=$(sa1b-inspect "$probe" | jq -c 'select(.type == "shard") | .provenance | {tool, options}') || want_prov=""
[ -n "$want_prov" ] || { echo "$prog: cannot read the provenance of '$probe'" >&2; exit 3; }
max_images=$(jq -r '.options.max_images' <<<"$want_prov")

# the shards of one stem in a folder (one file, or the parts of --max-images, in order)
# (sorted: compgen -G gives them in the folder's order, and parts go in last first)
shards_in() { { compgen -G "$1/$2.shard" || true; compgen -G "$1/$2-[0-9][0-9][0-9][0-9][0-9].shard" || true; } |
    LC_ALL=C sort; }
shards_of() { shards_in "$out" "$1"; }
drop() { # stem why...: removes what the failed download wrote (its stage); a shard there before stays,
    local stem=$1; shift  # unmarked: a rerun streams the tar again
    rm -rf -- "$stage"
    stage=""
    if [ -n "$(shards_of "$stem")" ]; then
        echo "$prog: '$stem.tar': $*: the shard there before is kept, not marked done" >&2
    else
        echo "$prog: '$stem.tar': $*: no shard kept" >&2
    fi
}
# owner FILE: "INPUT" when FILE is a shard of sa1b-shard made from the tar
# of that name, else nothing
owner() { sa1b-inspect -- "$1" 2>/dev/null | jq -r 'select(.type == "shard") | .provenance |
    select(.tool == "sa1b-shard") | .input // empty' 2>/dev/null | head -n 1; }
force=0   # sa1b-shard's --force among the options: a file that is no shard may be replaced
for a in "$@"; do [ "$a" = --force ] && force=1; done
# put_in_place stem: the stage's shards replace the tar's in DIR as
# sa1b-shard's commit would: a name of the new set that holds a file of
# something else (another tar's shard; a file that is no shard, unless
# --force) stops it before anything changes (exit 2); then the tar's old
# part 0 goes first, then its old parts the new set does not replace
# (another tar's files of such names stay), and the new parts are renamed
# in last first, so that part 0 there means a whole set.  From the first
# removal on, the stage may hold the only copy of the tar's shards: it is
# marked .in-place (a run killed meanwhile leaves it, and later runs leave
# it alone), and SIGTERM, SIGINT or SIGHUP wait until the moves are done.
# 0, 1 (a file could not be moved: the stage is kept), 2 (refused).
put_in_place() {
    local stem=$1 f b who i new old gone=()
    mapfile -t new < <(shards_in "$stage" "$stem")
    [ ${#new[@]} -gt 0 ] || { echo "$prog: '$stem.tar': its shards are gone from '$stage'" >&2; return 1; }
    mapfile -t old < <(shards_of "$stem")
    for f in "${old[@]}"; do
        b=${f##*/} who=$(owner "$f")
        if [ "$who" = "$stem" ]; then
            gone+=("$f")
        elif [ -e "$stage/$b" ] && { [ -n "$who" ] || [ $force = 0 ]; }; then
            if [ -n "$who" ]; then
                echo "$prog: '$stem.tar': '$f' is a shard of '$who': not replaced (shard them into different folders)" >&2
            else
                echo "$prog: '$stem.tar': '$f' exists and is not a shard of sa1b-shard: not replaced (--force after -- replaces it)" >&2
            fi
            return 2
        elif [ -e "$stage/$b" ]; then
            gone+=("$f")   # no shard, --force
        fi
    done
    : >"$stage/.in-place" || return 1
    caught=""
    trap 'caught=TERM' TERM
    trap 'caught=INT' INT
    trap 'caught=HUP' HUP
    move_in "$stem" "${#new[@]}" "${new[@]}" "${gone[@]}"
    i=$?
    trap - TERM INT HUP
    [ -z "$caught" ] || kill -s "$caught" $$
    return $i
}
# move_in stem N NEW... GONE...: put_in_place's removals and moves
move_in() {
    local stem=$1 n=$2 f i
    shift 2
    local new=("${@:1:n}") gone=("${@:n+1}")
    for f in "$out/$stem.shard" "$out/$stem-00000.shard"; do   # part 0 first
        if printf '%s\n' "${gone[@]}" | grep -Fqx -- "$f"; then rm -f -- "$f" || return 1; fi
    done
    for f in "${gone[@]}"; do rm -f -- "$f" || return 1; done
    for ((i = ${#new[@]} - 1; i >= 0; i--)); do
        mv -f -- "${new[$i]}" "$out/" || return 1
    done
    sync -- "$out" 2>/dev/null
    rm -rf -- "$stage"
    stage=""
}
# drop_copies NAME STEM: once the tar's shards are in place and marked,
# the folders of earlier runs that ended while they put theirs in place
# (.in-place, left alone so far: they may have held the only copy) go
# where each shard they hold has the bytes of the file of its name in DIR
drop_copies() {
    local f s same
    for f in "$out/.sa1b-stream.$2."??????; do
        { [ -e "$f/.in-place" ] && flock -n "$f/.lock" true 2>/dev/null; } || continue
        same=1
        while IFS= read -r s; do cmp -s -- "$s" "$out/${s##*/}" || same=0; done < <(shards_in "$f" "$2")
        if [ $same = 1 ] && rm -rf -- "$f"; then
            echo "$prog: '$1': removed '$f', the folder of a run that ended while it put its shards in place (they are those now in '$out')" >&2
        fi
    done
}

# mark_hash FILE NAME: the SHA-256 (lower case) of FILE when it is a
# checksum line of the tar NAME in sha256sum's format (as --sums takes it:
# CR line end, any case, *NAME), else status 1
mark_hash() {
    local line
    # 2>/dev/null first: it then also quiets the shell's own line when
    # FILE cannot be opened (a first download has no mark yet)
    line=$(tr -d '\r' 2>/dev/null <"$1") || return 1
    [[ $line =~ ^([0-9a-fA-F]{64})[\ \	]+\*?(.*)$ ]] && [ "${BASH_REMATCH[2]}" = "$2" ] || return 1
    tr 'A-F' 'a-f' <<<"${BASH_REMATCH[1]}"
}

# done_already NAME STEM WANT: 0 when the tar is done (see the header), else 1
# with the reason in $why ("" when nothing of it is there)
done_already() {
    local name=$1 stem=$2 want=$3 mark="$out/$2.tar.sha256" k f parts=()
    why=""
    if [ "$max_images" = 0 ]; then
        [ -e "$out/$stem.shard" ] && parts=("$out/$stem.shard")
    else
        for ((k = 0; ; k++)); do
            f=$(printf '%s/%s-%05d.shard' "$out" "$stem" "$k")
            [ -e "$f" ] || break
            parts+=("$f")
        done
    fi
    if [ ! -e "$mark" ]; then
        [ ${#parts[@]} -gt 0 ] && why="its shard has no '$mark' (the run that made it did not finish)"
        return 1
    fi
    local have
    have=$(mark_hash "$mark" "$name") || { why="'$mark' is not its checksum line"; return 1; }
    if [ -n "$want" ] && [ "$have" != "$want" ]; then
        why="'$mark' says SHA-256 $have, but '$sums' says $want"; return 1
    fi
    if [ ${#parts[@]} -eq 0 ]; then
        if [ -n "$(shards_of "$stem")" ]; then why="its shard was made with other options"; else why="its shard is missing"; fi
        return 1
    fi
    if ! sa1b-verify -q "${parts[@]}" >/dev/null 2>&1; then why="its shard is not complete"; return 1; fi
    for k in "${!parts[@]}"; do
        sa1b-inspect "${parts[$k]}" 2>/dev/null |
            jq -n -e --argjson w "$want_prov" --arg s "$stem" --argjson k "$k" '[inputs | select(.type == "shard")] |
                length == 1 and (.[0].provenance | .tool == $w.tool and .options == $w.options and .input == $s and .part == $k)' \
                >/dev/null ||
            { why="its shard was made with other options"; return 1; }
    done
    # the samples the run that made it skipped (its last part records them)
    lacks=$(sa1b-inspect "${parts[${#parts[@]} - 1]}" 2>/dev/null |
        jq -r 'select(.type == "shard") | .provenance.samples_skipped // 0' 2>/dev/null | head -n 1)
    return 0
}

status=0
worse() { [ "$1" -gt "$status" ] && status=$1; return 0; }
for name in "${names[@]}"; do
    stem=${name%.tar}
    want=""
    if [ -n "$sums" ]; then
        want=$(awk -v n="$name" '{ h = $1; sub(/^[^ ]+  /, "") } $0 == n { print h; exit }' "$tmp/sums")
        if [ -z "$want" ]; then
            echo "$prog: '$sums' has no checksum for '$name'" >&2; worse 3; continue
        fi
    fi
    if done_already "$name" "$stem" "$want"; then
        if [ "${lacks:-0}" -gt 0 ] 2>/dev/null; then   # as sa1b-shard --skip-existing says it: exit 1
            echo "$prog: '$name': complete shard exists, skipped; it lacks $lacks sample(s) that the run which made it skipped" >&2
            worse 1
        else
            echo "$prog: '$name': complete shard exists, skipped" >&2
        fi
        continue
    fi
    # a file at the name the new shard surely takes (the shard, or part 0)
    # that put_in_place would refuse (another tar's shard; no shard,
    # without --force) stops it now, not after the download (11 GB)
    clash="" f="$out/$stem.shard"
    [ "$max_images" = 0 ] || f=$(printf '%s/%s-%05d.shard' "$out" "$stem" 0)
    if [ -e "$f" ]; then
        who=$(owner "$f")
        if [ -n "$who" ] && [ "$who" != "$stem" ]; then
            clash="'$f' is a shard of '$who': not replaced (shard them into different folders)"
        elif [ -z "$who" ] && [ $force = 0 ]; then
            clash="'$f' exists and is not a shard of sa1b-shard: not replaced (--force after -- replaces it)"
        fi
    fi
    if [ -n "$clash" ]; then
        echo "$prog: '$name': $clash: not streamed" >&2
        worse 2; continue
    fi
    [ -z "$why" ] || echo "$prog: '$name': $why: streaming it again" >&2
    # without --sums, a checksum line of the tar already at the mark's name
    # (an earlier run's mark, or a mirror's NAME.tar.sha256 beside its
    # tars) is what the download must match, and stays (a kill leaves it
    # beside no shard, or the old one of other options: still unfinished);
    # anything else there goes first: from here until it is written again,
    # a kill leaves the tar looking unfinished
    from=$sums
    mark="$out/$stem.tar.sha256"
    if [ -z "$want" ] && want=$(mark_hash "$mark" "$name"); then
        from=$mark
    else
        rm -f "$mark" || { worse 3; continue; }
    fi
    rm -f "$mark.tmp" || { worse 3; continue; }
    # the folders of this tar's earlier runs: a live run's (it holds the
    # lock in it: two runs would write one shard) stops this one; a killed
    # run's goes, in one line, but one killed while it put its checked
    # shards in place (.in-place) stays: it may hold their only copy
    busy=""
    for f in "$out/.sa1b-stream.$stem."??????; do
        [ -d "$f" ] || continue
        if flock -n "$f/.lock" true 2>/dev/null && [ -e "$f/.in-place" ]; then
            echo "$prog: '$name': '$f' holds shards of a run that ended while it put them in place (they may be the only copy of them): left alone" >&2
        elif flock -n "$f/.lock" true 2>/dev/null; then
            rm -rf -- "$f" && echo "$prog: '$name': removed '$f', the folder of a run that ended before finishing" >&2
        else
            busy=$f
        fi
    done
    if [ -n "$busy" ]; then
        echo "$prog: '$name': another run is streaming it into '$out' (its folder '$busy' is in use): skipped" >&2
        worse 3; continue
    fi
    # a download that fails on the way (a reset, a stall: no byte for 5
    # minutes) is done again from the start, into a stage of its own, up
    # to --retries times: curl's own --retry would append the new transfer
    # to the bytes already in the pipe (curl -q: no ~/.curlrc adds it)
    tries=0
    while :; do
        stage=$(mktemp -d "$out/.sa1b-stream.$stem.XXXXXX") || break
        if ! { exec 9>"$stage/.lock"; } || ! flock -n 9; then   # held until the next tar's (or the end)
            echo "$prog: '$name': cannot lock '$stage/.lock'" >&2; rm -rf "$stage"; stage=""; break
        fi
        rm -f "$tmp/fifo" "$tmp/sum"
        mkfifo "$tmp/fifo" || exit 3
        sha256sum <"$tmp/fifo" >"$tmp/sum" &
        sumpid=$!
        curl -q --fail --silent --show-error --location --speed-limit 1024 --speed-time 300 \
            --url "$(url_of "$name")" |
            tee "$tmp/fifo" |
            sa1b-shard -q --json-summary ${threads:+-j "$threads"} --name "$stem" "$@" -o "$stage/" - >"$tmp/summary"
        rcs=("${PIPESTATUS[@]}")
        case ${rcs[0]} in   # transient: connect, partial, stall, TLS, empty reply, send/recv, HTTP/2 stream
            6|7|18|28|35|52|55|56|92)
                if [ $tries -lt "$retries" ]; then
                    wait "$sumpid"
                    tries=$((tries + 1))
                    echo "$prog: '$name': download failed (curl exit ${rcs[0]}): trying again from the start ($tries of $retries)" >&2
                    rm -rf -- "$stage"
                    stage=""
                    continue
                fi ;;
        esac
        break
    done
    [ -n "$stage" ] || { worse 3; continue; }
    cut=$(jq -r '.inputs_cut_short' "$tmp/summary" 2>/dev/null) || cut=""
    wait "$sumpid"
    got=$(cut -d' ' -f1 "$tmp/sum" 2>/dev/null)
    mapfile -t new < <(shards_in "$stage" "$stem")
    if [ "${rcs[0]}" -ne 0 ] && [ "${rcs[0]}" -ne 23 ]; then   # 23: sa1b-shard stopped reading
        drop "$stem" "download failed (curl exit ${rcs[0]})"; worse 3
    elif [ "${rcs[2]}" -ge 2 ]; then
        drop "$stem" "sa1b-shard exit ${rcs[2]}"; worse 3
    elif [ "${rcs[0]}" -ne 0 ]; then
        drop "$stem" "download failed (curl exit ${rcs[0]})"; worse 3
    elif [ -n "$want" ] && [ "$got" != "$want" ]; then
        drop "$stem" "SHA-256 $got, but '$from' says $want"; worse 3
    elif [ "${rcs[1]}" -ne 0 ]; then
        drop "$stem" "tee exit ${rcs[1]}"; worse 3
    elif [ "$cut" != 0 ] || [ ${#new[@]} -eq 0 ] || ! sa1b-verify -q "${new[@]}" >/dev/null 2>&1; then
        drop "$stem" "the download ended early"; worse 3
    elif put_in_place "$stem"; rc=$?; [ $rc = 2 ]; then
        drop "$stem" "its shards are not put in place"; worse 2
    elif [ $rc != 0 ]; then
        echo "$prog: '$name': cannot put its shards in place in '$out' (the shards of '$stage' are kept)" >&2
        stage=""
        worse 3
    else
        [ "${SA1B_STREAM_TEST_KILL:-}" = shard ] && kill -TERM $$
        if ! printf '%s  %s\n' "$got" "$name" >"$out/$stem.tar.sha256.tmp" ||
            ! mv -f "$out/$stem.tar.sha256.tmp" "$out/$stem.tar.sha256"; then
            rm -f "$out/$stem.tar.sha256.tmp"
            echo "$prog: '$name': cannot write '$out/$stem.tar.sha256': its shard is kept but not marked done" >&2
            worse 3
        else
            worse "${rcs[2]}"
            drop_copies "$name" "$stem"
        fi
    fi
done
exit "$status"
