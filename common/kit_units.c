#include "common/kit_units.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Leading decimal digits of s[0..len) into *v; returns how many were
 * consumed, 0 if none, -ERANGE on overflow. */
static int parse_digits(const char *s, size_t len, uint64_t *v)
{
	uint64_t acc = 0;
	size_t i = 0;

	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (acc > (UINT64_MAX - d) / 10)
			return -ERANGE;
		acc = acc * 10 + d;
	}
	*v = acc;
	return (int)(i > 0x7fffffff ? 0x7fffffff : i);
}

static int suffix_is(const char *s, size_t len, const char *suf)
{
	return len == strlen(suf) && memcmp(s, suf, len) == 0;
}

static const struct {
	const char *suf;
	uint64_t mult;
} duration_units[] = {
	{ "ms", 1 },
	{ "s", 1000 },
	{ "m", 60 * 1000 },
	{ "h", 60 * 60 * 1000 },
};

int kit_parse_duration(const char *s, size_t len, uint64_t *out_ms)
{
	uint64_t v, mult = 1;
	int n;

	if (!s)
		return -EINVAL;
	n = parse_digits(s, len, &v);
	if (n < 0)
		return n;
	if (n == 0)
		return -EINVAL;
	if ((size_t)n < len) {
		size_t i, found = 0;
		for (i = 0; i < sizeof duration_units / sizeof *duration_units; i++) {
			if (suffix_is(s + n, len - (size_t)n, duration_units[i].suf)) {
				mult = duration_units[i].mult;
				found = 1;
				break;
			}
		}
		if (!found)
			return -EINVAL;
	}
	if (v > KIT_DURATION_MAX_MS / mult)
		return -ERANGE;
	*out_ms = v * mult;
	return 0;
}

const char *kit_format_duration(uint64_t ms, char buf[KIT_UNIT_BUF])
{
	size_t i = sizeof duration_units / sizeof *duration_units;

	if (ms == 0) {
		snprintf(buf, KIT_UNIT_BUF, "0s");
		return buf;
	}
	while (i-- > 0) {
		if (ms % duration_units[i].mult == 0) {
			snprintf(buf, KIT_UNIT_BUF, "%llu%s",
				 (unsigned long long)(ms / duration_units[i].mult),
				 duration_units[i].suf);
			break;
		}
	}
	return buf;
}

/* Binary suffixes first so that they win ties in kit_format_size. */
static const struct {
	const char *suf;
	unsigned shift;    /* binary: mult = 1 << shift */
	unsigned pow10;    /* decimal: mult = 1000^pow10 */
} size_units[] = {
	{ "Ki", 10, 0 }, { "Mi", 20, 0 }, { "Gi", 30, 0 },
	{ "Ti", 40, 0 }, { "Pi", 50, 0 }, { "Ei", 60, 0 },
	{ "K", 0, 1 }, { "k", 0, 1 }, { "M", 0, 2 }, { "G", 0, 3 },
	{ "T", 0, 4 }, { "P", 0, 5 }, { "E", 0, 6 },
};

static uint64_t size_mult(size_t i)
{
	uint64_t m = 1;
	unsigned k;

	if (size_units[i].shift)
		return (uint64_t)1 << size_units[i].shift;
	for (k = 0; k < size_units[i].pow10; k++)
		m *= 1000;
	return m;
}

int kit_parse_size(const char *s, size_t len, uint64_t *out_bytes)
{
	uint64_t v, mult = 1;
	int n;

	if (!s)
		return -EINVAL;
	n = parse_digits(s, len, &v);
	if (n < 0)
		return n;
	if (n == 0)
		return -EINVAL;
	if ((size_t)n < len) {
		size_t i, found = 0;
		for (i = 0; i < sizeof size_units / sizeof *size_units; i++) {
			if (suffix_is(s + n, len - (size_t)n, size_units[i].suf)) {
				mult = size_mult(i);
				found = 1;
				break;
			}
		}
		if (!found)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out_bytes = v * mult;
	return 0;
}

const char *kit_format_size(uint64_t bytes, char buf[KIT_UNIT_BUF])
{
	char cand[KIT_UNIT_BUF];
	size_t i;

	snprintf(buf, KIT_UNIT_BUF, "%llu", (unsigned long long)bytes);
	if (bytes == 0)
		return buf;
	for (i = 0; i < sizeof size_units / sizeof *size_units; i++) {
		uint64_t m = size_mult(i);
		if (size_units[i].suf[0] == 'k' || bytes % m != 0)
			continue;
		snprintf(cand, sizeof cand, "%llu%s",
			 (unsigned long long)(bytes / m), size_units[i].suf);
		if (strlen(cand) < strlen(buf))
			memcpy(buf, cand, sizeof cand);
	}
	return buf;
}

static const struct {
	const char *name;
	int signo;
} signal_names[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
	{ "ILL", SIGILL }, { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },
	{ "BUS", SIGBUS }, { "FPE", SIGFPE }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
	{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
	{ "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
	{ "IO", SIGIO }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
	/* Aliases accepted on input only: the loop in kit_format_signal
	 * finds the canonical name first. */
	{ "IOT", SIGABRT }, { "POLL", SIGIO },
};

int kit_parse_signal(const char *s, size_t len, int *out_signo)
{
	uint64_t v;
	size_t i;
	int n;

	if (!s || len == 0)
		return -EINVAL;
	n = parse_digits(s, len, &v);
	if (n < 0)
		return -EINVAL;
	if (n > 0) {
		if ((size_t)n != len || v < 1 || v > (uint64_t)SIGRTMAX)
			return -EINVAL;
		*out_signo = (int)v;
		return 0;
	}
	if (len > 3 && strncasecmp(s, "SIG", 3) == 0) {
		s += 3;
		len -= 3;
	}
	for (i = 0; i < sizeof signal_names / sizeof *signal_names; i++) {
		if (strlen(signal_names[i].name) == len &&
		    strncasecmp(s, signal_names[i].name, len) == 0) {
			*out_signo = signal_names[i].signo;
			return 0;
		}
	}
	if (len >= 5 && strncasecmp(s, "RTMIN", 5) == 0) {
		uint64_t off = 0;
		if (len > 5) {
			if (s[5] != '+' || len == 6)
				return -EINVAL;
			n = parse_digits(s + 6, len - 6, &off);
			if (n <= 0 || (size_t)n != len - 6)
				return -EINVAL;
		}
		if (off > (uint64_t)(SIGRTMAX - SIGRTMIN))
			return -EINVAL;
		*out_signo = SIGRTMIN + (int)off;
		return 0;
	}
	return -EINVAL;
}

const char *kit_format_signal(int signo, char buf[KIT_UNIT_BUF])
{
	size_t i;

	for (i = 0; i < sizeof signal_names / sizeof *signal_names; i++) {
		if (signal_names[i].signo == signo) {
			snprintf(buf, KIT_UNIT_BUF, "%s", signal_names[i].name);
			return buf;
		}
	}
	if (signo == SIGRTMIN)
		snprintf(buf, KIT_UNIT_BUF, "RTMIN");
	else if (signo > SIGRTMIN && signo <= SIGRTMAX)
		snprintf(buf, KIT_UNIT_BUF, "RTMIN+%d", signo - SIGRTMIN);
	else
		snprintf(buf, KIT_UNIT_BUF, "%d", signo);
	return buf;
}
