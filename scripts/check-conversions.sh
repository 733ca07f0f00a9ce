#!/usr/bin/env bash
# Checks that numeric conversions under Sources/ cannot stop the process; run by `make test`.
# Swift's Int64(x), Int(x), UInt8(x), … trap when the value does not fit, and every number from
# outside (advertisements, MQTT payloads, D-Bus values, configuration, the queue file) may not.
# A grep cannot know types, so this recognises the patterns it can tell reliably, in an
# unlabelled integer conversion `Int…(argument)` / `UInt…(argument)`:
#  - a floating argument: `.rounded(`, `Double`, `Float`, a floating literal (`0.5`, `1e3`),
#    `sqrt(`, `floor(`, `ceil(`, `pow(`, `.infinity`, `.nan`;
#  - a 64-bit reader or D-Bus value (`uintLE(`, `uintBE(`, `intLE(`, `intBE(`, `u64(`,
#    `readWord(`, `.uint64`, `.int64`) converted to a narrower type, or across signs (an
#    unsigned one to Int64, a signed one to UInt64);
# and a `Duration` built from a floating expression that is not a plain literal:
# `.seconds(x * 0.5)`, `.milliseconds(value.rounded())`.
# Checked forms pass: `Int(exactly:)`, `Int(clamping:)`, `Int(truncatingIfNeeded:)`,
# `Int(bitPattern:)`, `Int64(saturating:)` (Sources/JSON), and parsing `Int(text)`. A reviewed
# exception carries `// checked: <why it fits>` on the same line.
#
#   scripts/check-conversions.sh [PATH…]   scan PATHs (default Sources)
#   scripts/check-conversions.sh --self-test
set -euo pipefail
cd "$(dirname "$0")/.."

scan() {
  # shellcheck disable=SC2016 # a Perl program in single quotes: its $ are Perl's, not the shell's
  find "$@" -name '*.swift' -type f -print0 | sort -z | xargs -0 -r perl -e '
    my $int = qr/\b(?:U?Int(?:8|16|32|64)?|CInt|CUnsignedInt|CLong|CShort)\(/;
    my $float = qr/\.rounded\(|\bDouble\b|\bFloat(?:32|64|80)?\b|(?<![\w.])\d[\d_]*\.\d[\d_]*(?:[eE][+-]?\d+)?\b|(?<![\w.])\d[\d_]*[eE][+-]?\d+\b|\b(?:sqrt|floor|ceil|pow|exp|log)\(|\.(?:infinity|nan|pi)\b|\.squareRoot\(/;
    my $wide = qr/\b(?:uintLE|uintBE|intLE|intBE|u64|readWord)\(|\.u?int64\b/;
    my $status = 0;
    # The text between the parenthesis at $start (just after it) and its match; several lines.
    sub argument {
      my ($text, $start) = @_;
      my ($depth, $i, $quoted) = (1, $start, 0);
      while ($i < length $text) {
        my $c = substr($text, $i, 1);
        if ($quoted) { $quoted = 0 if $c eq "\"" && substr($text, $i - 1, 1) ne "\\"; }
        elsif ($c eq "\"") { $quoted = 1; }
        elsif ($c eq "(") { $depth++; }
        elsif ($c eq ")") { return substr($text, $start, $i - $start) if --$depth == 0; }
        $i++;
      }
      return substr($text, $start);
    }
    for my $file (@ARGV) {
      open(my $fh, "<", $file) or die "$file: $!";
      my @lines = <$fh>;
      close $fh;
      for my $n (0 .. $#lines) {
        my $line = $lines[$n];
        next if $line =~ m{^\s*//};
        next if $line =~ m{//\s*checked:\s*\S};
        my $code = $line;
        $code =~ s{\s//\s.*$}{};
        my $text = join("", @lines[$n .. ($n + 4 > $#lines ? $#lines : $n + 4)]);
        my $problem;
        while ($code =~ /($int)/g) {
          my $type = substr($1, 0, -1);
          my $arg = argument($text, pos($code));
          next if $arg =~ /^\s*[A-Za-z_][A-Za-z0-9_]*\s*:/;    # exactly:, clamping:, bitPattern:, …
          if ($arg =~ $float) { $problem = "$type(…) of a floating value traps on NaN, infinity and out-of-range values; use $type(exactly:) with an error, or $type(saturating:)"; last; }
          if ($arg =~ $wide && $type !~ /64$/) { $problem = "$type(…) of a 64-bit value traps when it does not fit; check the range or use $type(exactly:)"; last; }
          if ($arg =~ /\b(?:uintLE|uintBE|u64|readWord)\(|\.uint64\b/ && $type eq "Int64") { $problem = "Int64(…) of a UInt64 traps above Int64.max; use Int64(exactly:) or Int64(bitPattern:)"; last; }
          if ($arg =~ /\b(?:intLE|intBE)\(|\.int64\b/ && $type eq "UInt64") { $problem = "UInt64(…) of an Int64 traps below 0; use UInt64(exactly:) or UInt64(bitPattern:)"; last; }
        }
        if (!$problem) {
          while ($code =~ /\.(?:seconds|milliseconds|microseconds|nanoseconds)\(/g) {
            my $arg = argument($text, pos($code));
            next if $arg =~ /^\s*[\d_.eE+-]+\s*$/;          # a literal: fits, or the compiler says so
            next if $arg =~ /^\s*$int/;                      # converted (and checked) by the inner call
            if ($arg =~ $float) { $problem = "a Duration of a floating expression traps beyond about 9e15 s or on NaN; convert with Int64(saturating:) first"; last; }
          }
        }
        if ($problem) {
          my $shown = $line; $shown =~ s/^\s+|\s+$//g;
          printf STDERR "conversions: %s:%d: %s\n    %s\n", $file, $n + 1, $problem, $shown;
          $status = 1;
        }
      }
    }
    exit $status;
  ' -- 
}

self_test() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/check-conversions.XXXXXX")
  # One pattern a line; every line of bad.swift must be reported, none of good.swift.
  cat >"$dir/bad.swift" <<'EOF'
let a = Int64(seconds * 1000.0)
let b = Int(x.rounded())
let c = Int64(config.interval * 1e3)
let d = UInt8(Double(text) ?? 0)
let e = Int32(Float(value))
let f = Int64(try reader.uintLE(8))
let g = Int(try reader.uintBE(8))
let h = UInt32(reader.u64(bytes, 0))
let i = Int(value.uint64!)
let j = UInt64(try reader.intLE(8))
let k = Int(min(255, max(0, scaled.rounded())))
let l = UInt64(max(0, interval) * 1e9)
let m = Int16(min(max(rssi.rounded(), -127), 20))
let n = Task.sleep(for: .seconds(duration * 0.5))
let o = Duration.milliseconds(interval.rounded())
let p = Int(sqrt(variance))
let q = Int(
    elapsed * 1.5)
let r = "\(Int(value / 1e6)) MB"
let s = CInt(Double.pi)
EOF
  cat >"$dir/good.swift" <<'EOF'
let a = Int64(exactly: seconds * 1000)
let b = Int(exactly: x.rounded())
let c = Int64(saturating: config.interval * 1e3)
let d = UInt8(clamping: count)
let e = UInt32(truncatingIfNeeded: try reader.uintLE(4))
let f = UInt64(bitPattern: Int64(exactly: x.rounded()) ?? 0)
let g = Int(text)
let h = UInt16(digits, radix: 16)
let i = Int(byte)
let j = UInt64(try reader.uintLE(8))
let k = Int64(try reader.intLE(8))
let l = Int(rssi)
let m = UInt8(ascii: "a")
let n = Int32(MOSQ_ERR_NOMEM.rawValue)
let o = Task.sleep(for: .seconds(0.5))
let p = Duration.milliseconds(Int64(saturating: timeout * 1000))
let q = Int(bucket.rounded()) // checked: bucket is clamped to 0…255 two lines up
// let r = Int(x.rounded()) in a comment
let s = Int(0x1e3)
let t = [UInt8](repeating: 0, count: 4)
let u = Int64(value.int64 ?? 0)
let v = Task.sleep(for: .seconds(10))
EOF
  local failed=0 expected reported
  expected=$(wc -l <"$dir/bad.swift")
  reported=$(scan "$dir/bad.swift" 2>&1 | grep -c '^conversions: ' || true)
  # Line 17 starts a conversion that continues on line 18: one report for the two.
  if [ "$reported" -ne $((expected - 1)) ]; then
    echo "conversions self-test: expected $((expected - 1)) reports on the risky patterns, got $reported:" >&2
    scan "$dir/bad.swift" >&2 || true
    failed=1
  fi
  if ! scan "$dir/good.swift" >/dev/null 2>"$dir/good.out"; then
    echo "conversions self-test: checked forms were reported:" >&2
    cat "$dir/good.out" >&2
    failed=1
  fi
  [ $failed -eq 0 ] && echo "conversions: self-test ok ($reported risky patterns caught, $(wc -l <"$dir/good.swift") checked forms passed)"
  rm -rf "$dir"
  return $failed
}

if [ "${1:-}" = --self-test ]; then
  self_test
  exit $?
fi
if scan "${@:-Sources}"; then
  echo "conversions: ok (no unchecked floating or 64-bit narrowing conversion under ${*:-Sources})"
else
  echo "conversions: use a checked form, or mark a reviewed exception with '// checked: <why it fits>'" >&2
  exit 1
fi
