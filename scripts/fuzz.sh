#!/usr/bin/env bash
# Fuzz every target of every fuzz crate for N seconds each: docstore-core
# (pg_docstore/core/fuzz), the rules compiler (rules-compiler/fuzz), the sidecar's pgoutput
# decoder and the gateways' JetStream payloads (livequery-sidecar/fuzz) and its HTTP routes, bodies and authorization
# (livequery-sidecar/fuzz-http).
#
#   scripts/fuzz.sh [SECONDS] [FUZZ_DIR ...]   # default 60 seconds per target, every crate
#
# Needs cargo-fuzz:  cargo install cargo-fuzz --version =0.13.2 --locked
# Works on stable Rust: cargo fuzz passes nightly-only flags, which RUSTC_BOOTSTRAP=1 allows.
# Builds with AddressSanitizer when it links, else without a sanitizer (FUZZ_SANITIZER=none
# forces that), and with debug assertions and overflow checks.
#
# libFuzzer runs in fork mode and keeps going after a crash, so every target gets its full
# time even while a committed seed-crash-* input still reproduces a known bug. New corpus
# entries go to <fuzz dir>/corpus/<target>/ (git keeps only the seed-* files there); crashing
# inputs go to <fuzz dir>/artifacts/<target>/. Exits non-zero if any target crashed.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [SECONDS]  (seconds per target, default 60)" >&2
    exit 2
fi

shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
if (($# > 0)); then
    fuzz_dirs=("$@")
else
    fuzz_dirs=(pg_docstore/core/fuzz rules-compiler/fuzz livequery-sidecar/fuzz
        livequery-sidecar/fuzz-http)
fi
cd "$root"
export RUSTC_BOOTSTRAP=1

log_dir="$(mktemp -d)"
trap 'rm -rf "$log_dir"' EXIT

crashed=()
summary=()
for fuzz_dir in "${fuzz_dirs[@]}"; do
    sanitizer="${FUZZ_SANITIZER:-address}"
    build=(cargo fuzz build --fuzz-dir "$fuzz_dir" --debug-assertions)
    if ! "${build[@]}" --sanitizer "$sanitizer"; then
        if [[ "$sanitizer" == none ]]; then
            exit 1
        fi
        echo "fuzz.sh: build of $fuzz_dir with --sanitizer $sanitizer failed; retrying with --sanitizer none" >&2
        sanitizer=none
        "${build[@]}" --sanitizer "$sanitizer"
    fi
    run=(cargo fuzz run --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" --debug-assertions)

    for target in $(cargo fuzz list --fuzz-dir "$fuzz_dir"); do
        echo "=== fuzz.sh: $fuzz_dir $target for ${seconds}s (sanitizer: $sanitizer)"
        artifacts="$fuzz_dir/artifacts/$target"
        mkdir -p "$artifacts"
        touch "$log_dir/$target.start"
        status=0
        "${run[@]}" "$target" -- -max_total_time="$seconds" -fork=1 -ignore_crashes=1 \
            2>&1 | tee "$log_dir/$target.log" || status=$?

        # libFuzzer's last progress line: "#<executions>: cov: ... time: <seconds>s ...".
        last="$(grep -E '^#[0-9]+: cov:' "$log_dir/$target.log" | tail -n 1 || true)"
        runs="$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")"
        took="$(grep -Eo 'time: [0-9]+s' <<<"$last" | grep -Eo '[0-9]+' || true)"
        new="$(find "$artifacts" -type f -newer "$log_dir/$target.start" | sort)"

        outcome=ok
        if [[ -n "$new" || "$status" -ne 0 ]]; then
            outcome=CRASHED
            crashed+=("$target")
        fi
        summary+=("$fuzz_dir $target: $outcome, ${runs:-?} executions in ${took:-?}s")
        for artifact in $new; do
            known=""
            for seed in "$fuzz_dir"/corpus/"$target"/seed-*; do
                if cmp -s "$artifact" "$seed"; then
                    known=" (the committed seed $(basename "$seed"))"
                fi
            done
            summary+=("  $artifact$known")
            # Replay it once to show why it crashed.
            "${run[@]}" "$target" "$artifact" 2>&1 \
                | grep -m 1 -A 1 -E 'panicked at|ERROR: ' | sed 's/^/    /' | cut -c1-400 \
                >>"$log_dir/$target.why" || true
            if [[ -s "$log_dir/$target.why" ]]; then
                while IFS= read -r line; do summary+=("$line"); done <"$log_dir/$target.why"
                : >"$log_dir/$target.why"
            fi
        done
    done
done

echo "=== fuzz.sh summary"
printf '  %s\n' "${summary[@]}"
if ((${#crashed[@]} > 0)); then
    echo "fuzz.sh: crashed: ${crashed[*]} (replay one: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir <dir> <target> <artifact>)" >&2
    exit 1
fi
