# encoder_decode.sh: the encoder's output read back by independent decoders.
# test/unit/test_profile builds a fixed CPU-style profile (75 samples in
# hot_inner inlined into work_hot, 25 in work_cold, both under main and libc)
# and writes its raw and gzipped encodings when PROFILE_OUT / PROFILE_OUT_GZ
# are set. protoc (with test/profile.proto) and go tool pprof then have to
# find the values that were put in, not merely parse the bytes.
. "$TOP/test/integration/lib.sh"

RAW="$WORK/p.pb"
GZ="$WORK/p.pb.gz"
PROFILE_OUT="$RAW" PROFILE_OUT_GZ="$GZ" "$BUILD/test/unit/test_profile" \
    >"$WORK/unit.out" 2>&1 || { cat "$WORK/unit.out" >&2; fail "test_profile failed"; }
[ -s "$RAW" ] || fail "test_profile did not write $RAW"
[ -s "$GZ" ] || fail "test_profile did not write $GZ"

# The gzip file is one gzip member holding exactly the raw message.
[ "$(head -c 2 "$GZ" | od -An -tx1 | tr -d ' \n')" = "1f8b" ] || fail "no gzip magic"
gzip -dc "$GZ" | cmp -s - "$RAW" || fail "gzip output does not inflate to the raw profile"

# ---- protoc --decode ------------------------------------------------------
DEC=$(protoc --decode=perftools.profiles.Profile --proto_path="$TOP/test" \
    "$TOP/test/profile.proto" <"$RAW" 2>"$WORK/protoc.err") ||
    { cat "$WORK/protoc.err" >&2; fail "protoc could not decode the profile"; }
printf '%s\n' "$DEC" >"$WORK/decoded.txt"

# Every field must be known to the schema (protoc prints unknown ones by
# number).
if printf '%s\n' "$DEC" | grep -Eq '^ *[0-9]+: '; then
    fail "protoc found fields that profile.proto does not define"
fi

first_string=$(grep -m1 '^string_table:' "$WORK/decoded.txt" || true)
[ "$first_string" = 'string_table: ""' ] || fail "string_table[0] is '$first_string', not \"\""
dups=$(grep '^string_table:' "$WORK/decoded.txt" | sort | uniq -d)
[ -z "$dups" ] || fail "duplicate strings: $dups"

# A schema decode keeps only the last of repeated scalars, so count the
# raw occurrences of field 9 (time_nanos): a second one makes pprof report
# "concatenated profiles detected".
RAWDEC=$(protoc --decode_raw <"$RAW") || fail "protoc --decode_raw failed"
n_time=$(printf '%s\n' "$RAWDEC" | grep -c '^9: ' || true)
[ "$n_time" = 1 ] || fail "time_nanos appears $n_time times, expected once"
expect_contains "$DEC" "time_nanos: 1700000000123456789" "protoc output"
expect_contains "$DEC" "duration_nanos: 1000000000" "protoc output"
expect_contains "$DEC" "period: 10000000" "protoc output"

# Resolve string indexes the way a reader would: string_table[i].
strs_file="$WORK/strings.txt"
sed -n 's/^string_table: "\(.*\)"$/\1/p' "$WORK/decoded.txt" >"$strs_file"
str() { sed -n "$(( $1 + 1 ))p" "$strs_file"; }
# top_field MESSAGE FIELD: the values of FIELD directly inside each top-level
# MESSAGE block, one per line.
top_field() {
    awk -v msg="$1" -v fld="$2" '
        /^[a-z_]+ \{$/ { cur = $1; next }
        /^\}$/ { cur = ""; next }
        cur == msg && $0 ~ "^  " fld ": " { sub("^  " fld ": ", ""); print }
    ' "$WORK/decoded.txt"
}

# top_strs MSG FIELD: the strings a top-level FIELD of MSG points at, each
# after a space.
top_strs() {
    out=""
    for i in $(top_field "$1" "$2"); do out="$out $(str "$i")"; done
    echo "$out"
}

# Sample types, period type and default sample type, through the table.
st=$(top_strs sample_type type)
[ "$st" = " samples cpu" ] || fail "sample types are '$st'"
su=$(top_strs sample_type unit)
[ "$su" = " count nanoseconds" ] || fail "sample units are '$su'"
[ "$(str "$(top_field period_type type)")" = cpu ] || fail "period_type.type"
[ "$(str "$(top_field period_type unit)")" = nanoseconds ] || fail "period_type.unit"
dflt=$(sed -n 's/^default_sample_type: //p' "$WORK/decoded.txt")
[ "$(str "$dflt")" = cpu ] || fail "default_sample_type is '$(str "$dflt")'"
drop=$(sed -n 's/^drop_frames: //p' "$WORK/decoded.txt")
[ "$(str "$drop")" = "malloc|free" ] || fail "drop_frames is '$(str "$drop")'"
comments=""
for i in $(sed -n 's/^comment: //p' "$WORK/decoded.txt"); do comments="$comments|$(str "$i")"; done
[ "$comments" = "|pprofagent encoder test|second comment" ] || fail "comments are '$comments'"

# Mappings: ids 1..N, main executable first, build id as lowercase hex.
[ "$(top_field mapping id | tr '\n' ' ')" = "1 2 " ] || fail "mapping ids: $(top_field mapping id | tr '\n' ' ')"
mfiles=$(top_strs mapping filename)
[ "$mfiles" = " /opt/encoder-test/demo /lib/x86_64-linux-gnu/libc.so.6" ] || fail "mapping files: $mfiles"
builds=$(top_strs mapping build_id)
[ "$builds" = " 0123456789abcdef0123456789abcdef01234567 93ac61ec" ] || fail "build ids: $builds"
[ "$(top_field mapping memory_start | head -n1)" = 4194304 ] || fail "mapping 1 start"
[ "$(top_field mapping file_offset)" = 155648 ] || fail "mapping 2 file_offset"
[ "$(top_field mapping has_functions | tr '\n' ' ')" = "true true " ] || fail "has_functions"
[ "$(top_field mapping has_inline_frames | tr '\n' ' ')" = "true " ] || fail "has_inline_frames"

# Functions and locations: ids 1..N in first-use order.
[ "$(top_field function id | tr '\n' ' ')" = "1 2 3 4 5 " ] || fail "function ids: $(top_field function id | tr '\n' ' ')"
fnames=""
for i in $(top_field function name); do fnames="$fnames $(str "$i")"; done
[ "$fnames" = " main work_hot hot_inner work_cold __libc_start_call_main" ] || fail "function names:$fnames"
[ "$(top_field function start_line | tr '\n' ' ')" = "10 40 30 50 " ] || fail "start lines"
[ "$(top_field location id | tr '\n' ' ')" = "1 2 3 4 " ] || fail "location ids: $(top_field location id | tr '\n' ' ')"
[ "$(top_field location address | tr '\n' ' ')" = "4198400 4198656 4198912 139637976731648 " ] || fail "location addresses"

# Samples: leaf-first location ids, one value per sample type, labels.
[ "$(top_field sample location_id | tr '\n' ' ')" = "2 1 4 3 1 4 " ] || fail "sample stacks: $(top_field sample location_id | tr '\n' ' ')"
[ "$(top_field sample value | tr '\n' ' ')" = "75 750000000 25 250000000 " ] || fail "sample values: $(top_field sample value | tr '\n' ' ')"
expect_contains "$DEC" "    num: 4096" "protoc output"
expect_contains "$DEC" "    num: -3" "protoc output"

# ---- go tool pprof ----------------------------------------------------------
# pprof from Go 1.2x prints a location's line as file:line:column; the
# profile sets no column, so ":0" is dropped to read both forms alike.
RAWTXT=$(pprof -raw "$GZ" | sed -E 's/(\.[A-Za-z]+:[0-9]+):0( |$)/\1\2/')
expect_contains "$RAWTXT" "PeriodType: cpu nanoseconds" "pprof -raw"
expect_contains "$RAWTXT" "Period: 10000000" "pprof -raw"
expect_contains "$RAWTXT" "Time: 2023-11-14 22:13:20.123456789 +0000 UTC" "pprof -raw"
expect_contains "$RAWTXT" "Duration: 1s" "pprof -raw"
expect_contains "$RAWTXT" "Comment: pprofagent encoder test" "pprof -raw"
expect_contains "$RAWTXT" "samples/count cpu/nanoseconds[dflt]" "pprof -raw"
printf '%s\n' "$RAWTXT" | grep -Eq '^ +75 +750000000: [0-9]+ [0-9]+ [0-9]+ *$' ||
    fail "pprof -raw lacks the 75-sample stack"
printf '%s\n' "$RAWTXT" | grep -Eq '^ +25 +250000000: [0-9]+ [0-9]+ [0-9]+ *$' ||
    fail "pprof -raw lacks the 25-sample stack"
expect_contains "$RAWTXT" "thread:[worker-1]" "pprof -raw"
expect_contains "$RAWTXT" "bytes:[4096 bytes]" "pprof -raw"
expect_contains "$RAWTXT" "delta:[-3]" "pprof -raw"
expect_contains "$RAWTXT" "0x401100 M=1 hot_inner demo.c:33 s=30" "pprof -raw"
expect_contains "$RAWTXT" "work_hot demo.c:41 s=40" "pprof -raw"
expect_contains "$RAWTXT" "0x401200 M=1 work_cold demo.c:55 s=50" "pprof -raw"
expect_contains "$RAWTXT" "0x400000/0x500000/0x0 /opt/encoder-test/demo 0123456789abcdef0123456789abcdef01234567 [FN][FL][LN][IN]" "pprof -raw"
expect_contains "$RAWTXT" "/lib/x86_64-linux-gnu/libc.so.6 93ac61ec [FN]" "pprof -raw"

# -top on the default sample type (cpu): 750 ms / 250 ms of 1 s.
TOPTXT=$(pprof -top "$GZ")
expect_contains "$TOPTXT" "Type: cpu" "pprof -top"
expect_contains "$TOPTXT" "Total samples = 1000ms" "pprof -top"
printf '%s\n' "$TOPTXT" | grep -Eq '^ +750ms +75\.00% +75\.00% +750ms +75\.00% +hot_inner' ||
    { printf '%s\n' "$TOPTXT" >&2; fail "pprof -top: hot_inner is not 750ms / 75%"; }
printf '%s\n' "$TOPTXT" | grep -Eq '^ +250ms +25\.00% +100% +250ms +25\.00% +work_cold$' ||
    { printf '%s\n' "$TOPTXT" >&2; fail "pprof -top: work_cold is not 250ms / 25%"; }
printf '%s\n' "$TOPTXT" | grep -Eq '^ +0 +0% +100% +1000ms +100% +main$' ||
    { printf '%s\n' "$TOPTXT" >&2; fail "pprof -top: main is not 100% cumulative"; }
printf '%s\n' "$TOPTXT" | grep -Eq '^ +0 +0% +100% +750ms +75\.00% +work_hot$' ||
    { printf '%s\n' "$TOPTXT" >&2; fail "pprof -top: work_hot is not 75% cumulative"; }

# The first sample type by index, from the uncompressed file (pprof must
# accept a raw protobuf as well).
CNT=$(pprof -top -sample_index=samples "$RAW")
expect_contains "$CNT" "Type: samples" "pprof -top -sample_index=samples"
printf '%s\n' "$CNT" | grep -Eq '^ +75 +75\.00% +75\.00% +75 +75\.00% +hot_inner' ||
    { printf '%s\n' "$CNT" >&2; fail "pprof -top -sample_index=samples: hot_inner is not 75"; }
printf '%s\n' "$CNT" | grep -Eq '^ +25 +25\.00% +100% +25 +25\.00% +work_cold$' ||
    { printf '%s\n' "$CNT" >&2; fail "pprof -top -sample_index=samples: work_cold is not 25"; }

# Tag filtering reads the string labels: only worker-2's 25 samples remain.
TAG=$(pprof -top -tagfocus=thread=worker-2 "$GZ")
expect_contains "$TAG" "Showing nodes accounting for 250ms" "pprof -top -tagfocus"
expect_not_contains "$TAG" "hot_inner" "pprof -top -tagfocus"

note "encoder output decoded by protoc and go tool pprof with the expected values"
