#include "pod/pod_observe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/tank_map.h"
#include "pod/pod_phase.h"
#include "pod/pod_spec.h"

static const msgpack_object *pod__get(const msgpack_object *m, const char *key)
{
	size_t kl = strlen(key);

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
		    memcmp(k->via.str.ptr, key, kl) == 0)
			return &m->via.map.ptr[i].val;
	}
	return NULL;
}

/* A string field into buf ("" when absent or not a string). */
static const char *pod__str(const msgpack_object *m, const char *key, char *buf, size_t cap)
{
	const msgpack_object *v = pod__get(m, key);

	buf[0] = '\0';
	if (v && v->type == MSGPACK_OBJECT_STR)
		snprintf(buf, cap, "%.*s", (int)v->via.str.size, v->via.str.ptr);
	return buf;
}

static int64_t pod__int(const msgpack_object *m, const char *key)
{
	const msgpack_object *v = pod__get(m, key);

	if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (int64_t)v->via.u64;
	if (v && v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return v->via.i64;
	return 0;
}

static uint64_t pod__mix(uint64_t h, const void *p, size_t n)
{
	return tank_hash64(p, n) ^ (h * 0x100000001b3ull);
}

static bool pod__bool(const msgpack_object *m, const char *key, bool dflt)
{
	const msgpack_object *v = pod__get(m, key);

	return v && v->type == MSGPACK_OBJECT_BOOLEAN ? v->via.boolean : dflt;
}

int pod_observe_status(const msgpack_object *status, rc_observed_t *out)
{
	return pod_observe_status_at(status, 0, out);
}

int pod_observe_status_at(const msgpack_object *status, int64_t now_ms, rc_observed_t *out)
{
	char phase[32], reason[160], outcome[32], exitbuf[64] = "";
	char notready[200] = "", gaveup[200] = "";
	const msgpack_object *ex, *ctrs;
	int64_t until = 0;

	memset(out, 0, sizeof *out);
	if (!status || status->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	pod__str(status, "phase", phase, sizeof phase);
	pod__str(status, "reason", reason, sizeof reason);
	pod__str(status, "outcome", outcome, sizeof outcome);
	/* Decisions read the phase and the outcome as the enums they name;
	 * the reason is only shown. */
	int ph = rc_fsm_phase_of(&pod_fsm, phase);
	ex = pod__get(status, "last_exit");
	if (ex && ex->type == MSGPACK_OBJECT_MAP) {
		int64_t code = pod__int(ex, "code"), sig = pod__int(ex, "signal");
		if (sig)
			snprintf(exitbuf, sizeof exitbuf, "signal %lld", (long long)sig);
		else
			snprintf(exitbuf, sizeof exitbuf, "exit code %lld", (long long)code);
	}
	out->restarts = (uint64_t)pod__int(status, "restarts");
	out->since = pod__int(status, "since");
	/* What its containers say: the first not ready yet (and the latest
	 * end of a probe window among those), and a startup probe that gave
	 * up (the container was stopped for it: its reason says so). */
	ctrs = pod__get(status, "containers");
	for (uint32_t i = 0; ctrs && ctrs->type == MSGPACK_OBJECT_ARRAY &&
			     i < ctrs->via.array.size; i++) {
		const msgpack_object *c = &ctrs->via.array.ptr[i];
		char cphase[32], cname[64], creason[128], probe[80], gave[16];
		pod__str(c, "phase", cphase, sizeof cphase);
		pod__str(c, "name", cname, sizeof cname);
		pod__str(c, "reason", creason, sizeof creason);
		pod__str(c, "probe", probe, sizeof probe);
		pod__str(c, "gave_up", gave, sizeof gave);
		int cp = rc_fsm_phase_of(&pod_ctr_fsm, cphase);
		if (cp != POD_CP_RUNNING && !gaveup[0] &&
		    pod_probe_role_of(gave) == (int)POD_PROBE_STARTUP)
			snprintf(gaveup, sizeof gaveup, "%s: startup probe gave up (%s)", cname,
				 creason);
		if (cp == POD_CP_RUNNING && !pod__bool(c, "ready", true)) {
			int64_t u = pod__int(c, "probe_until");
			if (u > until)
				until = u;
			if (!notready[0])
				snprintf(notready, sizeof notready, "%s: %s", cname,
					 probe[0] ? probe : "no probe result yet");
		}
	}
	out->outcome = pod__mix(0, exitbuf, strlen(exitbuf));
	out->progress = pod__mix(pod__mix(out->outcome, phase, strlen(phase)),
				 reason, strlen(reason));
	if (ph == POD_PP_TERMINAL) {
		out->state = pod_outcome_of(outcome) == POD_OUT_COMPLETED ? RC_OBS_DONE
									   : RC_OBS_FAILED;
	} else if (gaveup[0]) {
		/* A startup probe that gave up is a failure, not a delay. */
		out->state = RC_OBS_FAILED;
		snprintf(out->why, sizeof out->why, "%s", gaveup);
		return 0;
	} else if (pod__bool(status, "held", false) &&
		   (ph == POD_PP_WAITING || ph == POD_PP_PENDING)) {
		/* Its owner does not let it run, and nothing of it runs: what
		 * is desired holds (the owner's own observation says whether
		 * that is what the wait asked). */
		out->state = RC_OBS_DONE;
		snprintf(out->why, sizeof out->why, "held: %s", reason);
		return 0;
	} else if (ph == POD_PP_RUNNING && !pod__bool(status, "ready", true)) {
		/* Running is not ready: its startup or readiness probe has not
		 * passed.  Inside the probes' window that is progress. */
		out->state = RC_OBS_PENDING;
		out->moving = until && now_ms && now_ms < until;
		snprintf(out->why, sizeof out->why, "running, not ready: %s%s", notready,
			 out->moving ? " (inside its probe window)" : "");
		return 0;
	} else if (ph == POD_PP_RUNNING) {
		out->state = RC_OBS_READY;
		for (uint32_t i = 0; ctrs && ctrs->type == MSGPACK_OBJECT_ARRAY &&
				     i < ctrs->via.array.size; i++) {
			const msgpack_object *c = &ctrs->via.array.ptr[i];
			char cphase[32], cname[128];
			int64_t started = pod__int(c, "started_at"), pid = pod__int(c, "pid");
			pod__str(c, "phase", cphase, sizeof cphase);
			if (rc_fsm_phase_of(&pod_ctr_fsm, cphase) != POD_CP_RUNNING)
				continue;
			pod__str(c, "name", cname, sizeof cname);
			out->stability = pod__mix(out->stability, cname, strlen(cname));
			out->stability = pod__mix(out->stability, &started, sizeof started);
			out->stability = pod__mix(out->stability, &pid, sizeof pid);
		}
	} else {
		out->state = RC_OBS_PENDING;
	}
	/* The last exit is added to a reason that is only the outcome's
	 * name ("failed"); a reason of its own ("…: gave up after 3 restarts
	 * …: exited with code 7") already says it.  Words for a person, after
	 * the decision above. */
	bool bare = !reason[0] || pod_outcome_of(reason) != POD_OUT_NONE;
	if (out->state == RC_OBS_FAILED)
		snprintf(out->why, sizeof out->why, "%s%s%s", reason[0] ? reason : "failed",
			 bare && exitbuf[0] ? ", last " : "", bare ? exitbuf : "");
	else
		snprintf(out->why, sizeof out->why, "%s%s%s", phase[0] ? phase : "no status",
			 reason[0] ? ": " : "", reason);
	return 0;
}
