/*
 * kit_units — the value grammars every kind validates with (part of the
 * validation kit, common/kit.h): durations, sizes, signals.
 *
 * Parsers take a counted string (msgpack strings are not NUL-terminated),
 * never allocate, never block, and return 0 or -EINVAL (garbage, a sign,
 * an unknown unit) / -ERANGE (the value does not fit).  On failure *out is
 * left untouched.  Formatters write the shortest exact text into a
 * caller-owned buffer (KIT_UNIT_BUF bytes are always enough) and return it,
 * so that parse(format(x)) == x for every x a parser can produce.
 */
#ifndef TANK_KIT_UNITS_H
#define TANK_KIT_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define KIT_UNIT_BUF 32

/* Largest duration accepted, in ms: keeps `now_ms + d` and `base << n`
 * arithmetic in the reconciler far from int64 overflow (≈ 292 years). */
#define KIT_DURATION_MAX_MS ((uint64_t)1 << 53)

/* "250ms", "10s", "5m", "1h", or a bare integer meaning milliseconds.
 * Decimal digits only: no sign, no fraction, no spaces, no compound
 * ("1m30s") forms — one spelling per value keeps the grammar small. */
int kit_parse_duration(const char *s, size_t len, uint64_t *out_ms);

/* Largest unit that divides exactly: 60000 → "1m", 1500 → "1500ms",
 * 0 → "0s". */
const char *kit_format_duration(uint64_t ms, char buf[KIT_UNIT_BUF]);

/* A bare integer of bytes, or an integer with a suffix: K M G T P E
 * (powers of 1000; k is accepted for K) or Ki Mi Gi Ti Pi Ei (powers of
 * 1024), as Kubernetes spells quantities. */
int kit_parse_size(const char *s, size_t len, uint64_t *out_bytes);

/* Shortest exact spelling; binary suffixes win ties: 65536 → "64Ki",
 * 1000 → "1K", 1500 → "1500". */
const char *kit_format_size(uint64_t bytes, char buf[KIT_UNIT_BUF]);

/* "TERM", "SIGTERM" (case-insensitive), "RTMIN+3", or a decimal number in
 * 1..SIGRTMAX.  -EINVAL for anything else. */
int kit_parse_signal(const char *s, size_t len, int *out_signo);

/* Short name without "SIG" ("TERM"), "RTMIN+n" for real-time signals, or
 * the decimal number when the signal has no name. */
const char *kit_format_signal(int signo, char buf[KIT_UNIT_BUF]);

#endif
